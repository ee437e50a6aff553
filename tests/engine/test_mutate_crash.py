"""Crash matrix of ``mutate``: a real ``omnigraph mutate`` process exits at each named failpoint
of the write protocol; the next read-write open converges all-or-nothing (the mutation is wholly
published or leaves no trace), with no duplicate id, no table HEAD ahead of what the manifest
pins, no fork left on a still-inherited table, and no intent left; the mutation then runs again
(in-process). Every case runs locally, the marked ones on S3 too.

``WRITE`` touches three tables, one of them (``node:Tag``) with two steps (a strict insert and an
upsert), so ``write.after_merge_step`` stops between the steps of one table effect; ``DELETE``
deletes a node and, by cascade, its edge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.engine.graph import init_graph, open_graph
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.export import export_lines
from omnigraph.engine.ops.load import load
from omnigraph.engine.ops.mutate import mutate
from omnigraph.engine.reconcile.recovery import list_intents
from omnigraph.engine.storage.store import open_store
from tests.support.crash_helpers import assert_write_converged

OMNIGRAPH = str(Path(sys.executable).parent / "omnigraph")
SCHEMA = """
node Person { name: String @key  age: I32? }
node Tag { label: String }
edge Knows: Person -> Person
"""
BASE = [
    {"type": "Person", "data": {"name": "a", "age": 1}},
    {"type": "Person", "data": {"name": "b", "age": 2}},
    {"type": "Person", "data": {"name": "c", "age": 3}},
    {"type": "Tag", "data": {"id": "t1", "label": "old"}},
    {"edge": "Knows", "from": "a", "to": "b", "data": {"id": "k0"}},
]
WRITE = """
query w() {
  insert Person { name: "d", age: 4 }
  update Person set { age: 10 } where name = "a"
  insert Tag { id: "t2", label: "new" }
  update Tag set { label: "changed" } where id = "t1"
  insert Knows { id: "k1", from: "a", to: "d" }
}
"""
DELETE = 'query d() { delete Person where name = "b" }'
BEFORE = {"Person": {"a": 1, "b": 2, "c": 3}, "Tag": {"t1": "old"}, "Knows": {"k0": ("a", "b")}}
AFTER = {
    WRITE: {
        "Person": {"a": 10, "b": 2, "c": 3, "d": 4},
        "Tag": {"t1": "changed", "t2": "new"},
        "Knows": {"k0": ("a", "b"), "k1": ("a", "d")},
    },
    DELETE: {"Person": {"a": 1, "c": 3}, "Tag": {"t1": "old"}, "Knows": {}},
}


def _state(uri: str, branch: str) -> dict[str, dict[str, Any]]:
    state: dict[str, dict[str, Any]] = {"Person": {}, "Tag": {}, "Knows": {}}
    for line in export_lines(open_graph(open_store(uri), FENCED_PROFILE, write=False), branch):
        record = json.loads(line)
        data = record["data"]
        if record.get("type") == "Person":
            state["Person"][data["name"]] = data.get("age")
        elif record.get("type") == "Tag":
            state["Tag"][data["id"]] = data["label"]
        else:
            state["Knows"][data["id"]] = (record["from"], record["to"])
    return state


def _run(uri: str, query: Path, branch: str, failpoint: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop(FAILPOINT_ENV, None)
    if failpoint:
        env[FAILPOINT_ENV] = failpoint
    return subprocess.run(
        [OMNIGRAPH, "mutate", "--query", str(query), "--branch", branch, "--json", uri],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


CASES = [
    # (failpoint, branch, query, published); local only: a crashed write on S3 is test_engine_crash's
    ("write.after_arm", "main", WRITE, False),
    ("write.after_merge_step", "main", WRITE, False),
    ("write.after_fork", "lazy", WRITE, False),
    ("write.after_effect", "lazy", DELETE, False),
    ("write.after_publish", "main", WRITE, True),
    ("write.after_publish", "lazy", DELETE, True),
]


@pytest.mark.parametrize("backend", ["local"], indirect=True)
@pytest.mark.parametrize(
    "failpoint, branch, source, published",
    CASES,
    ids=lambda value: "write" if value == WRITE else "delete" if value == DELETE else str(value),
)
def test_a_crashed_mutation_converges_on_the_next_open(
    root_uri: str, tmp_path: Path, failpoint: str, branch: str, source: str, published: bool
) -> None:
    graph = init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE, "tests")
    load(graph, "".join(json.dumps(r) + "\n" for r in BASE).encode(), mode="append", branch="main", actor="tests")
    create_branch(graph, "lazy")
    query = tmp_path / "q.gq"
    query.write_text(source)

    crashed = _run(root_uri, query, branch, failpoint)
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    assert len(list_intents(open_store(root_uri))) == 1

    reopened = open_graph(open_store(root_uri), FENCED_PROFILE, write=True)
    [record] = reopened.recovered
    assert record.outcome == ("published" if published else "rolled_back")
    assert_write_converged(root_uri, branch)
    assert _state(root_uri, branch) == (AFTER[source] if published else BEFORE)
    other = "main" if branch == "lazy" else "lazy"
    assert _state(root_uri, other) == BEFORE

    if not published:
        rerun = mutate(open_graph(open_store(root_uri), FENCED_PROFILE, write=True), source, branch=branch, actor="tests")
        assert rerun.commit is not None
        assert _state(root_uri, branch) == AFTER[source]
        assert_write_converged(root_uri, branch)
