"""``omnigraph check``: clean graphs pass; each kind of corruption is found, with exit 4.

Every test corrupts a small graph in exactly one way (with Lance or the store directly, as a
buggy writer or a hand edit would) and asserts the finding the checker reports, that the check
itself wrote nothing, and, where the finding names a command, that the command resolves it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

from omnigraph.engine.door import table_store
from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import TableEntry, with_version
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.storage.lance_io import open_dataset
from omnigraph.engine.storage.store import open_store
from tests.conftest import new_root
from tests.support.check_helpers import assert_check_clean, tree_digest
from tests.support.graph_helpers import (
    OMNIGRAPH,
    invoke,
    load_lines,
    make_example_graph,
    person,
    run_cli,
)
from tests.support.out_of_band import append_unfenced, publish_row


def _graph(uri: str, profile: Any = None) -> str:
    """The example graph, a branch ``feat`` with its own Person fork, and a lazy branch."""
    graph = make_example_graph(uri, profile) if profile else make_example_graph(uri)
    create_branch(graph, "feat")
    create_branch(graph, "lazy")
    load_lines(uri, [person("Feat Only", 7)], branch="feat", profile=graph.profile)
    return uri


def check(uri: str) -> tuple[int, dict[str, Any]]:
    """Run ``omnigraph check --json``: (exit status, report); the check writes nothing."""
    before = tree_digest(uri)
    result = invoke(OMNIGRAPH, "check", "--json", uri)
    assert tree_digest(uri) == before
    document = json.loads(result.stdout)
    if result.returncode == 0:
        return 0, document
    assert result.returncode == 4, result.describe()
    assert document["error"]["code"] == "validation_failed"
    return 4, document["error"]["details"]


def kinds(report: dict[str, Any]) -> list[str]:
    return sorted({finding["kind"] for finding in report["findings"]})


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_clean_graph_passes_on_every_branch(backend: str, tmp_path: Path) -> None:
    uri = _graph(new_root(backend, tmp_path))
    status, report = check(uri)
    assert status == 0 and report["ok"] is True
    assert report["branches"] == ["main", "feat", "lazy"] and report["stamp"] == "5"
    assert report["images_checked"] == 9  # 8 tables on main, plus feat's own Person fork
    human = run_cli(OMNIGRAPH, "check", uri)
    assert human.returncode == 0 and "clean (3 branch(es), 9 image(s), stamp 5)" in human.stdout, human.describe()


def test_an_interrupted_write_is_a_pending_intent_that_the_named_commands_resolve(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"))
    data = tmp_path / "ivan.jsonl"
    data.write_text(person("Ivan", 40) + "\n")
    crashed = run_cli(OMNIGRAPH, "load", "--mode", "append", "--data", data, uri, env={FAILPOINT_ENV: "write.after_effect"})
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.describe()
    status, report = check(uri)
    assert status == 4 and kinds(report) == ["pending_intent"]  # the intent explains the HEAD ahead
    message = report["findings"][0]["message"]
    commands = [part for part in message.split("`") if part.startswith("omnigraph ")]
    assert commands == [f"omnigraph recover {uri}"]
    for command in commands:
        run_cli(OMNIGRAPH, *command.split()[1:]).ok()
    assert_check_clean(uri)


def test_a_table_head_ahead_of_its_pin_without_an_intent(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"))
    store = open_store(uri)
    entry = Manifest(store).snapshot("main").table("node:Tag")
    table_store.upsert(open_dataset(store, entry.table_path), pa.table({"id": ["orphan"], "label": ["orphan"]}))
    status, report = check(uri)
    assert status == 4 and kinds(report) == ["table_head_ahead"]
    assert report["findings"][0]["table_path"] == entry.table_path


def test_a_table_branch_no_graph_branch_pins(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"))
    store = open_store(uri)
    entry = Manifest(store).snapshot("main").table("node:Company")
    open_dataset(store, entry.table_path).create_branch("gone", reference=("main", entry.table_version))
    status, report = check(uri)
    assert status == 4 and kinds(report) == ["unpinned_table_branch"]
    assert report["findings"][0]["details"] == {"table_branch": "gone"}


def test_a_manifest_row_pinning_a_missing_version_and_a_wrong_row_count(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"))
    snapshot = Manifest(open_store(uri)).snapshot("lazy")
    publish_row(uri, "lazy", with_version(snapshot.table("node:Tag"), None, 999, 4))
    publish_row(uri, "lazy", with_version(snapshot.table("node:Company"), None, snapshot.table("node:Company").table_version, 77))
    status, report = check(uri)
    assert status == 4 and kinds(report) == ["row_count_mismatch", "table_version_missing"]
    assert {(f["kind"], f["branch"], f["table_key"]) for f in report["findings"]} == {
        ("row_count_mismatch", "lazy", "node:Company"),
        ("table_version_missing", "lazy", "node:Tag"),
    }


def test_a_manifest_row_for_an_undeclared_table_and_a_missing_row(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"))
    store = open_store(uri)
    tag = Manifest(store).snapshot("main").table("node:Tag")
    publish_row(uri, "main", TableEntry("node:Ghost", tag.table_path, None, tag.table_version, tag.row_count))
    open_dataset(store, "__manifest", "feat").delete("object_id = 'table:node:Tag'")
    status, report = check(uri)
    assert status == 4 and kinds(report) == ["table_missing", "table_unexpected"]
    assert sorted((f["branch"], f["table_key"]) for f in report["findings"]) == [("feat", "node:Tag"), ("main", "node:Ghost")]


def test_a_branch_manifest_without_a_head_row(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"))
    open_dataset(open_store(uri), "__manifest", "lazy").delete("object_id = 'head'")
    status, report = check(uri)
    assert status == 4 and kinds(report) == ["manifest_unreadable"] and report["findings"][0]["branch"] == "lazy"


def test_stamp_5_over_tables_without_a_primary_key(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"), LEGACY_PROFILE)
    status, report = check(uri)
    assert status == 0 and report["stamp"] == "4"  # format 4 without PKs is consistent
    Manifest(open_store(uri)).write_stamp("5", None)
    status, report = check(uri)
    # every pin of every branch, and every branch head (written by the format-4 writer, not fenced by a stamp)
    assert status == 4 and kinds(report) == ["pk_missing", "unfenced_commit"]
    assert [f["kind"] for f in report["findings"]].count("pk_missing") == 3 * 8
    unfenced = [f for f in report["findings"] if f["kind"] == "unfenced_commit"]
    assert sorted(f["branch"] for f in unfenced) == ["feat", "lazy", "main"]
    assert {f["details"]["next"] for f in unfenced} == {f"omnigraph-migrate refence {uri}"}


def test_a_primary_key_other_than_id(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"))
    store = open_store(uri)
    entry = Manifest(store).snapshot("main").table("node:Tag")
    schema = open_dataset(store, entry.table_path).schema
    fields = [
        f.with_metadata({})
        if f.name == "id"
        else f.with_metadata({"lance-schema:unenforced-primary-key": "true"})
        if f.name == "label"
        else f
        for f in schema
    ]
    wrong = lance.write_dataset(pa.schema(fields).empty_table(), store.dataset_uri("nodes/Tag-wrong"), schema=pa.schema(fields))
    publish_row(uri, "main", TableEntry("node:Tag", "nodes/Tag-wrong", None, int(wrong.version), 0))
    status, report = check(uri)
    assert status == 4 and "pk_wrong" in kinds(report)
    assert [f["details"]["pk"] for f in report["findings"] if f["kind"] == "pk_wrong"] == [["label"]]


def test_stamp_migrating_and_an_unknown_stamp(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"))
    manifest = Manifest(open_store(uri))
    manifest.write_stamp("migrating", "m-1")
    status, report = check(uri)
    assert status == 4 and kinds(report) == ["migration_in_progress"]
    # a barrier with no claim and no break record: nothing the tools run resolves it
    assert "restore __migration/claim.json from a backup" in report["findings"][0]["message"]
    manifest.write_stamp("7", None)
    status, report = check(uri)
    assert status == 4 and kinds(report) == ["stamp_invalid"]


def test_duplicate_and_null_ids_in_a_pinned_image(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"), LEGACY_PROFILE)
    append_unfenced(uri, "node:Person", [{"id": "Alice", "name": "Alice", "age": 1}])
    status, report = check(uri)
    assert status == 4 and kinds(report) == ["duplicate_ids"]
    finding = report["findings"][0]
    assert finding["details"]["listed"] == [{"id": "Alice", "count": 2}]
    assert finding["details"]["branches"] == ["main"]
    # Lance refuses a null in the non-null id column, so a buggy writer's table with a nullable one:
    store = open_store(uri)
    nullable = pa.schema([pa.field("id", pa.utf8()), pa.field("label", pa.utf8())])
    rows = pa.table({"id": [None, "t1", None], "label": ["a", "b", "c"]}, schema=nullable)
    written = lance.write_dataset(rows, store.dataset_uri("nodes/Tag-nullable"), schema=nullable)
    publish_row(uri, "lazy", TableEntry("node:Tag", "nodes/Tag-nullable", None, int(written.version), 3))
    status, report = check(uri)
    assert status == 4 and kinds(report) == ["duplicate_ids", "null_ids"]
    nulls = [f for f in report["findings"] if f["kind"] == "null_ids"]
    assert [(f["details"]["null_ids"], f["details"]["branches"]) for f in nulls] == [(2, ["lazy"])]


def test_edges_whose_endpoints_do_not_exist(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"), LEGACY_PROFILE)
    append_unfenced(uri, "edge:Knows", [{"id": "k-ghost", "src": "Alice", "dst": "Nobody"}])
    status, report = check(uri)
    assert status == 4 and kinds(report) == ["dangling_edge"]
    # main pins the edge; lazy inherited the edge image from before, so only main is affected
    assert [(f["branch"], f["details"]["listed"]) for f in report["findings"]] == [
        ("main", [{"edge_id": "k-ghost", "end": "dst", "node_id": "Nobody"}])
    ]


def test_an_unreadable_schema_and_an_unreadable_intent(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"))
    store = open_store(uri)
    store.write_bytes("_schema.pg", b"node {{ \xff")
    store.write_bytes("__recovery/01BADBADBADBADBADBADBADBAD.json", b"{not json")
    status, report = check(uri)
    assert status == 4 and kinds(report) == ["intent_unreadable", "schema_unreadable"]


def test_check_of_a_missing_graph_is_not_found(tmp_path: Path) -> None:
    result = invoke(OMNIGRAPH, "check", "--json", tmp_path / "nothing")
    assert result.returncode == 1 and result.json()["error"]["code"] == "not_found"


def test_human_report_lists_every_finding_on_stdout(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "g"), LEGACY_PROFILE)
    append_unfenced(uri, "edge:Knows", [{"id": "k-ghost", "src": "Ghost", "dst": "Nobody"}])
    result = run_cli(OMNIGRAPH, "check", uri)
    assert result.returncode == 4, result.describe()
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dangling_edge\tmain\tedge:Knows\t")
    assert "error [validation_failed]" in result.stderr and "1 integrity finding(s)" in result.stderr
