"""Schema evolution (``schema plan`` / ``schema apply``): every kind of step, applied to a graph of
three branches: ``main``, ``dev`` (forked from main, with writes of its own) and ``lazy`` (forked
from main and never written, so it inherits main's table images).

After each change every branch exports its rows as the new schema holds them (ids and edges kept
through renames, added properties null or at their default, dropped ones gone), ``check`` is
clean, a write lands on every branch, and the commits before the change still read with the old
schema (``--at``). ``plan`` and every refusal write nothing; a branch forked before a change
merges into main after it; a writer validated against the old schema is refused; a format-4 graph
is refused; concurrent strict inserts after a change admit exactly one. Local, in-process for
speed; one representative change also runs through the CLI on S3.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import omnigraph
from omnigraph.engine.storage.names import SCHEMA_CHANGE_PATH, SCHEMA_FILE
from omnigraph.engine.storage.store import open_store
from tests.conftest import new_root
from tests.support.graph_helpers import OMNIGRAPH, invoke
from tests.support.process_race import race

BASE = """\
node Person { name: String @key  age: I32?  nick: String? }
node Company { name: String @key }
edge Knows: Person -> Person { since: I32? }
edge WorksAt: Person -> Company
"""
MAIN_ROWS = [
    {"type": "Person", "data": {"name": "ann", "age": 30, "nick": "annie"}},
    {"type": "Person", "data": {"name": "bob", "age": 40}},
    {"type": "Person", "data": {"name": "cid", "nick": "cee"}},
    {"type": "Company", "data": {"name": "acme"}},
    {"edge": "Knows", "from": "ann", "to": "bob", "data": {"id": "k1", "since": 2020}},
    {"edge": "Knows", "from": "bob", "to": "cid", "data": {"id": "k2"}},
    {"edge": "WorksAt", "from": "ann", "to": "acme", "data": {"id": "w1"}},
]
DEV_ROWS = [  # loaded with --mode merge on dev: bob is updated, dee and her edges are new
    {"type": "Person", "data": {"name": "bob", "age": 41}},
    {"type": "Person", "data": {"name": "dee", "age": 30, "nick": "dee"}},
    {"edge": "Knows", "from": "dee", "to": "ann", "data": {"id": "k3"}},
    {"edge": "WorksAt", "from": "dee", "to": "acme", "data": {"id": "w2"}},
]
BRANCHES = ("main", "dev", "lazy")
STEP_KEYS = {
    "kind",
    "table_key",
    "detail",
    "from_table_key",
    "property",
    "from_property",
    "default",
    "constraint",
    "members",
    "validates",
    "data_loss",
}

Record = dict[str, Any]
Rows = dict[tuple[str, str], Record]


# -- helpers ------------------------------------------------------------------------------------


def label(record: Record) -> str:
    return str(record.get("type") or record["edge"])


def exported(record: Record) -> Record:
    """A loaded record as export writes it back (keyed nodes get ``data.id`` = their key)."""
    data = dict(record["data"])
    data.setdefault("id", data.get("name"))
    return {**record, "data": data}


def keyed(records: list[Record]) -> Rows:
    return {(label(r), r["data"]["id"]): r for r in records}


def rows(graph: omnigraph.Graph, branch: str, at: str | None = None) -> Rows:
    return keyed(list(graph.export(branch, at=at)))


def digest(uri: str, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every object under the graph root with its content hash (paths starting with ``skip`` left out):
    the sha256 of its bytes, or on S3 the object's ETag (an MD5 of them)."""
    store = open_store(uri)
    prefix = store.root.rstrip("/") + "/"
    found = {}
    for path, info in store.fs.find(store.root, detail=True).items():
        rel = path[len(prefix) :] if path.startswith(prefix) else path
        if not rel.startswith(skip):
            found[rel] = str(info.get("ETag") or hashlib.sha256(store.fs.cat_file(path)).hexdigest())
    return found


def build(uri: str) -> omnigraph.Graph:
    """main with MAIN_ROWS; dev forked from it with DEV_ROWS merged; lazy forked from main, never written."""
    graph = omnigraph.init(uri, BASE)
    graph.load(MAIN_ROWS, mode="append")
    graph.create_branch("dev")
    graph.load(DEV_ROWS, mode="merge", branch="dev")
    graph.create_branch("lazy")
    return graph


def assert_clean(graph: omnigraph.Graph) -> None:
    report = graph.check()
    assert report.ok, report


def heads(graph: omnigraph.Graph) -> dict[str, str]:
    return {branch: graph.commits(branch)[0].commit_id for branch in BRANCHES}


# -- one case per kind of step ------------------------------------------------------------------


def same(record: Record) -> Record | None:
    return record


def with_score(record: Record) -> Record | None:
    if label(record) != "Person":
        return record
    return {**record, "data": {**record["data"], "score": 7}}


def renamed_types(record: Record) -> Record | None:
    if "type" in record and record["type"] == "Person":
        return {**record, "type": "Human"}
    if record.get("edge") == "Knows":
        return {**record, "edge": "Friend"}
    return record


def age_to_years(record: Record) -> Record | None:
    if label(record) != "Person" or "age" not in record["data"]:
        return record
    data = dict(record["data"])
    data["years"] = data.pop("age")
    return {**record, "data": data}


def without_nick(record: Record) -> Record | None:
    return {**record, "data": {k: v for k, v in record["data"].items() if k != "nick"}}


def without_companies(record: Record) -> Record | None:
    return None if label(record) in ("Company", "WorksAt") else record


def person_writes(person_type: str = "Person", edge_type: str = "Knows", **extra: Any) -> Callable[[str], list[Record]]:
    def write(branch: str) -> list[Record]:
        return [
            {"type": person_type, "data": {"name": f"new-{branch}", "age": 7, **extra}},
            {"edge": edge_type, "from": f"new-{branch}", "to": "ann", "data": {"id": f"kn-{branch}"}},
        ]

    return write


@dataclass(frozen=True)
class Case:
    """One schema change from BASE: the expected step kinds, what it does to every exported row,
    records a write after it lands on each branch, records it refuses, and a query of one column."""

    name: str
    schema: str
    kinds: tuple[str, ...]
    transform: Callable[[Record], Record | None] = same
    allow_data_loss: bool = False
    write: Callable[[str], list[Record]] = field(default_factory=person_writes)
    refused: tuple[Record, ...] = ()
    query: tuple[str, str] | None = None  # (node type, property): every row's value must read back


CASES = [
    Case(
        "add_type",
        BASE + "node Team { name: String @key }\nedge MemberOf: Person -> Team\n",
        ("add_type", "add_type"),
        write=lambda b: [
            {"type": "Team", "data": {"name": f"team-{b}"}},
            {"edge": "MemberOf", "from": "ann", "to": f"team-{b}", "data": {"id": f"m-{b}"}},
        ],
    ),
    Case(
        "add_optional_property",
        BASE.replace("nick: String? }", "nick: String?  email: String? }"),
        ("add_property",),
        write=person_writes(email="x@example.com"),
        query=("Person", "email"),
    ),
    Case(
        "add_required_property_with_default",
        BASE.replace("nick: String? }", "nick: String?  score: I64 @default(7) }"),
        ("add_property",),
        with_score,
        write=person_writes(score=1),
        refused=({"type": "Person", "data": {"name": "no-score"}},),
        query=("Person", "score"),
    ),
    Case(
        "add_optional_property_with_default",
        BASE.replace("nick: String? }", 'nick: String?  email: String? @default("none") }'),
        ("add_property",),
        lambda r: {**r, "data": {**r["data"], "email": "none"}} if label(r) == "Person" else r,
        query=("Person", "email"),  # the new rows written without it read null: the property stays optional
    ),
    Case(
        "rename_type",
        BASE.replace("node Person {", 'node Human @rename_from("Person") {')
        .replace("edge Knows: Person -> Person {", 'edge Friend: Human -> Human @rename_from("Knows") {')
        .replace("WorksAt: Person", "WorksAt: Human"),
        ("rename_type", "rename_type"),
        renamed_types,
        write=person_writes("Human", "Friend"),
        refused=({"type": "Person", "data": {"name": "old-name"}},),
        query=("Human", "nick"),
    ),
    Case(
        "rename_property",
        BASE.replace("age: I32?", 'years: I32? @rename_from("age")'),
        ("rename_property",),
        age_to_years,
        write=lambda b: [{"type": "Person", "data": {"name": f"new-{b}", "years": 7}}],
        refused=({"type": "Person", "data": {"name": "old-prop", "age": 3}},),
        query=("Person", "years"),
    ),
    Case(
        "add_unique",
        BASE.replace("nick: String? }", "nick: String? @unique }"),
        ("add_constraint",),
        write=person_writes(nick="fresh"),
        refused=({"type": "Person", "data": {"name": "copycat", "nick": "annie"}},),
    ),
    Case(
        "add_range",
        BASE.replace("nick: String? }", "nick: String?  @range(age, 0..150) }"),
        ("add_constraint",),
        refused=({"type": "Person", "data": {"name": "old", "age": 200}},),
    ),
    Case(
        "add_check",
        BASE.replace("nick: String? }", 'nick: String?  @check(nick, "[a-z]+") }'),
        ("add_constraint",),
        write=person_writes(nick="lower"),
        refused=({"type": "Person", "data": {"name": "shouty", "nick": "ABC"}},),
    ),
    Case(
        "add_card",
        BASE.replace("edge WorksAt: Person -> Company", "edge WorksAt: Person -> Company @card(0..1)"),
        ("add_constraint",),
        write=lambda b: [{"edge": "WorksAt", "from": "bob", "to": "acme", "data": {"id": f"wb-{b}"}}],
        refused=({"edge": "WorksAt", "from": "ann", "to": "acme", "data": {"id": "w-second"}},),
    ),
    Case(
        "drop_property",
        BASE.replace("  nick: String? }", " }"),
        ("drop_property",),
        without_nick,
        allow_data_loss=True,
        refused=({"type": "Person", "data": {"name": "nicked", "nick": "x"}},),
    ),
    Case(
        "drop_type",
        BASE.replace("node Company { name: String @key }\n", "").replace("edge WorksAt: Person -> Company\n", ""),
        ("drop_type", "drop_type"),
        without_companies,
        allow_data_loss=True,
        refused=({"type": "Company", "data": {"name": "initech"}},),
    ),
]


def expected_after(before: Rows, transform: Callable[[Record], Record | None]) -> Rows:
    changed = [transform(record) for record in before.values()]
    return keyed([record for record in changed if record is not None])


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_step_applies_to_main_an_own_write_branch_and_a_lazy_branch(tmp_path: Path, case: Case) -> None:
    uri = str(tmp_path / "graph")
    graph = build(uri)
    assert {t.table_branch for t in graph.snapshot("lazy").tables} == {None}  # lazy: every table inherited
    before = {branch: rows(graph, branch) for branch in BRANCHES}
    old_heads = heads(graph)
    assert before["dev"][("Person", "bob")]["data"]["age"] == 41 and ("Person", "dee") not in before["main"]

    files = digest(uri)
    plan = graph.plan_schema(case.schema)
    assert digest(uri) == files, "plan wrote to the graph"
    assert sorted(step.kind for step in plan.steps) == sorted(case.kinds), plan.steps
    assert plan.data_loss == case.allow_data_loss and plan.changes_source
    assert all(step.validates == (step.kind == "add_constraint") for step in plan.steps), plan.steps

    applied = graph.apply_schema(case.schema, allow_data_loss=case.allow_data_loss)
    assert applied.outcome == "applied"
    assert set(applied.commits) == set(BRANCHES)
    new_heads = heads(graph)
    for branch in BRANCHES:
        assert applied.commits[branch] == new_heads[branch] != old_heads[branch]
        assert graph.commits(branch)[0].parents == (old_heads[branch],)
    assert graph.schema_text() and open_store(uri).read_bytes(SCHEMA_FILE).decode() == case.schema
    assert not open_store(uri).exists(SCHEMA_CHANGE_PATH)

    expected = {branch: expected_after(before[branch], case.transform) for branch in BRANCHES}
    for branch in BRANCHES:
        assert rows(graph, branch) == expected[branch], branch
        assert rows(graph, branch, at=old_heads[branch]) == before[branch], f"{branch} at its old head"
        then = graph.query("query q() { match { $p: Person } return { $p.name, $p.age } }", branch=branch, at=old_heads[branch])
        people = [r["data"] for (t, _), r in before[branch].items() if t == "Person"]
        assert sorted((r["p.name"], r["p.age"]) for r in then.rows) == sorted((p["name"], p.get("age")) for p in people)
        if case.query is not None:
            type_name, prop = case.query
            answer = graph.query(f"query q() {{ match {{ $p: {type_name} }} return {{ $p.name, $p.{prop} }} }}", branch=branch)
            got = sorted((row["p.name"], row[f"p.{prop}"]) for row in answer.rows)
            want = sorted((r["data"]["name"], r["data"].get(prop)) for (t, _), r in expected[branch].items() if t == type_name)
            assert got == want, branch
    assert_clean(graph)

    for branch in BRANCHES:
        written = case.write(branch)
        graph.load(written, mode="append", branch=branch)
        expected[branch].update(keyed([exported(record) for record in written]))
        for record in case.refused:
            with pytest.raises(omnigraph.BadRequest):
                graph.load([record], mode="append", branch=branch)
    for branch in BRANCHES:
        assert rows(graph, branch) == expected[branch], branch
    assert_clean(graph)


# -- the CLI, on both backends ------------------------------------------------------------------

COMBINED = """\
node Human @rename_from("Person") { name: String @key  years: I32? @rename_from("age")  score: I64 @default(7)  email: String? @unique }
node Company { name: String @key }
node Team { name: String @key }
edge Knows: Human -> Human { since: I32? }
edge WorksAt: Human -> Company
"""
OLD_QUERY = "query q() { match { $p: Person  $p knows $f } return { $p.name, $p.age, $f.name } order { $p.name } }\n"
NEW_QUERY = "query q() { match { $p: Human  $p knows $f } return { $p.name, $p.years, $p.score, $f.name } order { $p.name } }\n"


def combined(record: Record) -> Record | None:
    """BASE -> COMBINED: Person is Human, age is years, nick is dropped, score is 7."""
    record = age_to_years(record) or record
    record = without_nick(record) or record
    if label(record) == "Person":
        record = {**record, "type": "Human", "data": {**record["data"], "score": 7}}
    return record


def test_the_cli_plans_and_applies_a_combined_change_with_time_travel(backend: str, tmp_path: Path) -> None:
    uri = new_root(backend, tmp_path)
    graph = build(uri)
    before = {branch: rows(graph, branch) for branch in BRANCHES}
    old_heads = heads(graph)
    schema = tmp_path / "new.pg"
    schema.write_text(COMBINED)
    old_q, new_q = tmp_path / "old.gq", tmp_path / "new.gq"
    old_q.write_text(OLD_QUERY)
    new_q.write_text(NEW_QUERY)
    old_answers = {branch: [dict(row) for row in graph.query(OLD_QUERY, branch=branch).rows] for branch in BRANCHES}

    files = digest(uri)
    planned = invoke(OMNIGRAPH, "schema", "plan", "--schema", schema, "--json", uri).ok().json()
    text = invoke(OMNIGRAPH, "schema", "plan", "--schema", schema, uri).ok()
    assert digest(uri) == files, "plan wrote to the graph"
    assert set(planned) == {"from_schema_id", "to_schema_id", "steps", "data_loss"}
    assert planned["data_loss"] is True
    assert all(set(step) == STEP_KEYS for step in planned["steps"])
    kinds = sorted((s["kind"], s["table_key"], s["property"]) for s in planned["steps"])
    assert kinds == [
        ("add_constraint", "node:Human", None),
        ("add_property", "node:Human", "email"),
        ("add_property", "node:Human", "score"),
        ("add_type", "node:Team", None),
        ("drop_property", "node:Human", "nick"),
        ("rename_property", "node:Human", "years"),
        ("rename_type", "node:Human", None),
    ]
    [default] = [s for s in planned["steps"] if s["property"] == "score"]
    assert default["default"] == 7
    [renamed] = [s for s in planned["steps"] if s["kind"] == "rename_property"]
    assert renamed["from_property"] == "age"
    assert "[data loss]" in text.stdout and "[validated]" in text.stdout

    refused = invoke(OMNIGRAPH, "schema", "apply", "--schema", schema, "--json", uri)
    assert refused.returncode != 0 and refused.json()["error"]["code"] == "bad_request", refused.describe()
    assert refused.json()["error"]["details"]["data_loss"] == ["drop node:Human.nick and its values"]
    assert digest(uri) == files, "a refused apply wrote to the graph"

    document = invoke(OMNIGRAPH, "schema", "apply", "--schema", schema, "--allow-data-loss", "--json", uri).ok().json()
    assert set(document) == {"outcome", "from_schema_id", "to_schema_id", "steps", "commits"}
    assert document["outcome"] == "applied"
    assert (document["from_schema_id"], document["to_schema_id"]) == (planned["from_schema_id"], planned["to_schema_id"])
    assert document["steps"] == planned["steps"]
    assert set(document["commits"]) == set(BRANCHES)
    assert all(set(step) == STEP_KEYS for step in document["steps"])

    graph = omnigraph.open(uri)
    for branch in BRANCHES:
        assert document["commits"][branch] == graph.commits(branch)[0].commit_id
        assert rows(graph, branch) == expected_after(before[branch], combined), branch
    checked = invoke(OMNIGRAPH, "check", "--json", uri)
    assert checked.returncode == 0, checked.describe()

    # time travel: each old head reads with the old schema, through query and export
    for branch in BRANCHES:
        at = old_heads[branch]
        answer = invoke(OMNIGRAPH, "query", "--query", old_q, "--json", "--branch", branch, "--at", at, uri).ok().json()
        assert answer["rows"] == old_answers[branch] and answer["commit"] == at
        lines = invoke(OMNIGRAPH, "export", "--branch", branch, "--at", at, uri).ok().stdout.splitlines()
        assert keyed([json.loads(line) for line in lines]) == before[branch]
        head_answer = invoke(OMNIGRAPH, "query", "--query", new_q, "--json", "--branch", branch, uri).ok().json()
        assert [(r["p.name"], r["p.years"], r["p.score"], r["f.name"]) for r in head_answer["rows"]] == [
            (r["p.name"], r.get("p.age"), 7, r["f.name"]) for r in old_answers[branch]
        ]
    # the new names do not exist at an old commit, nor the old ones at the head
    stale = invoke(OMNIGRAPH, "query", "--query", new_q, "--json", "--branch", "dev", "--at", old_heads["dev"], uri)
    assert stale.returncode != 0 and stale.json()["error"]["code"] == "bad_request", stale.describe()
    gone = invoke(OMNIGRAPH, "query", "--query", old_q, "--json", "--branch", "lazy", uri)
    assert gone.returncode != 0 and gone.json()["error"]["code"] == "bad_request", gone.describe()

    # writes after the change on every branch
    for branch in BRANCHES:
        data = tmp_path / f"{branch}.jsonl"
        data.write_text(
            json.dumps({"type": "Human", "data": {"name": f"new-{branch}", "score": 1, "email": f"{branch}@example.com"}})
            + "\n"
            + json.dumps({"type": "Team", "data": {"name": f"team-{branch}"}})
            + "\n"
        )
        invoke(OMNIGRAPH, "load", "--mode", "append", "--data", data, "--branch", branch, uri).ok()
        got = rows(graph, branch)
        assert got[("Human", f"new-{branch}")]["data"]["email"] == f"{branch}@example.com"
        assert ("Team", f"team-{branch}") in got
    assert invoke(OMNIGRAPH, "check", uri).returncode == 0


# -- refusals and no-ops write nothing --------------------------------------------------------

REFUSED: list[tuple[str, list[str]]] = [
    # (new schema, the codes of details["refused"])
    (BASE.replace("nick: String? }", "nick: String?  score: I64 }"), ["required_without_default"]),
    (BASE.replace("age: I32?", "age: I64?"), ["type_change"]),
    (BASE.replace("nick: String? }", "nick: String }"), ["nullability_change"]),
    (BASE.replace("name: String @key  age", "name: String  age"), ["key_change"]),
    (BASE.replace("edge Knows: Person -> Person", "edge Knows: Person -> Company"), ["endpoints_change"]),
    (BASE.replace("age: I32?", 'years: I32? @rename_from("agee")'), ["rename_unknown"]),
    (
        BASE.replace("Person", "Human").replace("node Human {", 'node Human @rename_from("Persona") {'),
        ["endpoints_change", "endpoints_change", "rename_unknown"],
    ),
]
VIOLATED = [
    # (new schema, {branch: (table_key, kind, ids)} of the expected problems)
    (BASE.replace("age: I32?", "age: I32? @unique"), {"dev": ("node:Person", "unique_violation", ["ann", "dee"])}),
    (BASE.replace("nick: String? }", "nick: String?  @range(age, 0..40) }"), {"dev": ("node:Person", "range_violation", ["bob"])}),
    (BASE.replace("nick: String? }", 'nick: String?  @check(nick, "annie|cee") }'), {"dev": ("node:Person", "check_violation", ["dee"])}),
    (
        BASE.replace("edge WorksAt: Person -> Company", "edge WorksAt: Person -> Company @card(1..)"),
        {branch: ("edge:WorksAt", "card_violation", ["bob", "cid"]) for branch in BRANCHES},
    ),
]


def test_plan_refusals_and_violations_write_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "graph")
    graph = build(uri)
    before = {branch: rows(graph, branch) for branch in BRANCHES}
    files = digest(uri)
    # leases are taken (and released) before a change is validated against the rows: their records may be rewritten
    leases = "__recovery/branches/"
    for schema, codes in REFUSED:
        with pytest.raises(omnigraph.BadRequest) as planned:
            graph.plan_schema(schema)
        with pytest.raises(omnigraph.BadRequest) as applied:
            graph.apply_schema(schema, allow_data_loss=True)
        assert sorted(item["code"] for item in planned.value.details["refused"]) == codes, planned.value
        assert applied.value.details == planned.value.details
        assert "nothing was written" in str(applied.value)
        assert digest(uri) == files, schema
    for schema, problems in VIOLATED:
        assert graph.plan_schema(schema).steps  # plannable: only the rows refuse it
        with pytest.raises(omnigraph.BadRequest) as refused:
            graph.apply_schema(schema)
        found = {p["branch"]: (p["table_key"], p["kind"], sorted(p["ids"])) for p in refused.value.details["problems"]}
        assert found == problems, refused.value.details
        assert "nothing was written" in str(refused.value)
        assert digest(uri, skip=(leases,)) == {k: v for k, v in files.items() if not k.startswith(leases)}, schema
    files = digest(uri)  # refused before any lease is taken: not one object changes
    lossy = BASE.replace("  nick: String? }", " }")
    with pytest.raises(omnigraph.BadRequest) as lost:
        graph.apply_schema(lossy)
    assert lost.value.details["data_loss"] == ["drop node:Person.nick and its values"]
    assert digest(uri) == files
    unchanged = graph.apply_schema(BASE)
    assert (unchanged.outcome, unchanged.commits, unchanged.plan.steps) == ("unchanged", {}, [])
    assert digest(uri) == files
    for branch in BRANCHES:
        assert rows(graph, branch) == before[branch]
    assert_clean(graph)


# -- merging across a change, writers validated against the old schema --------------------------


def test_a_branch_forked_before_the_change_merges_into_main_after_it(tmp_path: Path) -> None:
    uri = str(tmp_path / "graph")
    graph = build(uri)
    graph.apply_schema(COMBINED, allow_data_loss=True)
    graph.mutate('query m() { update Human set { years: 50 } where name = "bob" }', branch="dev")
    graph.mutate('query m() { update Human set { years: 31 } where name = "ann" }', branch="main")
    graph.load([{"type": "Human", "data": {"name": "eve", "score": 2}}], mode="append", branch="dev")
    merged = graph.merge("dev", into="main")
    assert merged.outcome == "merged", merged
    changes = merged.changes["node:Human"]
    assert (changes["updated"], changes["inserted"], changes["deleted"]) == (1, 2, 0), merged.changes
    main = rows(graph, "main")
    assert main[("Human", "bob")]["data"] == {"id": "bob", "name": "bob", "years": 50, "score": 7}
    assert main[("Human", "ann")]["data"]["years"] == 31
    assert main[("Human", "dee")]["data"] == {"id": "dee", "name": "dee", "years": 30, "score": 7}
    assert main[("Human", "eve")]["data"] == {"id": "eve", "name": "eve", "score": 2}
    assert {key for key in main if key[0] in ("Knows", "WorksAt")} == {("Knows", k) for k in ("k1", "k2", "k3")} | {
        ("WorksAt", w) for w in ("w1", "w2")
    }
    back = graph.merge("main", into="dev")
    assert back.outcome in ("merged", "fast_forward"), back
    assert rows(graph, "dev") == main
    assert_clean(graph)


STALE = {"type": "Person", "data": {"name": "late", "age": 1}}


@pytest.mark.parametrize(
    "schema, fresh",
    [
        (BASE.replace("nick: String? }", "nick: String?  email: String? }"), {"type": "Person", "data": {"name": "late", "email": "e"}}),
        (COMBINED, {"type": "Human", "data": {"name": "late", "years": 1, "score": 2}}),
    ],
    ids=["add_property", "rename_type"],
)
def test_a_write_validated_against_the_old_schema_is_refused(tmp_path: Path, schema: str, fresh: Record) -> None:
    uri = str(tmp_path / "graph")
    build(uri)
    # one handle per refused write, each opened (and validating) under the old schema: a refusal
    # makes its handle read the accepted schema again, so a second write through it would be valid
    loaders = {branch: omnigraph.open(uri) for branch in BRANCHES}
    mutator = omnigraph.open(uri)
    omnigraph.open(uri).apply_schema(schema, allow_data_loss=True)
    reader = omnigraph.open(uri, read_only=True)
    before = {branch: rows(reader, branch) for branch in BRANCHES}
    files = digest(uri, skip=("__recovery/branches/",))
    for branch, loader in loaders.items():
        with pytest.raises(omnigraph.ReadSetConflict):
            loader.load([STALE], mode="append", branch=branch)
    with pytest.raises(omnigraph.ReadSetConflict):
        mutator.mutate('query m() { insert Person { name: "later" } }', branch="dev")
    assert digest(uri, skip=("__recovery/branches/",)) == files
    assert {branch: rows(reader, branch) for branch in BRANCHES} == before
    # the refusal says to retry against the new schema: the same handle now takes the new schema's records
    for branch, loader in loaders.items():
        loader.load([fresh], mode="append", branch=branch)
        assert rows(reader, branch)[(fresh["type"], "late")] == exported(fresh)
    assert_clean(reader)


def test_a_format4_graph_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "graph")
    omnigraph.init(uri, BASE, program=omnigraph.FORMAT_4_WRITER).load(MAIN_ROWS, mode="append")
    schema = tmp_path / "new.pg"
    schema.write_text(COMBINED)
    files = digest(uri)
    refused = invoke(OMNIGRAPH, "schema", "apply", "--schema", schema, "--allow-data-loss", "--json", uri)
    assert refused.returncode != 0 and refused.json()["error"]["code"] == "format_refused", refused.describe()
    assert "omnigraph-migrate" in refused.json()["error"]["message"]
    legacy = omnigraph.open(uri, program=omnigraph.FORMAT_4_WRITER)
    with pytest.raises(omnigraph.FormatRefused) as error:
        legacy.apply_schema(COMBINED, allow_data_loss=True)
    assert "omnigraph-migrate" in str(error.value)
    assert digest(uri) == files


# -- a race after the change -----------------------------------------------------------------


@pytest.mark.parametrize(
    "schema, record, branch",
    [
        (BASE.replace("nick: String? }", "nick: String? @unique }"), {"type": "Person", "data": {"name": "racer", "nick": "zz"}}, "main"),
        (BASE + "node Team { name: String @key }\n", {"type": "Team", "data": {"name": "racers"}}, "lazy"),
    ],
    ids=["unique-main", "new_type-lazy"],
)
def test_concurrent_strict_inserts_after_a_change_admit_exactly_one(tmp_path: Path, schema: str, record: Record, branch: str) -> None:
    uri = str(tmp_path / "graph")
    graph = omnigraph.init(uri, BASE)
    graph.load(MAIN_ROWS, mode="append")
    graph.create_branch("lazy")
    graph.apply_schema(schema)
    data = tmp_path / "racer.jsonl"
    data.write_text(json.dumps(record) + "\n")
    outcomes = race("omnigraph", [["load", "--mode", "append", "--data", str(data), "--json", "--branch", branch, uri]] * 8)
    won = [o for o in outcomes if o.returncode == 0]
    lost = [o for o in outcomes if o.returncode != 0]
    assert len(won) == 1, [o.stdout + o.stderr for o in outcomes]
    assert all(o.json()["error"]["code"] == "key_conflict" for o in lost), [o.stdout for o in lost]
    found = [r for r in omnigraph.open(uri).export(branch) if label(r) == record["type"] and r["data"]["name"] == record["data"]["name"]]
    assert len(found) == 1
    assert_clean(omnigraph.open(uri))
