"""``.gq`` mutations: every example of the reference and the seed, semantics, errors and limits.

The examples, the mix refusal, the row limit and the core semantics run on both backends; checks
that do not depend on the storage (type errors, CLI options, preconditions) run locally. Most
calls go through the Python API (:func:`omnigraph.engine.ops.mutate.mutate`) or the
in-process CLI (:func:`graph_helpers.invoke`); refusals compare the whole storage state before
and after.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pytest

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import BadRequest, KeyConflict, PreconditionFailed, ResourceLimit
from omnigraph.engine.gq.syntax import GqError
from omnigraph.engine.graph import Graph, init_graph, open_graph
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.load import load
from omnigraph.engine.ops.mutate import MutationOutcome, mutate
from omnigraph.engine.ops.write import MAX_ROWS
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import OMNIGRAPH, commit_ids, export_text, invoke, storage_state

SCHEMA = """
node Person  { name: String @key   age: I32?   email: String? @unique   title: String? }
node Company { name: String @key }
node Tag     { label: String  seen: DateTime? }
node Membership { tenant: String  slot: U32  label: String?  @key(tenant, slot) }
edge Knows:   Person -> Person { since: Date? }
edge WorksAt: Person -> Company
edge Tagged:  Person -> Tag
"""
REFERENCE_QUERIES = """
query onboard($name: String, $title: String?) {
  insert Person { name: $name, age: 30 }
  insert WorksAt { from: $name, to: "Acme" }
}
query rename_title($name: String, $age: I32) { update Person set { age: $age } where name = $name }
query remove($name: String) { delete Person where name = $name }
"""
SEED_ONBOARD = """
query onboard($name: String, $title: String) {
  insert Person { name: $name, title: $title }
}
"""
MIX_MESSAGE = (
    "mutation 'both' on the same query mixes inserts/updates and deletes; split into separate "
    "mutations: (1) inserts and updates, then (2) deletes."
)


def _graph(uri: str) -> Graph:
    graph = init_graph(open_store(uri), SCHEMA, FENCED_PROFILE, "tests")
    base = [
        {"type": "Company", "data": {"name": "Acme"}},
        {"type": "Person", "data": {"name": "Bob", "age": 40, "email": "bob@example.com"}},
        {"type": "Person", "data": {"name": "Cy", "age": 50}},
        {"edge": "Knows", "from": "Bob", "to": "Cy", "data": {"id": "k1"}},
        {"edge": "Knows", "from": "Cy", "to": "Bob", "data": {"id": "k2"}},
    ]
    load(graph, "".join(json.dumps(r) + "\n" for r in base).encode(), mode="append", branch="main", actor="tests")
    return graph


def _run(graph: Graph, source: str, query_name: str | None = None, **params: object) -> MutationOutcome:
    return mutate(graph, source, name=query_name, params=dict(params), branch="main", actor="tests")


def _records(uri: str, branch: str = "main") -> dict[tuple[str, str], dict]:
    result = {}
    for line in export_text(uri, branch).splitlines():
        record = json.loads(line)
        kind = f"edge:{record['edge']}" if "edge" in record else f"node:{record['type']}"
        result[(kind, record["data"]["id"])] = record
    return result


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_reference_examples(root_uri: str) -> None:
    graph = _graph(root_uri)
    onboarded = _run(graph, REFERENCE_QUERIES, "onboard", name="Ann")
    assert onboarded.document() == {
        "affected_nodes": 1,
        "affected_edges": 1,
        "distinct_nodes": 1,
        "distinct_edges": 1,
        "commit": onboarded.commit.commit_id,
    }
    records = _records(root_uri)
    assert records[("node:Person", "Ann")]["data"] == {"id": "Ann", "name": "Ann", "age": 30}
    [works] = [r for k, r in records.items() if k[0] == "edge:WorksAt"]
    assert (works["from"], works["to"]) == ("Ann", "Acme")

    renamed = _run(graph, REFERENCE_QUERIES, "rename_title", name="Ann", age=31)
    assert (renamed.affected_nodes, renamed.affected_edges) == (1, 0)
    assert _records(root_uri)[("node:Person", "Ann")]["data"]["age"] == 31

    removed = _run(graph, REFERENCE_QUERIES, "remove", name="Ann")
    assert (removed.affected_nodes, removed.affected_edges) == (1, 1)  # the WorksAt edge went with it
    records = _records(root_uri)
    assert ("node:Person", "Ann") not in records
    assert not [k for k in records if k[0] == "edge:WorksAt"]
    assert commit_ids(root_uri)[:3] == [removed.commit.commit_id, renamed.commit.commit_id, onboarded.commit.commit_id]


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_seed_examples(root_uri: str) -> None:
    graph = _graph(root_uri)
    result = _run(graph, SEED_ONBOARD, name="Dee", title="CTO")
    assert result.affected_nodes == 1
    assert _records(root_uri)[("node:Person", "Dee")]["data"] == {"id": "Dee", "name": "Dee", "title": "CTO"}
    # The seed spells edge endpoints as properties (person:/org:); this engine names them from:/to:.
    before = storage_state(root_uri)
    with pytest.raises(GqError) as refused:
        _run(graph, "query q($p: String, $o: String) {\n  insert WorksAt { person: $p, org: $o }\n}", p="Dee", o="Acme")
    assert refused.value.details == {"line": 2, "column": 20, "token": "person"}
    assert "has no property 'person'" in refused.value.message
    assert storage_state(root_uri) == before


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_mix_is_refused_before_any_io(root_uri: str, tmp_path: Path) -> None:
    source = 'query both() {\n  insert Company { name: "X" }\n  delete Person where name = "Bob"\n}\n'
    query = tmp_path / "mix.gq"
    query.write_text(source)
    # No graph at all: the refusal comes before the root is even opened.
    absent = invoke(OMNIGRAPH, "mutate", "--query", query, "--json", str(tmp_path / "nowhere"))
    assert absent.returncode == 1
    assert absent.json()["error"]["message"] == MIX_MESSAGE
    assert absent.json()["error"]["details"] == {"query": "both", "line": 3, "column": 3, "token": "delete"}
    graph = _graph(root_uri)
    before = storage_state(root_uri)
    with pytest.raises(BadRequest) as refused:
        _run(graph, source)
    assert refused.value.message == MIX_MESSAGE
    assert storage_state(root_uri) == before
    # What the message advises: the inserts/updates, then the deletes, as two mutations.
    assert _run(graph, 'query writes() { insert Company { name: "X" } }').affected_nodes == 1
    assert _run(graph, 'query deletes() { delete Person where name = "Bob" }').affected_nodes == 1
    assert {("node:Company", "X")} <= set(_records(root_uri)) and ("node:Person", "Bob") not in _records(root_uri)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_keyed_insert_replaces_the_whole_row_and_unkeyed_inserts_are_strict(root_uri: str) -> None:
    graph = _graph(root_uri)
    _run(graph, 'query q() { insert Person { name: "Bob", title: "Dr" } }')
    assert _records(root_uri)[("node:Person", "Bob")]["data"] == {"id": "Bob", "name": "Bob", "title": "Dr"}
    composite = _run(graph, 'query q() { insert Membership { tenant: "acme", slot: 7 } }')
    assert composite.affected_nodes == 1
    assert ("node:Membership", '["7","acme"]') in _records(root_uri)
    first = _run(graph, 'query q() { insert Tag { label: "x" } insert Tag { label: "x" } }')
    assert first.affected_nodes == 2
    tags = [k for k in _records(root_uri) if k[0] == "node:Tag"]
    assert len(tags) == 2 and len({k[1] for k in tags}) == 2
    # An explicit id on an unkeyed type is strict: a second insert of it is key_conflict.
    _run(graph, 'query q() { insert Tag { id: "t1", label: "y" } }')
    before = storage_state(root_uri)
    with pytest.raises(KeyConflict) as conflict:
        _run(graph, 'query q() { insert Tag { id: "t1", label: "z" } }')
    assert conflict.value.details == {"entity_kind": "node", "type_name": "Tag", "entity_id": "t1"}
    assert storage_state(root_uri) == before
    with pytest.raises(BadRequest, match="does not match the id 'Bob' derived"):
        _run(graph, 'query q() { insert Person { id: "Robert", name: "Bob" } }')


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_insert_then_update_counts_two_per_statement_and_one_distinct(root_uri: str) -> None:
    graph = _graph(root_uri)
    result = _run(graph, 'query q() { insert Person { name: "Zed", age: 1 }  update Person set { age: 2 } where name = "Zed" }')
    assert (result.affected_nodes, result.distinct_nodes) == (2, 1)
    assert result.document()["distinct_nodes"] == 1


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_read_your_writes_across_statements(root_uri: str) -> None:
    graph = _graph(root_uri)
    source = """
    query q($at: DateTime) {
      insert Person { name: "Eve", age: 20 }
      update Person set { age: 21, email: "eve@example.com" } where name = "Eve"
      insert Tag { id: "t9", label: "new" }
      update Tag set { seen: $at } where label = "new"
      insert Tagged { from: "Eve", to: "t9" }
      insert Knows { from: "Eve", to: "Bob", since: "2024-01-02" }
      update Person set { title: "old" } where age >= 21
    }"""
    result = _run(graph, source, at="2024-05-06T07:08:09.123Z")
    # per statement: Eve, Eve, t9, t9, then Eve, Bob and Cy; distinct: Eve, Bob, Cy, t9
    assert (result.affected_nodes, result.affected_edges) == (7, 2)
    assert (result.distinct_nodes, result.distinct_edges) == (4, 2)
    records = _records(root_uri)
    assert records[("node:Person", "Eve")]["data"] == {"id": "Eve", "name": "Eve", "age": 21, "email": "eve@example.com", "title": "old"}
    assert records[("node:Person", "Bob")]["data"]["title"] == "old"
    assert records[("node:Tag", "t9")]["data"]["seen"] == "2024-05-06T07:08:09.123Z"
    knows = [r for k, r in records.items() if k[0] == "edge:Knows" and r["from"] == "Eve"]
    assert knows[0]["data"]["since"] == "2024-01-02"
    deleted = _run(
        graph, 'query d() { delete Knows where from = "Bob"  delete Person where name = "Bob"  delete Person where name = "Bob" }'
    )
    # k1 by the first statement; the node delete cascades to k2 (dst) and Eve's edge; the repeat matches nothing.
    assert (deleted.affected_nodes, deleted.affected_edges) == (1, 3)
    assert (deleted.distinct_nodes, deleted.distinct_edges) == (1, 3)
    assert not [k for k in _records(root_uri) if k[0] == "edge:Knows"]


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_now_and_update_of_an_unkeyed_node(root_uri: str) -> None:
    graph = _graph(root_uri)
    _run(graph, 'query q() { insert Tag { id: "t1", label: "a" } }')
    started = int(time.time() * 1000)
    result = _run(graph, 'query q() { update Tag set { seen: now() } where id = "t1" }')
    assert result.affected_nodes == 1
    seen = dt.datetime.fromisoformat(_records(root_uri)[("node:Tag", "t1")]["data"]["seen"])
    assert started <= seen.timestamp() * 1000 <= time.time() * 1000


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_nothing_matched_publishes_no_commit(root_uri: str, tmp_path: Path) -> None:
    _graph(root_uri)
    query = tmp_path / "q.gq"
    query.write_text('query q() { update Person set { age: 1 } where name = "nobody" }')
    before = storage_state(root_uri)
    human = invoke(OMNIGRAPH, "mutate", "--query", query, root_uri)
    assert human.returncode == 0, human.describe()
    assert human.stdout == "affected_nodes: 0\naffected_edges: 0\ndistinct_nodes: 0\ndistinct_edges: 0\ncommit: null\n"
    as_json = invoke(OMNIGRAPH, "mutate", "--query", query, "--json", root_uri)
    assert as_json.json() == {"affected_nodes": 0, "affected_edges": 0, "distinct_nodes": 0, "distinct_edges": 0, "commit": None}
    query.write_text('query q() { delete Knows where id = "none" }')
    assert invoke(OMNIGRAPH, "mutate", "--query", query, "--json", root_uri).json()["commit"] is None
    assert storage_state(root_uri) == before


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_cli_names_params_branch_and_if_commit(root_uri: str, tmp_path: Path) -> None:
    _graph(root_uri)
    query = tmp_path / "ref.gq"
    query.write_text(REFERENCE_QUERIES)
    several = invoke(OMNIGRAPH, "mutate", "--query", query, "--json", root_uri)
    assert several.returncode == 1
    assert several.json()["error"]["details"] == {"queries": ["onboard", "rename_title", "remove"]}
    assert "--name (onboard, rename_title, remove)" in several.stderr
    missing = invoke(OMNIGRAPH, "mutate", "--query", query, "--name", "rename_title", "--params", '{"name": "Bob"}', root_uri)
    assert missing.returncode == 1 and "needs parameter $age (I32)" in missing.stderr
    bad_json = invoke(OMNIGRAPH, "mutate", "--query", query, "--name", "remove", "--params", "{", root_uri)
    assert bad_json.returncode == 2
    head = commit_ids(root_uri)[0]
    create_branch(open_graph(open_store(root_uri), FENCED_PROFILE, write=True), "feat")
    on_branch = invoke(
        OMNIGRAPH,
        "mutate",
        "--query",
        query,
        "--name",
        "rename_title",
        "--params",
        '{"name": "Bob", "age": 41}',
        "--branch",
        "feat",
        "--if-commit",
        head,
        "--json",
        root_uri,
    )
    assert on_branch.returncode == 0, on_branch.describe()
    assert on_branch.json()["affected_nodes"] == 1
    assert _records(root_uri, "feat")[("node:Person", "Bob")]["data"]["age"] == 41
    assert _records(root_uri)[("node:Person", "Bob")]["data"]["age"] == 40
    before = storage_state(root_uri)
    stale = invoke(
        OMNIGRAPH,
        "mutate",
        "--query",
        query,
        "--name",
        "remove",
        "--params",
        '{"name": "Bob"}',
        "--branch",
        "feat",
        "--if-commit",
        head,
        "--json",
        root_uri,
    )
    assert stale.returncode == 1
    error = stale.json()["error"]
    assert error["code"] == "precondition_failed"
    assert error["details"] == {"expected": head, "actual": on_branch.json()["commit"]}
    assert storage_state(root_uri) == before
    current = on_branch.json()["commit"]
    chunked = invoke(OMNIGRAPH, "mutate", "--query", query, "--name", "remove", "--chunk-rows", "10", "--if-commit", current, root_uri)
    assert chunked.returncode == 2 and "--if-commit and --chunk-rows do not combine" in chunked.stderr, chunked.describe()
    assert storage_state(root_uri) == before


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_update_refusals_and_validation(root_uri: str) -> None:
    graph = _graph(root_uri)
    before = storage_state(root_uri)
    cases = [
        ('query q() {\n  update Person set { name: "B" } where age > 1\n}', (2, 23, "name"), "@key member"),
        ('query q() { update Knows set { since: 1 } where id = "k1" }', (1, 13, "update"), "node types only"),
        ('query q() { update Person set { email: "cy@example.com" } where age > 1 }', None, "@unique"),
        ('query q() { update Person set { email: "bob@example.com" } where name = "Cy" }', None, "already used by id 'Bob'"),
        ('query q() { insert Knows { from: "Bob", to: "Zed" } }', None, "line 1: the mutation is invalid: edge:Knows"),
        ('query q() { insert Person { name: "Bob", age: "x" } }', (1, 47, '"x"'), "expected I32"),
        ('query q($a: I64) { update Person set { age: $a } where name = "Bob" }', (1, 45, "$a"), "declared I64"),
        ("query q($a: I32?) { update Person set { age: 1 } where age = $a }", (1, 62, "$a"), "nullable"),
        ('query q() { insert Person { name: "Bob", age: now() } }', (1, 47, "now"), "now() is a DateTime"),
        ("query q() { insert Tag { } }", (1, 20, "Tag"), "needs property 'label'"),
        ("query q() { insert Nope { } }", (1, 20, "Nope"), "unknown node or edge type"),
        ("query q() { delete Person where name = null }", (1, 40, "null"), "null is not allowed"),
        ("query q() { insert Person { name: $who } }", (1, 35, "$who"), "undeclared parameter"),
    ]
    for source, where, text in cases:
        with pytest.raises(BadRequest) as refused:
            _run(graph, source)
        assert text in refused.value.message, (source, refused.value.message)
        if where is not None:
            line, column, token = where
            assert isinstance(refused.value, GqError), source
            assert refused.value.details == {"line": line, "column": column, "token": token}, source
    assert storage_state(root_uri) == before


@pytest.mark.parametrize(
    "source, line, column, token, text",
    [
        ("query q() { insert }", 1, 20, "}", "a node or edge type name"),
        ("query q() {\n  update Person set { age: 1 }\n}", 3, 1, "}", "'where'"),
        ("query q() { delete Person where age ~ 1 }", 1, 37, "~", "unexpected character"),
        ('query q() {\n  insert Tag { label: "abc }\n}', 2, 23, '"abc }', "unterminated string"),
        ("query q($a: Foo) { delete Tag where id = $a }", 1, 13, "Foo", "expected a type"),
        ("query q() { }", 1, 13, "}", "has no statement"),
        ("", 1, 1, "", "at least one query"),
        ("query q() { delete Tag where id = 1 } query q() { delete Tag where id = 2 }", 1, 45, "q", "duplicate query name"),
        ("query q() { insert Tag { label: [1, [2]] } }", 1, 37, "[", "scalar literals only"),
        ('query q() { insert Tag { label: "a" label: "b" } }', 1, 37, "label", "a line break or '}'"),
    ],
)
def test_parse_errors_name_line_column_and_token(source: str, line: int, column: int, token: str, text: str) -> None:
    from omnigraph.engine.gq.parser import parse

    with pytest.raises(GqError) as refused:
        parse(source)
    assert refused.value.details == {"line": line, "column": column, "token": token}
    assert text in refused.value.message
    assert refused.value.message.startswith(f"gq error at {line}:{column} near ")


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_row_limit_counts_an_updates_matched_rows(root_uri: str) -> None:
    graph = init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE, "tests")
    tags = "".join(json.dumps({"type": "Tag", "data": {"id": f"t{i:05d}", "label": "bulk"}}) + "\n" for i in range(MAX_ROWS + 1))
    load(graph, tags.encode(), mode="append", branch="main", actor="tests", chunk_rows=MAX_ROWS)
    at_limit = _run(graph, 'query q() { update Tag set { label: "done" } where id != "t08192" }')
    assert at_limit.affected_nodes == MAX_ROWS
    before = storage_state(root_uri)
    with pytest.raises(ResourceLimit) as refused:
        _run(graph, 'query q() { insert Tag { id: "extra", label: "x" }  update Tag set { label: "again" } where id != "t00000" }')
    assert refused.value.details == {"resource": "rows", "limit": MAX_ROWS, "actual": MAX_ROWS + 1, "table_key": "node:Tag"}
    assert storage_state(root_uri) == before


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_if_commit_precondition_in_the_api(root_uri: str) -> None:
    graph = _graph(root_uri)
    head = commit_ids(root_uri)[0]
    with pytest.raises(PreconditionFailed) as refused:
        mutate(graph, 'query q() { insert Tag { label: "x" } }', branch="main", if_commit="not-the-head", actor="t")
    assert refused.value.details == {"expected": "not-the-head", "actual": head}
    assert refused.value.http_status == 412


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_arrow_bytes_limit_refuses_before_anything_is_armed(root_uri: str) -> None:
    graph = _graph(root_uri)
    before = storage_state(root_uri)
    big = "x" * (32 * 1024 * 1024)
    with pytest.raises(ResourceLimit) as refused:
        _run(graph, "query q($big: String) { insert Tag { label: $big } }", big=big)
    details = refused.value.details
    assert (details["resource"], details["limit"], details["table_key"]) == ("arrow_bytes", 32 * 1024 * 1024, "node:Tag")
    assert details["actual"] > details["limit"]
    assert refused.value.http_status == 413
    assert storage_state(root_uri) == before
