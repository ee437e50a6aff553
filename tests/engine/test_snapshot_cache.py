"""A process folds each ``__manifest`` checkout once (``Manifest.snapshot``'s cache), keyed by what the
checkout holds: a branch deleted and created again reuses its version numbers, and a read of the new
branch at a reused number must never be answered from the old branch's snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

import omnigraph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import DATA_PATH, SCHEMA_PATH

AGE = "query age($name: String) { match { $p: Person { name: $name } } return { $p.age } }"


def _olga(age: int) -> list[dict[str, object]]:
    return [{"type": "Person", "data": {"name": "Olga", "age": age}}]


def _manifest_version(uri: str, branch: str) -> int:
    return int(Manifest(open_store(uri)).dataset(branch).version)


def test_a_branch_created_again_at_a_reused_version_is_read_as_the_new_branch(tmp_path: Path) -> None:
    uri = str(tmp_path / "graph")
    with omnigraph.init(uri, SCHEMA_PATH) as graph:
        graph.load(DATA_PATH, mode="append")
        graph.create_branch("b")
        graph.load(_olga(50), mode="append", branch="b")
        old_version = _manifest_version(uri, "b")
        assert graph.query(AGE, params={"name": "Olga"}, branch="b").rows == ({"p.age": 50},)
        first_head = graph.commits("b")[0].commit_id

        graph.delete_branch("b")
        graph.create_branch("b")
        graph.load(_olga(60), mode="append", branch="b")
        assert _manifest_version(uri, "b") == old_version  # the hazard: the same number, other rows
        assert graph.snapshot("b").manifest_version == old_version

        assert graph.query(AGE, params={"name": "Olga"}, branch="b").rows == ({"p.age": 60},)
        assert graph.commits("b")[0].commit_id != first_head


def test_a_cached_snapshot_cannot_be_changed_by_a_reader(tmp_path: Path) -> None:
    uri = str(tmp_path / "graph")
    with omnigraph.init(uri, SCHEMA_PATH) as graph:
        graph.load(DATA_PATH, mode="append")
    manifest = Manifest(open_store(uri))
    snapshot = manifest.snapshot("main")
    assert manifest.snapshot("main") is snapshot  # folded once, shared
    with pytest.raises(TypeError):
        snapshot.tables["node:Person"] = snapshot.tables["node:Person"]  # type: ignore[index]
