"""Crash matrix of ``branch merge``: a real ``omnigraph branch merge`` process exits at each named
failpoint of the write protocol; the next read-write open converges all-or-nothing (the merge is
wholly published or leaves no trace), with no duplicate id, no table HEAD ahead of what the
manifest pins, and no intent left; the merge then runs again to the expected result. Every
failpoint runs on the local backend; two (a step within a table, a fork of a lazy target) also on
S3."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.engine.graph import open_graph
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.merge import merge_branch
from omnigraph.engine.reconcile.recovery import list_intents
from omnigraph.engine.storage.store import open_store
from tests.support.crash_helpers import assert_write_converged
from tests.support.merge_helpers import add_edges, delete, edges, new_graph, people, upsert

OMNIGRAPH = str(Path(sys.executable).parent / "omnigraph")
EXPECTED = {
    # target branch -> (people, edges) after the merge
    "main": ({"a": 10, "b": 20, "d": 4}, {"k1": ("a", "d")}),
    "lazy": ({"a": 10, "b": 2, "d": 4}, {"k1": ("a", "d")}),
}


def _run_merge(uri: str, into: str, failpoint: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop(FAILPOINT_ENV, None)
    if failpoint:
        env[FAILPOINT_ENV] = failpoint
    return subprocess.run(
        [OMNIGRAPH, "branch", "merge", "feature", "--into", into, uri],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _setup(uri: str) -> None:
    graph = new_graph(uri, {"a": 1, "b": 2, "c": 3})
    add_edges(graph, "main", {"k0": ("a", "b")})
    create_branch(graph, "feature")
    create_branch(graph, "lazy")
    # the source: per table an insert, an update and a delete (several steps per table)
    upsert(graph, "feature", {"a": 10, "d": 4})
    add_edges(graph, "feature", {"k1": ("a", "d")})
    delete(graph, "feature", "edge:Knows", ["k0"])
    delete(graph, "feature", "node:Person", ["c"])
    upsert(graph, "main", {"b": 20})  # main has its own commit: a two-parent merge; lazy: a fast-forward


CASES = [
    # (failpoint, target branch, published); local only: a crashed write on S3 is test_engine_crash's
    ("write.after_arm", "main", False),
    ("write.after_merge_step", "main", False),
    ("write.after_effect", "main", False),
    ("write.after_fork", "lazy", False),
    ("write.after_effect", "lazy", False),
    ("write.after_publish", "main", True),
]


@pytest.mark.parametrize("backend", ["local"], indirect=True)
@pytest.mark.parametrize("failpoint, into, published", CASES)
def test_a_crashed_merge_converges_on_the_next_open(root_uri: str, failpoint: str, into: str, published: bool) -> None:
    _setup(root_uri)
    before = (people(root_uri, into), edges(root_uri, into))

    crashed = _run_merge(root_uri, into, failpoint)
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    assert len(list_intents(open_store(root_uri))) == 1

    reopened = open_graph(open_store(root_uri), FENCED_PROFILE, write=True)
    [record] = reopened.recovered
    assert record.outcome == ("published" if published else "rolled_back")
    assert_write_converged(root_uri, into)
    after = (people(root_uri, into), edges(root_uri, into))
    assert after == (EXPECTED[into] if published else before)

    merge_branch(open_graph(open_store(root_uri), FENCED_PROFILE, write=True), "feature", into, actor="test")
    assert (people(root_uri, into), edges(root_uri, into)) == EXPECTED[into]
    assert_write_converged(root_uri, into)
    assert people(root_uri, "feature") == {"a": 10, "b": 2, "d": 4}
