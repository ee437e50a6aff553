"""Schema constraints on every write path: ``@range``, ``@check``, composite ``@unique`` and
``@card``, each accepted at its bound and refused one past it, on load (append, merge,
overwrite, with both writers' profiles), ``mutate`` (insert, update, delete) and branch merge;
every refusal names the type, property, id and line and leaves the storage untouched.

In-process; local, except the load refusals of both writers, which also run on S3 (the checks
run in ``prepare``, above the storage layer)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.door.routing import EngineProfile
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import BadRequest, MergeConflict
from omnigraph.engine.graph import Graph, init_graph
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.constraints import constraint_problems
from omnigraph.engine.ops.load import load
from omnigraph.engine.ops.merge import merge_branch
from omnigraph.engine.ops.merge_diff import TableChanges
from omnigraph.engine.ops.mutate import mutate
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import export_text, storage_state

SCHEMA = """
node Person  { name: String @key  age: I32?  code: String?  @range(age, 0..150)  @check(code, "[A-Z]{3}") }
node Company { name: String @key  tenant: String?  slot: I32?  @unique(tenant, slot) }
node Team    { name: String @key }
edge WorksAt: Person -> Company @card(0..1)
edge Lead: Team -> Person @card(1..2) { @unique(src, dst) }
"""
BASE: list[dict[str, Any]] = [
    {"type": "Person", "data": {"name": "p"}},
    {"type": "Person", "data": {"name": "q"}},
    {"type": "Person", "data": {"name": "r"}},
    {"type": "Company", "data": {"name": "x", "tenant": "t", "slot": 1}},
    {"type": "Company", "data": {"name": "c2"}},
    {"type": "Team", "data": {"name": "t1"}},
    {"edge": "WorksAt", "from": "p", "to": "x", "data": {"id": "w1"}},
    {"edge": "Lead", "from": "t1", "to": "p", "data": {"id": "l1"}},
]
ACTOR = "tests"


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode()


def _graph(root: Path | str, profile: EngineProfile = FENCED_PROFILE) -> Graph:
    graph = init_graph(open_store(str(root)), SCHEMA, profile, ACTOR)
    load(graph, _jsonl(BASE), mode="append", branch="main", actor=ACTOR)
    return graph


def _gq_value(value: Any) -> str:
    return json.dumps(value)


def _statement(record: dict[str, Any]) -> str:
    if "type" in record:
        fields = ", ".join(f"{k}: {_gq_value(v)}" for k, v in record["data"].items())
        return f"insert {record['type']} {{ {fields} }}"
    fields = [f"from: {_gq_value(record['from'])}", f"to: {_gq_value(record['to'])}"]
    fields += [f"{k}: {_gq_value(v)}" for k, v in record.get("data", {}).items()]
    return f"insert {record['edge']} {{ {', '.join(fields)} }}"


def _table_of(record: dict[str, Any]) -> str:
    return f"node:{record['type']}" if "type" in record else f"edge:{record['edge']}"


Write = Callable[[Graph, list[dict[str, Any]]], object]


def _load(mode: str) -> Write:
    def write(graph: Graph, records: list[dict[str, Any]]) -> object:
        if mode == "overwrite":  # the file replaces its tables: it carries their base rows too
            tables = {_table_of(record) for record in records}
            records = [record for record in BASE if _table_of(record) in tables] + records
        # a blank first line: the refused record's line number is not its index
        return load(graph, b"\n" + _jsonl(records), mode=mode, branch="main", actor=ACTOR)  # type: ignore[arg-type]

    return write


def _mutate(graph: Graph, records: list[dict[str, Any]]) -> object:
    body = "\n  ".join(_statement(record) for record in records)
    return mutate(graph, f"query change() {{\n  {body}\n}}", branch="main", actor=ACTOR)


WRITES: dict[str, Write] = {
    "load-append": _load("append"),
    "load-merge": _load("merge"),
    "load-overwrite": _load("overwrite"),
    "mutate": _mutate,
}


@dataclass(frozen=True)
class Case:
    accepted: list[dict[str, Any]]
    refused: list[dict[str, Any]]
    fragment: str
    details: dict[str, Any]


CASES = {
    "range-high": Case(
        [{"type": "Person", "data": {"name": "a", "age": 150}}],
        [{"type": "Person", "data": {"name": "b", "age": 151}}],
        "Person.age value 151 is outside @range(age, 0..150)",
        {"type_name": "Person", "property": "age", "id": "b"},
    ),
    "range-low": Case(
        [{"type": "Person", "data": {"name": "a", "age": 0}}],
        [{"type": "Person", "data": {"name": "b", "age": -1}}],
        "Person.age value -1 is outside @range(age, 0..150)",
        {"type_name": "Person", "property": "age", "id": "b"},
    ),
    "check": Case(
        [{"type": "Person", "data": {"name": "a", "code": "ABC"}}],
        [{"type": "Person", "data": {"name": "b", "code": "ABCD"}}],
        "Person.code value 'ABCD' does not match @check(code, \"[A-Z]{3}\")",
        {"type_name": "Person", "property": "code", "id": "b"},
    ),
    "unique": Case(
        [
            {"type": "Company", "data": {"name": "y", "tenant": "t", "slot": 2}},
            {"type": "Company", "data": {"name": "z", "tenant": "t"}},
            {"type": "Company", "data": {"name": "z2", "tenant": "t"}},
        ],
        [{"type": "Company", "data": {"name": "y", "tenant": "t", "slot": 1}}],
        "(tenant, slot)",
        {"type_name": "Company", "property": "tenant, slot", "id": "y"},
    ),
    "card-max": Case(
        [{"edge": "WorksAt", "from": "q", "to": "x"}],
        [{"edge": "WorksAt", "from": "p", "to": "c2"}],
        "Person 'p': would be the source of 2 WorksAt edge(s), outside @card(0..1)",
        {"type_name": "Person", "property": "WorksAt", "id": "p"},
    ),
    "card-min": Case(
        [{"type": "Team", "data": {"name": "t2"}}, {"edge": "Lead", "from": "t2", "to": "q"}, {"edge": "Lead", "from": "t2", "to": "r"}],
        [{"type": "Team", "data": {"name": "t3"}}],
        "Team 't3': would be the source of 0 Lead edge(s), outside @card(1..2)",
        {"type_name": "Team", "property": "Lead", "id": "t3"},
    ),
    "card-over-max": Case(
        [{"edge": "Lead", "from": "t1", "to": "q"}],
        [{"edge": "Lead", "from": "t1", "to": "q"}, {"edge": "Lead", "from": "t1", "to": "r"}],
        "Team 't1': would be the source of 3 Lead edge(s), outside @card(1..2)",
        {"type_name": "Team", "property": "Lead", "id": "t1"},
    ),
}


def _refused(graph: Graph, root: Path | str, write: Write, records: list[dict[str, Any]]) -> BadRequest:
    before = storage_state(str(root))
    with pytest.raises(BadRequest) as caught:
        write(graph, records)
    assert storage_state(str(root)) == before
    return caught.value


@pytest.mark.parametrize("path", sorted(WRITES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_constraint_at_its_bound_and_one_past_it(tmp_path: Path, case: str, path: str) -> None:
    graph, write, expected = _graph(tmp_path / "g"), WRITES[path], CASES[case]
    error = _refused(graph, tmp_path / "g", write, expected.refused)
    assert expected.fragment in error.message
    problem = error.details if path != "mutate" else error.details["problems"][0]
    named = {
        "type_name": problem.get("type_name", problem.get("table_key", ":").split(":")[1]),
        "property": problem.get("property", problem.get("edge")),
        "id": problem["id"],
    }
    assert named == expected.details
    line = problem["line"]
    if path == "mutate":
        assert line == 2 and error.message.startswith("line 2:")
    elif path == "load-overwrite":  # the file starts with the base rows of its tables
        assert isinstance(line, int) and error.message.startswith(f"line {line}:")
    else:
        assert line == 2 and error.message.startswith("line 2:")
    write(graph, expected.accepted)


@pytest.mark.parametrize("profile", [FENCED_PROFILE, LEGACY_PROFILE], ids=["format-5", "format-4"])
def test_both_writers_enforce_on_load_on_both_backends(root_uri: str, profile: EngineProfile) -> None:
    graph = _graph(root_uri, profile)
    for case in ("range-high", "check", "unique", "card-max", "card-min"):
        error = _refused(graph, root_uri, WRITES["load-append"], CASES[case].refused)
        assert CASES[case].fragment in error.message
        WRITES["load-merge"](graph, CASES[case].accepted)


def _run(graph: Graph, query: str) -> object:
    return mutate(graph, query, branch="main", actor=ACTOR)


def test_update_at_the_bound_and_one_past_it(tmp_path: Path) -> None:
    graph = _graph(tmp_path / "g")
    error = _refused(graph, tmp_path / "g", lambda g, _r: _run(g, 'query u() {\n update Person set { age: 151 } where name = "p" }'), [])
    assert error.message.startswith("line 2:") and "Person.age value 151" in error.message
    _run(graph, 'query u() { update Person set { age: 150 } where name = "p" }')
    clash = 'query u() { update Company set { tenant: "t", slot: 1 } where name = "c2" }'
    error = _refused(graph, tmp_path / "g", lambda g, _r: _run(g, clash), [])
    assert "(tenant, slot) value ['t', 1] is already used by id 'x' (@unique)" in error.message
    _run(graph, 'query u() { update Company set { tenant: "t", slot: 2 } where name = "c2" }')


def test_a_delete_that_drops_a_source_below_its_minimum_is_refused(tmp_path: Path) -> None:
    graph = _graph(tmp_path / "g")
    refusals = {
        'query d() {\n  delete Lead where id = "l1"\n}': "line 2:",
        'query d() {\n\n  delete Person where name = "p"\n}': "line 3:",  # the cascade removes l1
    }
    for query, line in refusals.items():
        error = _refused(graph, tmp_path / "g", lambda g, _r, q=query: _run(g, q), [])
        assert error.message.startswith(line) and "Team 't1': would be the source of 0 Lead edge(s)" in error.message
    _run(graph, 'query d() { insert Lead { from: "t1", to: "q", id: "l2" } }')
    _run(graph, 'query d() { delete Lead where id = "l1" }')  # back at the minimum
    _run(graph, 'query d() { delete Team where name = "t1" }')  # a deleted source is exempt
    assert '"Team"' not in export_text(str(tmp_path / "g"))


def _merge_refused(graph: Graph, root: Path) -> MergeConflict:
    before = storage_state(str(root))
    with pytest.raises(MergeConflict) as caught:
        merge_branch(graph, "side", "main", actor=ACTOR)
    assert storage_state(str(root)) == before
    return caught.value


MERGES = {
    # (records loaded on main, records loaded on side, refused kind or None)
    "unique": (
        [{"type": "Company", "data": {"name": "m", "tenant": "u", "slot": 1}}],
        [{"type": "Company", "data": {"name": "s", "tenant": "u", "slot": 1}}],
        "unique_violation",
    ),
    "unique-ok": (
        [{"type": "Company", "data": {"name": "m", "tenant": "u", "slot": 1}}],
        [{"type": "Company", "data": {"name": "s", "tenant": "u", "slot": 2}}],
        None,
    ),
    "card-max": ([{"edge": "Lead", "from": "t1", "to": "q"}], [{"edge": "Lead", "from": "t1", "to": "r"}], "cardinality_violation"),
    "card-max-ok": ([{"edge": "Lead", "from": "t1", "to": "q"}], [{"type": "Person", "data": {"name": "s", "age": 150}}], None),
}


@pytest.mark.parametrize("name", sorted(MERGES))
def test_merge_checks_the_merged_result(tmp_path: Path, name: str) -> None:
    graph = _graph(tmp_path / "g")
    create_branch(graph, "side")
    on_main, on_side, refused = MERGES[name]
    load(graph, _jsonl(on_main), mode="append", branch="main", actor=ACTOR)
    load(graph, _jsonl(on_side), mode="append", branch="side", actor=ACTOR)
    if refused is None:
        assert merge_branch(graph, "side", "main", actor=ACTOR).outcome == "merged"
        return
    error = _merge_refused(graph, tmp_path / "g")
    kinds = [c["kind"] for c in error.details["conflicts"]]
    assert kinds == [refused] and "fix" in error.details["conflicts"][0]


def test_merge_refuses_deletes_on_both_sides_that_empty_a_source(tmp_path: Path) -> None:
    graph = _graph(tmp_path / "g")
    _run(graph, 'query a() { insert Lead { from: "t1", to: "q", id: "l2" } }')
    create_branch(graph, "side")
    _run(graph, 'query d() { delete Lead where id = "l1" }')
    mutate(graph, 'query d() { delete Lead where id = "l2" }', branch="side", actor=ACTOR)
    error = _merge_refused(graph, tmp_path / "g")
    assert [(c["kind"], c["id"], c["count"]) for c in error.details["conflicts"]] == [("cardinality_violation", "t1", 0)]


def test_merge_and_mutate_check_value_rules_of_incoming_rows(tmp_path: Path) -> None:
    """A row past a bound cannot reach a branch through a writer, so the check of the rows a
    merge brings in is exercised on a hand-made incoming table."""
    graph = _graph(tmp_path / "g")
    table = graph.catalog.node("Person")
    rows = pa.Table.from_pylist(
        [{"id": "a", "name": "a", "age": 150, "code": "ABC"}, {"id": "b", "name": "b", "age": 151, "code": "AB"}],
        schema=table.arrow_schema(with_pk=True),
    )
    snapshot = graph.manifest.snapshot("main")
    problems = constraint_problems(
        graph, snapshot, {"node:Person": TableChanges("node:Person", inserts=["a", "b"])}, {"node:Person": rows}, "side"
    )
    assert [(p["kind"], p["id"], p["property"], p["value"]) for p in problems] == [
        ("range_violation", "b", "age", 151),
        ("check_violation", "b", "code", "AB"),
    ]
