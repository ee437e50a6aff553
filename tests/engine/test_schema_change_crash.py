"""Crash safety of ``schema apply``: a real ``omnigraph schema apply`` process exits at each named
failpoint of the change (``schema.*``) and of the write protocol that carries each branch's
upgrade commit (``write.*``), on a graph of three branches: ``main``, ``dev`` (with writes of its
own) and ``lazy`` (never written). ``omnigraph recover`` then exits 0 and the graph is entirely at
the old schema (killed before the new schema is accepted) or entirely at the new one (killed at
any later point): every branch exports the expected rows, ``check`` is clean, and a write lands
on every branch.

A writer that reaches a branch the interrupted change has not upgraded yet is refused with a
message naming ``omnigraph recover``; after that command, the write lands. A property test
(hypothesis, local, in-process, bounded) applies random short sequences of schema steps, with
writes in between, and compares every branch with a model after each step.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import omnigraph
from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.engine.storage.names import SCHEMA_CHANGE_PATH, SCHEMA_FILE
from omnigraph.engine.storage.store import open_store
from tests.support.crash_helpers import assert_write_converged
from tests.support.graph_helpers import OMNIGRAPH, invoke

OLD = """\
node Person { name: String @key  age: I32?  nick: String? }
node Company { name: String @key }
edge Knows: Person -> Person { since: I32? }
edge WorksAt: Person -> Company
"""
NEW = """\
node Human @rename_from("Person") { name: String @key  years: I32? @rename_from("age")  score: I64 @default(7)  email: String? @unique }
node Company { name: String @key }
node Team { name: String @key }
edge Knows: Human -> Human { since: I32? }
edge WorksAt: Human -> Company
"""
MAIN_ROWS = [
    {"type": "Person", "data": {"name": "ann", "age": 30, "nick": "annie"}},
    {"type": "Person", "data": {"name": "bob", "age": 40}},
    {"type": "Company", "data": {"name": "acme"}},
    {"edge": "Knows", "from": "ann", "to": "bob", "data": {"id": "k1", "since": 2020}},
    {"edge": "WorksAt", "from": "ann", "to": "acme", "data": {"id": "w1"}},
]
DEV_ROWS = [
    {"type": "Person", "data": {"name": "bob", "age": 41}},
    {"type": "Person", "data": {"name": "dee", "nick": "dee"}},
    {"edge": "Knows", "from": "dee", "to": "ann", "data": {"id": "k2"}},
]
BRANCHES = ("main", "dev", "lazy")

Record = dict[str, Any]
Rows = dict[tuple[str, str], Record]


def keyed(records: list[Record]) -> Rows:
    return {(str(r.get("type") or r["edge"]), r["data"]["id"]): r for r in records}


def rows(uri: str, branch: str) -> Rows:
    return keyed(list(omnigraph.open(uri, read_only=True).export(branch)))


def upgraded(record: Record) -> Record:
    """A row of OLD as NEW holds it: Person is Human, age is years, nick is dropped, score is 7."""
    if record.get("type") != "Person":
        return record
    data = {k: v for k, v in record["data"].items() if k not in ("age", "nick")}
    if "age" in record["data"]:
        data["years"] = record["data"]["age"]
    return {"type": "Human", "data": {**data, "score": 7}}


def build(uri: str) -> dict[str, Rows]:
    """main, dev (forked, with writes of its own) and lazy (forked, never written); every branch's rows."""
    graph = omnigraph.init(uri, OLD)
    graph.load(MAIN_ROWS, mode="append")
    graph.create_branch("dev")
    graph.load(DEV_ROWS, mode="merge", branch="dev")
    graph.create_branch("lazy")
    return {branch: keyed(list(graph.export(branch))) for branch in BRANCHES}


def run(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A real ``omnigraph`` process (no failpoint unless ``env`` arms one)."""
    base = {key: value for key, value in os.environ.items() if key != FAILPOINT_ENV}
    return subprocess.run(
        [str(OMNIGRAPH), *(str(a) for a in args)], env={**base, **(env or {})}, capture_output=True, text=True, timeout=180, check=False
    )


def assert_whole(uri: str, before: dict[str, Rows], schema: str) -> None:
    """The accepted schema is ``schema``, no change is pending, every branch reads as ``schema`` holds
    its rows, nothing is left half-done, and ``omnigraph check`` is clean."""
    store = open_store(uri)
    assert store.read_bytes(SCHEMA_FILE).decode("utf-8") == schema
    assert not store.exists(SCHEMA_CHANGE_PATH)
    for branch in BRANCHES:
        want = before[branch] if schema == OLD else keyed([upgraded(r) for r in before[branch].values()])
        assert rows(uri, branch) == want, branch
        assert_write_converged(uri, branch)
    checked = invoke(OMNIGRAPH, "check", "--json", uri)
    assert checked.returncode == 0, checked.describe()


FAILPOINTS = [
    # (failpoint, the schema the graph ends at)
    ("schema.before_accept", OLD),
    ("schema.after_accept", NEW),
    ("schema.after_branch", NEW),
    ("write.after_arm", NEW),
    ("write.before_effect", NEW),
    ("write.after_evolve_step", NEW),
    ("write.after_effect", NEW),
    ("write.after_publish", NEW),
]


@pytest.mark.parametrize("failpoint, final", FAILPOINTS, ids=[name for name, _ in FAILPOINTS])
def test_a_killed_schema_apply_ends_whole_after_recover(tmp_path: Path, failpoint: str, final: str) -> None:
    uri = str(tmp_path / "graph")
    before = build(uri)
    schema = tmp_path / "new.pg"
    schema.write_text(NEW)

    killed = run("schema", "apply", "--schema", schema, "--allow-data-loss", uri, env={FAILPOINT_ENV: failpoint})
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.stderr
    assert f"failpoint {failpoint}" in killed.stderr

    recovered = run("recover", "--json", uri)
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert_whole(uri, before, final)

    graph = omnigraph.open(uri)
    for branch in BRANCHES:
        record = {"type": "Person", "data": {"name": f"new-{branch}", "age": 1}}
        if final == NEW:
            record = upgraded(record)
        graph.load([record], mode="append", branch=branch)
        assert rows(uri, branch)[(record["type"], f"new-{branch}")] == {**record, "data": {"id": f"new-{branch}", **record["data"]}}
    assert graph.check().ok


def test_a_change_withdrawn_before_it_was_accepted_applies_again(tmp_path: Path) -> None:
    """Killed before the new schema is accepted, the change is withdrawn by ``recover``: the same
    schema text then applies like a change never tried (it was never accepted)."""
    uri = str(tmp_path / "graph")
    before = build(uri)
    schema = tmp_path / "new.pg"
    schema.write_text(NEW)
    files = listing(uri)
    killed = run("schema", "apply", "--schema", schema, "--allow-data-loss", uri, env={FAILPOINT_ENV: "schema.before_accept"})
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.stderr
    assert run("recover", uri).returncode == 0
    assert_whole(uri, before, OLD)
    applied = run("schema", "apply", "--schema", schema, "--allow-data-loss", "--json", uri)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert set(json.loads(applied.stdout)["commits"]) == set(BRANCHES)
    assert_whole(uri, before, NEW)
    assert set(listing(uri)) >= set(files)


def listing(uri: str) -> list[str]:
    """Every object under the root but the branch lease records."""
    store = open_store(uri)
    prefix = store.root.rstrip("/") + "/"
    found = [path.removeprefix(prefix) for path in store.fs.find(store.root)]
    return sorted(path for path in found if not path.startswith("__recovery/branches/"))


ADDITIVE = (
    OLD.replace("nick: String? }", "nick: String?  email: String? @unique  score: I64 @default(7) }") + "node Team { name: String @key }\n"
)


@pytest.mark.parametrize(
    "schema, record",
    [
        (ADDITIVE, {"type": "Person", "data": {"name": "eve", "score": 3}}),
        (NEW, {"type": "Human", "data": {"name": "eve", "score": 3}}),
    ],
    ids=["additive", "with_renames"],
)
def test_a_writer_on_a_branch_not_yet_upgraded_is_refused_until_recover(tmp_path: Path, schema: str, record: Record) -> None:
    """Killed right after accepting the new schema, the change has upgraded no branch yet. A load
    (of a row the accepted schema takes) on dev is refused, writes nothing, and names the command
    that completes the change; after that command the same load lands."""
    uri = str(tmp_path / "graph")
    before = build(uri)
    path = tmp_path / "new.pg"
    path.write_text(schema)
    data = tmp_path / "eve.jsonl"
    data.write_text(json.dumps(record) + "\n")

    killed = run("schema", "apply", "--schema", path, "--allow-data-loss", uri, env={FAILPOINT_ENV: "schema.after_accept"})
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.stderr
    files = listing(uri)

    refused = run("load", "--mode", "append", "--data", data, "--branch", "dev", "--json", uri)
    assert refused.returncode != 0, refused.stdout
    error = json.loads(refused.stdout)["error"]
    named = re.search(r"`(omnigraph [^`]+)`", error["message"])
    assert named is not None, error
    command = shlex.split(named.group(1))
    assert command[:2] == ["omnigraph", "recover"], command
    assert listing(uri) == files
    assert rows(uri, "dev") == before["dev"]  # nothing landed: dev still reads as the old schema holds it

    ran = run(*command[1:])
    assert ran.returncode == 0, ran.stdout + ran.stderr
    loaded = run("load", "--mode", "append", "--data", data, "--branch", "dev", "--json", uri)
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert rows(uri, "dev")[(record["type"], "eve")]["data"] == {"id": "eve", **record["data"]}
    assert not open_store(uri).exists(SCHEMA_CHANGE_PATH)
    assert omnigraph.check(uri).ok


# -- property test: random sequences of steps ---------------------------------------------------

PROPS = ("nick", "p1", "p2", "p3")  # a small pool, so a name dropped earlier can come back
TYPES = ("T0", "T1")
STEP = st.tuples(
    st.sampled_from(["add_property", "rename_property", "drop_property", "add_type", "add_unique"]),
    st.integers(0, 7),
    st.integers(0, 7),
    st.sampled_from(BRANCHES),
)


@dataclass
class Model:
    """Person's optional String properties (in order) and which are @unique, the added node types,
    and per branch every Person's non-null values and every added type's ids."""

    props: list[str] = field(default_factory=lambda: ["nick"])
    unique: set[str] = field(default_factory=set)
    types: list[str] = field(default_factory=list)
    people: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    others: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)  # new name -> old name, for the next source only

    def source(self, serial: int = 0) -> str:
        """The schema text (a comment numbers it: a text is accepted once, and a step may come back to an earlier one)."""
        members = []
        for prop in self.props:
            spelled = f"{prop}: String?"
            if prop in self.unique:
                spelled += " @unique"
            if prop in self.renamed:
                spelled += f' @rename_from("{self.renamed[prop]}")'
            members.append(spelled)
        lines = [f"node Person {{ name: String @key  {'  '.join(members)} }}", "edge Knows: Person -> Person"]
        lines += [f"node {name} {{ name: String @key }}" for name in self.types]
        return "\n".join(lines) + f"\n// step {serial}\n"

    def expected(self, branch: str) -> Rows:
        records: list[Record] = [
            {"type": "Person", "data": {"id": pid, "name": pid, **values}} for pid, values in self.people[branch].items()
        ]
        records.append({"edge": "Knows", "from": "a", "to": "b", "data": {"id": "e1"}})
        records += [{"type": t, "data": {"id": i, "name": i}} for t, ids in self.others[branch].items() for i in ids]
        return keyed(records)

    def duplicated(self, prop: str) -> bool:
        for people in self.people.values():
            values = [v[prop] for v in people.values() if prop in v]
            if len(values) != len(set(values)):
                return True
        return False


def _free(pool: tuple[str, ...], taken: list[str], pick: int) -> str | None:
    free = [name for name in pool if name not in taken]
    return free[pick % len(free)] if free else None


def _apply_step(graph: omnigraph.Graph, model: Model, kind: str, i: int, j: int, serial: int) -> str | None:
    """Apply one step to the graph and the model; the source accepted (None: skipped or refused)."""
    model.renamed = {}
    lossy = False
    refused = False
    if kind == "add_property":
        name = _free(PROPS, model.props, i)
        if name is None:
            return None
        model.props.append(name)
    elif kind == "rename_property":
        new = _free(PROPS, model.props, j)
        if not model.props or new is None:
            return None
        old = model.props[i % len(model.props)]
        model.props[model.props.index(old)] = new
        model.renamed = {new: old}
        if old in model.unique:
            model.unique = (model.unique - {old}) | {new}
        for people in model.people.values():
            for values in people.values():
                if old in values:
                    values[new] = values.pop(old)
    elif kind == "drop_property":
        if not model.props:
            return None
        old = model.props.pop(i % len(model.props))
        model.unique.discard(old)
        for people in model.people.values():
            for values in people.values():
                values.pop(old, None)
        lossy = True
    elif kind == "add_type":
        name = _free(TYPES, model.types, i)
        if name is None:
            return None
        model.types.append(name)
        for others in model.others.values():
            others[name] = set()
    else:  # add_unique on a property that has none; a fresh one if every property has it
        plain = [p for p in model.props if p not in model.unique]
        target = plain[i % len(plain)] if plain else _free(PROPS, model.props, i)
        if target is None:
            return None
        if not plain:
            model.props.append(target)
        refused = model.duplicated(target)
        model.unique.add(target)
    source = model.source(serial + 1)
    if refused:
        with pytest.raises(omnigraph.BadRequest) as error:
            graph.apply_schema(source)
        assert error.value.details["problems"], error.value
        model.unique.discard(target)
        return None
    applied = graph.apply_schema(source, allow_data_loss=lossy)
    assert applied.outcome == "applied" and set(applied.commits) == set(BRANCHES), applied
    return source


def _write(graph: omnigraph.Graph, model: Model, branch: str, serial: int) -> None:
    """One new Person with a value for every property, and one row of every added type, on ``branch``."""
    pid = f"w{serial}"
    values = {prop: f"{prop}-{serial}" for prop in model.props}
    records: list[Record] = [{"type": "Person", "data": {"name": pid, **values}}]
    records += [{"type": t, "data": {"name": f"{t.lower()}-{serial}"}} for t in model.types]
    graph.load(records, mode="append", branch=branch)
    model.people[branch][pid] = values
    for t in model.types:
        model.others[branch][t].add(f"{t.lower()}-{serial}")


@settings(max_examples=6, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=4))
def test_random_step_sequences_keep_every_row_readable(tmp_path_factory: pytest.TempPathFactory, steps: list[Any]) -> None:
    uri = str(tmp_path_factory.mktemp("evolve") / "graph")
    model = Model()
    graph = omnigraph.init(uri, model.source())
    seed = {"a": {"nick": "same"}, "b": {"nick": "same"}, "c": {}}
    graph.load(
        [{"type": "Person", "data": {"name": pid, **values}} for pid, values in seed.items()]
        + [{"edge": "Knows", "from": "a", "to": "b", "data": {"id": "e1"}}],
        mode="append",
    )
    graph.create_branch("dev")
    graph.load([{"type": "Person", "data": {"name": "d", "nick": "dee"}}], mode="append", branch="dev")
    graph.create_branch("lazy")
    model.people = {branch: {pid: dict(values) for pid, values in seed.items()} for branch in BRANCHES}
    model.people["dev"]["d"] = {"nick": "dee"}
    model.others = {branch: {} for branch in BRANCHES}
    accepted = model.source()
    for serial, (kind, i, j, branch) in enumerate(steps):
        accepted = _apply_step(graph, model, kind, i, j, serial) or accepted
        for each in BRANCHES:
            assert keyed(list(graph.export(each))) == model.expected(each), (each, model.source())
        _write(graph, model, branch, serial)
        assert keyed(list(graph.export(branch))) == model.expected(branch), (branch, model.source())
    report = graph.check()
    assert report.ok, report
    assert open_store(uri).read_bytes(SCHEMA_FILE).decode("utf-8") == accepted
