"""Time travel: a read query ``--at`` a commit answers exactly what it answered when that commit
was the head, for four commits (an insert, an update, a node delete with its edges, an edge
delete), on both backends; commits inherited by a branch are readable from it, commits of another
branch are not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import NotFound
from omnigraph.engine.graph import Graph, open_graph
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.mutate import mutate
from omnigraph.engine.query.run import run_query
from omnigraph.engine.storage.store import open_store
from tests.conftest import new_root
from tests.support.graph_helpers import make_example_graph

READS = """
query reach() {
  match { $p: Person { name: "Alice" }  $p knows $f {1,3} }
  return { $f.name, $f.age }
}
query counts() {
  match { $p: Person  $p knows $f }
  return { $p.name, count($f) as n, max($f.age) as oldest }
}
query people() {
  match { $p: Person }
  return { count($p) as n, sum($p.age) as years }
}
"""
WRITES = """
query add() { insert Person { name: "Zed", age: 61 }
              insert Knows { from: "Dave", to: "Zed" } }
query older() { update Person set { age: 35 } where name = "Bob" }
query drop_carol() { delete Person where name = "Carol" }
query unlink() { delete Knows where id = "knows-alice-bob" }
"""


def _answers(graph: Graph, branch: str = "main", at: str | None = None) -> dict[str, Any]:
    found = {}
    for name in ("reach", "counts", "people"):
        answer = run_query(graph, READS, name=name, branch=branch, at=at)
        found[name] = answer["rows"]
        assert answer["commit"] == (at or graph.manifest.snapshot(branch).head.commit_id)
    return found


def test_each_commit_answers_as_it_did_when_it_was_the_head(backend: str, tmp_path: Path) -> None:
    root = new_root(backend, tmp_path)
    writer = make_example_graph(root)
    reader = open_graph(open_store(root), FENCED_PROFILE, write=False)
    seen: dict[str, dict[str, Any]] = {}
    for name in ("add", "older", "drop_carol", "unlink"):
        result = mutate(writer, WRITES, name=name, branch="main", actor="tests")
        assert result.commit is not None
        seen[result.commit.commit_id] = _answers(reader)
    assert len({str(answers) for answers in seen.values()}) == 4  # each commit changed the answers
    for commit, answers in seen.items():
        assert _answers(reader, at=commit) == answers, commit
    head = reader.manifest.snapshot("main").head.commit_id
    assert _answers(reader, at=head) == _answers(reader)


def test_a_branch_reads_the_commits_it_inherited_but_not_another_branchs(tmp_path: Path) -> None:
    root = str(tmp_path / "graph")
    writer = make_example_graph(root)
    first = mutate(writer, WRITES, name="add", branch="main", actor="tests").commit
    create_branch(writer, "dev", "main")
    on_dev = mutate(writer, WRITES, name="older", branch="dev", actor="tests").commit
    on_main = mutate(writer, WRITES, name="drop_carol", branch="main", actor="tests").commit
    assert first and on_dev and on_main
    reader = open_graph(open_store(root), FENCED_PROFILE, write=False)
    at_first = _answers(reader, "main", first.commit_id)
    assert _answers(reader, "dev", first.commit_id) == at_first
    assert _answers(reader, "dev", on_dev.commit_id) == _answers(reader, "dev")
    with pytest.raises(NotFound, match="not a commit of branch 'main'"):
        run_query(reader, READS, name="people", branch="main", at=on_dev.commit_id)
    with pytest.raises(NotFound, match="not a commit of branch 'dev'"):
        run_query(reader, READS, name="people", branch="dev", at=on_main.commit_id)
