"""Reads of a branch that is deleted and created again at a chosen instant of the read.

A branch created again under its old name numbers its ``__manifest`` and table versions again
from its fork point, so the branch and version a snapshot pins can name the new incarnation's
rows. Each test stops a reader at one step (between reading the snapshot and opening its images,
or between a failed read and the check of why it failed), replaces the branch with the writer's
own real commits, and lets the reader go on: it must refuse with ``read_set_conflict`` (retry) or
``not_found``, never answer one incarnation's rows under the other's commit or fail with a Lance
error; its retry answers the new incarnation. (Real concurrent processes race the same reads in
``tests/engine/test_query_branch_recreate_race.py``.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import omnigraph
from omnigraph.engine.manifest import commit_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.ops import export, merge, snapshot
from omnigraph.engine.query import run
from omnigraph.errors import NotFound, ReadSetConflict
from tests.conftest import new_root
from tests.support.graph_helpers import SCHEMA_PATH

POINT = 'query q() { match { $p: Person { name: "p3" } } return { $p.age } }'


def _people(base: int) -> list[dict[str, Any]]:
    return [{"type": "Person", "data": {"name": f"p{i}", "age": base + i}} for i in range(5)]


@pytest.fixture
def graphs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[omnigraph.Graph, omnigraph.Graph, str]]:
    """A writer and a read-only reader of one graph whose branch ``b`` holds ages 100..104; the commit of that load.

    The graph is local, or on S3 for a test parametrized ``indirect`` with ``"s3"``.
    """
    backend = getattr(request, "param", "local")
    if backend == "s3":
        request.getfixturevalue("s3_server")
    root = new_root(backend, tmp_path)
    with omnigraph.init(root, SCHEMA_PATH) as writer:
        writer.load(_people(0), mode="append")
        writer.create_branch("b")
        loaded = writer.load(_people(100), mode="overwrite", branch="b").commits[-1]
        with omnigraph.open(root, read_only=True) as reader:
            assert [dict(row) for row in reader.query(POINT, branch="b").rows] == [{"p.age": 103}]
            yield writer, reader, loaded


def _replace(writer: omnigraph.Graph, ages: int | None) -> None:
    """Delete ``b``, create it again from main, and (unless ``ages`` is None) overwrite its people with ages from ``ages``."""
    writer.delete_branch("b")
    writer.create_branch("b")
    if ages is not None:
        writer.load(_people(ages), mode="overwrite", branch="b")


def _after_read_point(monkeypatch: pytest.MonkeyPatch, module: Any, act: Callable[[], None]) -> None:
    """Run ``act`` once, right after ``module``'s next ``read_point`` returns (the snapshot read, no image opened yet)."""
    real = commit_graph.read_point

    def then_act(*args: Any, **kwargs: Any) -> commit_graph.ReadPoint:
        point = real(*args, **kwargs)
        monkeypatch.setattr(module, "read_point", real)
        act()
        return point

    monkeypatch.setattr(module, "read_point", then_act)


@pytest.mark.parametrize("graphs", ["local", "s3"], indirect=True)
@pytest.mark.parametrize("ages", [200, None], ids=["loaded again", "just created"])
def test_a_query_refuses_images_of_a_later_incarnation(graphs: Any, monkeypatch: pytest.MonkeyPatch, ages: int | None) -> None:
    writer, reader, _ = graphs
    _after_read_point(monkeypatch, run, lambda: _replace(writer, ages))
    with pytest.raises(ReadSetConflict, match="deleted and created again while it was read; retry"):
        reader.query(POINT, branch="b")
    again = reader.query(POINT, branch="b")  # the retry reads the new incarnation
    assert [dict(row) for row in again.rows] == [{"p.age": 203 if ages else 3}]
    assert again.commit == writer.commits("b")[0].commit_id


def test_an_export_refuses_images_of_a_later_incarnation(graphs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    writer, reader, _ = graphs
    _after_read_point(monkeypatch, export, lambda: _replace(writer, 200))
    with pytest.raises(ReadSetConflict):
        reader.export_tables("b", ["Person"])
    assert sorted(reader.export_tables("b", ["Person"])["node:Person"].column("age").to_pylist()) == [200, 201, 202, 203, 204]


def test_a_branch_snapshot_and_an_explain_refuse_images_of_a_later_incarnation(graphs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    writer, reader, _ = graphs
    _after_read_point(monkeypatch, snapshot, lambda: _replace(writer, 200))
    with pytest.raises(ReadSetConflict):
        reader.snapshot("b")
    assert reader.snapshot("b").manifest_version > 0
    _after_read_point(monkeypatch, run, lambda: _replace(writer, 300))
    with pytest.raises(ReadSetConflict):
        reader.explain_query(POINT, branch="b")
    assert reader.explain_query(POINT, branch="b").tables


@pytest.mark.parametrize("graphs", ["local", "s3"], indirect=True)
def test_a_snapshot_read_that_fails_while_the_branch_is_replaced_is_read_again(graphs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The branch is gone when its ``__manifest`` is opened and back when the failure is examined: no Lance error escapes."""
    writer, reader, _ = graphs
    real_read, real_require = Manifest._snapshot, Manifest.require_branch

    def deleted_first(self: Manifest, branch: str, version: int | None) -> Any:
        monkeypatch.setattr(Manifest, "_snapshot", real_read)
        if branch == "b":
            writer.delete_branch("b")
        return real_read(self, branch, version)

    def created_before_the_check(self: Manifest, branch: str) -> None:
        monkeypatch.setattr(Manifest, "require_branch", real_require)
        writer.create_branch("b")
        real_require(self, branch)

    monkeypatch.setattr(Manifest, "_snapshot", deleted_first)
    monkeypatch.setattr(Manifest, "require_branch", created_before_the_check)
    with pytest.raises(ReadSetConflict):  # read again: the new incarnation, not the one the query started on
        reader.query(POINT, branch="b")
    assert [dict(row) for row in reader.query(POINT, branch="b").rows] == [{"p.age": 3}]


def test_a_branch_deleted_after_its_snapshot_was_read_is_not_found(graphs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    writer, reader, _ = graphs
    _after_read_point(monkeypatch, run, lambda: writer.delete_branch("b"))
    with pytest.raises(NotFound, match="graph branch 'b'"):
        reader.query(POINT, branch="b")


def test_a_commit_is_never_read_from_the_next_incarnation_of_its_branch(graphs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``b`` is replaced between reading its commit graph and reading the commit's ``__manifest``
    version: that version number now holds the new incarnation's load. The read refuses (retry),
    and the retry finds the commit gone with its incarnation."""
    writer, reader, loaded = graphs
    writer.load(_people(150), mode="merge", branch="b")  # the commit read is no longer the head
    assert [dict(row) for row in reader.query(POINT, branch="b", at=loaded).rows] == [{"p.age": 103}]
    real = commit_graph.load_commit_graph

    def then_replace(manifest: Manifest) -> commit_graph.CommitGraph:
        commits = real(manifest)
        monkeypatch.setattr(commit_graph, "load_commit_graph", real)
        _replace(writer, 200)
        return commits

    monkeypatch.setattr(commit_graph, "load_commit_graph", then_replace)
    with pytest.raises(ReadSetConflict, match=f"while commit '{loaded}' was read; retry"):
        reader.query(POINT, branch="b", at=loaded)
    with pytest.raises(NotFound, match=f"commit '{loaded}' is not a commit of branch 'b'"):
        reader.query(POINT, branch="b", at=loaded)


def test_a_merge_refuses_a_source_replaced_while_it_was_read(graphs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    writer, reader, _ = graphs
    before = writer.commits("main")[0].commit_id
    real = merge._plan

    def then_replace(*args: Any, **kwargs: Any) -> Any:
        plan = real(*args, **kwargs)
        monkeypatch.setattr(merge, "_plan", real)
        with omnigraph.open(writer.uri) as other:
            _replace(other, 200)
        return plan

    monkeypatch.setattr(merge, "_plan", then_replace)
    with pytest.raises(ReadSetConflict):
        writer.merge("b", into="main")
    assert writer.commits("main")[0].commit_id == before  # nothing merged
    writer.merge("b", into="main")  # the retry merges the new incarnation
    assert [dict(row) for row in reader.query(POINT).rows] == [{"p.age": 203}]
