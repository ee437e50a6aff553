"""export -> load --mode overwrite into a new root -> export is byte-identical (CLI, both backends)."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnigraph.engine.ops.branches import create_branch
from tests.conftest import new_root
from tests.support.graph_helpers import (
    DATA_PATH,
    OMNIGRAPH,
    SCHEMA_PATH,
    export_text,
    init,
    knows,
    load_lines,
    make_example_graph,
    omnigraph,
    person,
    record_key,
    run_parallel,
    snapshot,
    write_jsonl,
)

EXAMPLE_RECORDS = 41


def _assert_export_order(text: str) -> None:
    lines = text.splitlines()
    keys = [record_key(line) for line in lines]
    assert keys == sorted(keys), "export must be sorted by table key, then id"
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_round_trip_of_main_through_a_new_root(backend: str, tmp_path: Path, root_uri: str) -> None:
    copy_uri = new_root(backend, tmp_path, "copy")
    for result in run_parallel(
        [OMNIGRAPH, "init", "--schema", SCHEMA_PATH, root_uri],
        [OMNIGRAPH, "init", "--schema", SCHEMA_PATH, copy_uri],
    ):
        result.ok()
    omnigraph("load", "--mode", "append", "--data", DATA_PATH, root_uri).ok()
    first = omnigraph("export", root_uri).ok().stdout_bytes
    assert len(first.splitlines()) == EXAMPLE_RECORDS
    _assert_export_order(first.decode("utf-8"))

    dump = write_jsonl(tmp_path, "dump.jsonl", first)
    omnigraph("load", "--mode", "overwrite", "--data", dump, copy_uri).ok()
    second = omnigraph("export", copy_uri).ok().stdout_bytes
    assert second == first
    assert all(table["pk"] == ["id"] for table in snapshot(copy_uri)["tables"])


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_round_trip_of_a_branch_with_its_own_writes(backend: str, tmp_path: Path, root_uri: str) -> None:
    graph = make_example_graph(root_uri)
    create_branch(graph, "feat")
    load_lines(root_uri, [person("Yan", age=7), knows("Yan", "Alice", "knows-yan-alice", since=20000)], branch="feat")
    load_lines(root_uri, [person("Zed")])  # main moves on; feat must not see it
    expected = export_text(root_uri, "feat")
    assert expected != export_text(root_uri, "main")

    copy_uri = new_root(backend, tmp_path, "copy")
    create_branch(init(copy_uri), "feat")
    first = omnigraph("export", "--branch", "feat", root_uri).ok().stdout_bytes
    assert first.decode("utf-8") == expected
    _assert_export_order(expected)
    assert '"Yan"' in expected and '"Zed"' not in expected

    dump = write_jsonl(tmp_path, "feat.jsonl", first)
    omnigraph("load", "--mode", "overwrite", "--branch", "feat", "--data", dump, copy_uri).ok()
    second = omnigraph("export", "--branch", "feat", copy_uri).ok().stdout_bytes
    assert second == first
    # The overwrite landed on the branch only: the copy's main is still empty.
    assert export_text(copy_uri, "main") == ""
    assert all(t["rows"] == 0 and t["table_branch"] is None for t in snapshot(copy_uri, "main")["tables"])
    assert all(t["table_branch"] == "feat" and t["pk"] == ["id"] for t in snapshot(copy_uri, "feat")["tables"])
