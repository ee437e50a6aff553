"""``omnigraph-migrate rebuild``: every branch's rows copied into a new format-5 graph; the source untouched."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from omnigraph.cli.migrate import cli as migrate_cli
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.graph import open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.lance_io import open_dataset, primary_key
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5
from omnigraph.engine.storage.store import open_store
from tests.conftest import new_root
from tests.support.graph_helpers import all_objects
from tests.support.migration_fixtures import BRANCHES, build_fixture, exports


def _rebuild(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(migrate_cli, ["rebuild", *args], env={"OMNIGRAPH_ACTOR": "test"}, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_rebuild_copies_every_branch_at_format_5_and_leaves_the_source_alone(backend: str, tmp_path: Path) -> None:
    source, target = new_root(backend, tmp_path, "source"), new_root(backend, tmp_path, "target")
    build_fixture(source, compact=True)
    before = all_objects(source)
    code, stdout, stderr = _rebuild(source, "--to", target, "--json")
    assert code == 0, stderr
    document = json.loads(stdout)
    assert [b["name"] for b in document["branches"]] == ["main", "feat", "lazy", "feat2"]
    assert all_objects(source) == before
    assert Manifest(open_store(source)).read_stamp()[0] == FORMAT_4
    assert Manifest(open_store(target)).read_stamp()[0] == FORMAT_5
    assert exports(target) == exports(source)
    rebuilt = open_graph(open_store(target), FENCED_PROFILE, write=True)
    parents = {name: b.parent_branch for name, b in rebuilt.manifest.branches().items()}
    assert sorted(parents) == sorted(BRANCHES) and parents["feat2"] == "feat" and parents["lazy"] == "main"
    for branch in BRANCHES:
        for entry in rebuilt.manifest.snapshot(branch).tables.values():
            dataset = open_dataset(rebuilt.store, entry.table_path, entry.table_branch, entry.table_version)
            assert primary_key(dataset.schema) == ["id"], (branch, entry.table_key)


def test_rebuild_refuses_a_destination_that_is_not_empty_before_reading_anything(backend: str, tmp_path: Path) -> None:
    source, target = new_root(backend, tmp_path, "source"), new_root(backend, tmp_path, "target")
    open_store(target).write_bytes("keep.txt", b"someone else's file\n")
    before = all_objects(target)
    code, _, stderr = _rebuild(source, "--to", target)
    assert code == 1 and "error [bad_request]" in stderr and "is not empty" in stderr
    assert all_objects(target) == before
