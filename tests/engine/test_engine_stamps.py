"""Format stamps (DESIGN section 3): which binary opens which stamp, read-write and read-only.

Each test runs one refusal through the real console script and the rest of its matrix in-process
(the same click commands), and compares the full storage state around all of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from omnigraph.engine.manifest.manifest import FORMAT_KEY, Manifest
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import (
    LEGACY_PROFILE,
    OMNIGRAPH,
    OMNIGRAPH_V4,
    export_text,
    graph_for,
    invoke_all,
    make_example_graph,
    omnigraph,
    omnigraph_v4,
    person,
    storage_state,
    write_jsonl,
)

EXIT_FORMAT_REFUSED = 6


def _refused(result, *words: str) -> None:
    assert result.returncode == EXIT_FORMAT_REFUSED, result.describe()
    for word in words:
        assert word in result.stderr, result.describe()


def _v4_graph(uri: str) -> None:
    make_example_graph(uri, LEGACY_PROFILE)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_fenced_engine_reads_a_v4_graph_but_refuses_to_write_it(root_uri: str, tmp_path: Path) -> None:
    _v4_graph(root_uri)
    create_branch(graph_for(root_uri, LEGACY_PROFILE, write=True), "feat")
    legacy_export = export_text(root_uri, profile=LEGACY_PROFILE)
    data = write_jsonl(tmp_path, "one.jsonl", [person("Zed")])
    before = storage_state(root_uri)
    load = omnigraph("load", "--mode", "append", "--data", data, "--json", root_uri)
    create, on_branch, delete, snap, export, branches, log, v4_snap, feat_snap = invoke_all(
        [OMNIGRAPH, "branch", "create", "other", root_uri],
        [OMNIGRAPH, "load", "--mode", "merge", "--branch", "feat", "--data", data, root_uri],
        [OMNIGRAPH, "branch", "delete", "feat", root_uri],
        [OMNIGRAPH, "snapshot", "--json", root_uri],
        [OMNIGRAPH, "export", root_uri],
        [OMNIGRAPH, "branch", "list", "--json", root_uri],
        [OMNIGRAPH, "commit", "list", "--json", root_uri],
        [OMNIGRAPH_V4, "snapshot", "--json", root_uri],
        [OMNIGRAPH, "snapshot", "--json", "--branch", "feat", root_uri],
    )
    _refused(load, "omnigraph-migrate")
    assert load.json()["error"]["code"] == "format_refused"
    for refused in (create, on_branch, delete):  # naming a branch does not bypass the stamp
        _refused(refused, "omnigraph-migrate")
    assert feat_snap.ok().json()["format"] == "4"
    assert all(t["pk"] == [] for t in feat_snap.json()["tables"])

    document = snap.ok().json()
    assert document["format"] == "4"
    assert [t["table_key"] for t in document["tables"]] == sorted(t["table_key"] for t in document["tables"])
    assert all(t["pk"] == [] for t in document["tables"])
    assert v4_snap.ok().json() == document
    assert export.ok().stdout == legacy_export
    assert len(export.stdout.splitlines()) == 41
    assert [b["name"] for b in branches.ok().json()["branches"]] == ["main", "feat"]
    assert [c["message"] for c in log.ok().json()["commits"]] == ["load --mode append", "init"]
    assert storage_state(root_uri) == before


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_v4_writer_refuses_a_format_5_graph(root_uri: str, tmp_path: Path) -> None:
    create_branch(make_example_graph(root_uri), "feat")
    data = write_jsonl(tmp_path, "one.jsonl", [person("Zed")])
    before = storage_state(root_uri)
    results = [
        omnigraph_v4("load", "--mode", "append", "--data", data, "--json", root_uri),
        *invoke_all(
            [OMNIGRAPH_V4, "branch", "create", "other", root_uri],
            [OMNIGRAPH_V4, "branch", "delete", "feat", root_uri],
            [OMNIGRAPH_V4, "load", "--mode", "merge", "--branch", "feat", "--data", data, root_uri],
            [OMNIGRAPH_V4, "snapshot", "--json", root_uri],
            [OMNIGRAPH_V4, "snapshot", "--json", "--branch", "feat", root_uri],
            [OMNIGRAPH_V4, "export", root_uri],
            [OMNIGRAPH_V4, "export", "--branch", "feat", root_uri],
            [OMNIGRAPH_V4, "branch", "list", root_uri],
        ),
    ]
    for result in results:
        _refused(result, "upgrade omnigraph first")
        if "--json" in result.args:
            assert result.json()["error"]["code"] == "format_refused", result.describe()
        else:
            assert result.stdout == "", result.describe()
    assert storage_state(root_uri) == before


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_migrating_stamp_blocks_writers_and_the_old_binary(root_uri: str, tmp_path: Path) -> None:
    _v4_graph(root_uri)
    create_branch(graph_for(root_uri, LEGACY_PROFILE, write=True), "feat")
    legacy_export = export_text(root_uri, profile=LEGACY_PROFILE)
    Manifest(open_store(root_uri)).write_stamp("migrating", "m-1")
    data = write_jsonl(tmp_path, "one.jsonl", [person("Zed")])
    before = storage_state(root_uri)
    v4_snap = omnigraph_v4("snapshot", "--json", root_uri)
    load, create, delete, snap, export, branches, v4_load, v4_export = invoke_all(
        [OMNIGRAPH, "load", "--mode", "append", "--data", data, root_uri],
        [OMNIGRAPH, "branch", "create", "other", root_uri],
        [OMNIGRAPH, "branch", "delete", "feat", root_uri],
        [OMNIGRAPH, "snapshot", "--json", root_uri],
        [OMNIGRAPH, "export", root_uri],
        [OMNIGRAPH, "branch", "list", root_uri],
        [OMNIGRAPH_V4, "load", "--mode", "append", "--data", data, "--json", root_uri],
        [OMNIGRAPH_V4, "export", root_uri],
    )
    for refused in (load, create, delete, v4_load, v4_snap, v4_export):
        _refused(refused, "m-1", "omnigraph-migrate status")
    assert v4_load.json()["error"]["code"] == "format_refused"
    assert v4_snap.json()["error"]["code"] == "format_refused"
    document = snap.ok().json()
    assert document["format"] == "migrating"
    assert all(t["pk"] == [] for t in document["tables"])
    assert export.ok().stdout == legacy_export
    branches.ok()
    assert storage_state(root_uri) == before


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_missing_or_unknown_stamp_is_refused_by_both_binaries(root_uri: str, tmp_path: Path) -> None:
    make_example_graph(root_uri)
    data = write_jsonl(tmp_path, "one.jsonl", [person("Zed")])
    for stamp in (None, "7"):
        Manifest(open_store(root_uri)).dataset("main").update_schema_metadata({FORMAT_KEY: stamp})
        assert Manifest(open_store(root_uri)).read_stamp()[0] == stamp
        before = storage_state(root_uri)
        results = invoke_all(  # a read-write and a read-only open of each binary
            [OMNIGRAPH, "load", "--mode", "append", "--data", data, "--json", root_uri],
            [OMNIGRAPH, "export", root_uri],
            [OMNIGRAPH_V4, "branch", "create", "feat", root_uri],
            [OMNIGRAPH_V4, "snapshot", "--json", root_uri],
        )
        for result in results:
            _refused(result, "7" if stamp else "no omnigraph:format stamp")
            if "--json" in result.args:
                assert result.json()["error"]["code"] == "format_refused", result.describe()
            else:
                assert result.stdout == "", result.describe()
        assert storage_state(root_uri) == before
