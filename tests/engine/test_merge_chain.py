"""A branch merge of any size: a chain of bounded fenced commits per table, one intent, one publish.

The branch of the issue's example changed 8,193 rows of one table (two loads, 8,192 rows and 1);
its merge writes them as two fenced commits of the table under one intent and records one graph
commit. A crash after the first commit of the chain leaves nothing once the next read-write open
has recovered, and the merge then runs again to the full result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from omnigraph.engine.door.table_store import COMMIT_ROWS, FENCED_PROFILE
from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.engine.graph import init_graph, open_graph
from omnigraph.engine.manifest.commit_graph import load_commit_graph
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.load import load
from omnigraph.engine.storage.lance_io import latest_version
from omnigraph.engine.storage.store import open_store
from tests.support.crash_helpers import assert_write_converged
from tests.support.merge_helpers import people, upsert

OMNIGRAPH = str(Path(sys.executable).parent / "omnigraph")


def _merge(uri: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != FAILPOINT_ENV}
    if failpoint:
        env[FAILPOINT_ENV] = failpoint
    return subprocess.run([OMNIGRAPH, "branch", "merge", "feature", "--json", uri], env=env, capture_output=True, text=True, timeout=300)


SCHEMA = "node Person { name: String @key  age: I32?  tags: [String]?  email: String? @unique }\n"


def _big_feature(uri: str) -> None:
    """main: a, then z after the branch point; feature: 8,192 new people in one load (with a list
    property), then one more, and an update of a (a two-parent merge of 8,193 inserts and 1 update)."""
    graph = init_graph(open_store(uri), SCHEMA, FENCED_PROFILE, "test")
    upsert(graph, "main", {"a": 1})
    create_branch(graph, "feature")
    rows = [{"type": "Person", "data": {"name": f"p{i:05d}", "age": i % 90, "tags": [f"t{i % 7}"]}} for i in range(COMMIT_ROWS)]
    load(graph, "".join(json.dumps(r) + "\n" for r in rows).encode(), mode="append", branch="feature", actor="test")
    load(graph, b'{"type": "Person", "data": {"name": "last"}}\n', mode="append", branch="feature", actor="test")
    upsert(graph, "feature", {"a": 2})
    upsert(graph, "main", {"z": 26})


def _reachable(uri: str, branch: str) -> set[str]:
    """Every commit reachable from ``branch``'s head."""
    graph = open_graph(open_store(uri), FENCED_PROFILE, write=False)
    return set(load_commit_graph(graph.manifest).ancestors(graph.manifest.snapshot(branch).head.commit_id))


def _person_head(uri: str) -> int:
    graph = open_graph(open_store(uri), FENCED_PROFILE, write=False)
    entry = graph.manifest.snapshot("main").table("node:Person")
    return latest_version(open_store(uri), entry.table_path, entry.table_branch)


@pytest.mark.parametrize("backend", ["local", "s3"], indirect=True)
def test_a_branch_that_changed_more_rows_than_one_commit_takes_merges_as_one_graph_commit(root_uri: str) -> None:
    _big_feature(root_uri)
    commits, head = _reachable(root_uri, "main") | _reachable(root_uri, "feature"), _person_head(root_uri)
    merged = _merge(root_uri)
    assert merged.returncode == 0, merged.stderr
    document = json.loads(merged.stdout)
    assert document["outcome"] == "merged"
    assert document["changes"] == {"node:Person": {"inserted": COMMIT_ROWS + 1, "updated": 1, "deleted": 0}}
    assert len(_reachable(root_uri, "main") - commits) == 1  # one graph commit
    assert _person_head(root_uri) == head + 3  # a chain: two strict inserts, one upsert
    after = people(root_uri, "main")
    assert len(after) == COMMIT_ROWS + 3 and after["a"] == 2 and after["z"] == 26 and after["last"] is None
    assert_write_converged(root_uri, "main")


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_a_crash_inside_the_chain_is_rolled_back_whole_then_the_merge_completes(root_uri: str) -> None:
    _big_feature(root_uri)
    before = people(root_uri, "main")
    crashed = _merge(root_uri, "write.after_merge_step")  # after the first of the chain's three commits
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    [record] = open_graph(open_store(root_uri), FENCED_PROFILE, write=True).recovered
    assert record.outcome == "rolled_back"
    assert people(root_uri, "main") == before
    assert_write_converged(root_uri, "main")
    assert _merge(root_uri).returncode == 0
    assert len(people(root_uri, "main")) == COMMIT_ROWS + 3
    assert_write_converged(root_uri, "main")
