"""The migrator refusing: duplicate ids (exit 4, nothing fenced) and drift (absorbed before the units, else no stamp)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnigraph.claims.claim import inspect
from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.failpoints import FAILPOINT_EXIT_STATUS
from omnigraph.engine.graph import open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.ops.load import load
from omnigraph.engine.storage.lance_io import list_branches, open_dataset, primary_key
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.ledger import Ledger
from omnigraph.ledger.records import ValidationFailedRecord
from omnigraph.migrator.layout import CLAIM_PATH, ledger_dir
from tests.conftest import new_root
from tests.support.advice import first_command, run_printed
from tests.support.check_helpers import assert_check_clean, assert_check_finds
from tests.support.migration_cli import claim_token, migrate
from tests.support.migration_fixtures import build_duplicate, build_fixture, count_ids


def _table_heads_without_pk(uri: str) -> list[str]:
    """Every table dataset's HEAD on main and on every Lance branch that carries a PK."""
    store = open_store(uri)
    with_pk = []
    for entry in Manifest(store).snapshot("main").tables.values():
        names: list[str | None] = [None, *list_branches(open_dataset(store, entry.table_path))]
        for name in names:
            if primary_key(open_dataset(store, entry.table_path, name).schema):
                with_pk.append(f"{entry.table_path}@{name or 'main'}")
    return with_pk


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_duplicate_ids_stop_the_run_before_any_pk(backend: str, tmp_path: Path) -> None:
    uri = new_root(backend, tmp_path)
    twin = build_duplicate(uri, tmp_path)
    report = migrate("duplicates", uri, "--json")
    assert report.returncode == 4, report.stderr
    listed = json.loads(report.stdout)["inventory"]
    assert inspect(open_store(uri), CLAIM_PATH) is None  # duplicates takes no claim
    [entry] = listed
    assert entry["entity_kind"] == "node" and entry["type_name"] == "Person" and entry["entity_id"] == twin
    assert entry["problem"] == "duplicate" and entry["graph_branches"] == ["dup"] and entry["rows"] >= 2

    failed = migrate("run", uri, "--owner", "ci", "--json")
    assert failed.returncode == 4, failed.stderr
    error = json.loads(failed.stdout)["error"]
    assert error["code"] == "validation_failed"
    assert error["details"]["inventory"] == listed
    assert _table_heads_without_pk(uri) == []
    store = open_store(uri)
    stamp, migration_id = Manifest(store).read_stamp()
    assert stamp == "migrating"  # the barrier stays up: repair under the claim, or abort
    assert inspect(store, CLAIM_PATH) is not None
    records = [r for _, r in Ledger(store, ledger_dir(str(migration_id))).replay().records]
    # Found online by the prepare round, then again behind the barrier, where the repair works.
    recorded = [r for r in records if isinstance(r, ValidationFailedRecord)]
    assert [[e.model_dump(mode="json") for e in r.inventory] for r in recorded] == [listed, listed]
    assert records.index(recorded[0]) < next(i for i, r in enumerate(records) if r.kind == "barrier_set") < records.index(recorded[1])
    assert not any(r.kind == "unit_step" for r in records)

    human = migrate("run", uri, "--owner", "ci")
    assert human.returncode == 3  # the barrier is held by the failed migration

    aborted = migrate("abort", uri, "--token", claim_token(uri))
    assert aborted.returncode == 0, aborted.stderr
    assert Manifest(store).read_stamp() == ("4", None)
    again = migrate("run", uri, "--owner", "ci")
    assert again.returncode == 4
    assert twin in again.stdout  # without --json the inventory is printed on stdout
    report = assert_check_finds(uri, ["duplicate_ids", "migration_in_progress"])
    assert [f["details"]["branches"] for f in report["findings"] if f["kind"] == "duplicate_ids"] == [["dup"]]


def _stale_v4_write(graph, branch: str, name: str) -> None:
    load(graph, (json.dumps({"type": "Person", "data": {"name": name}}) + "\n").encode(), mode="append", branch=branch, actor="stale")


@pytest.mark.parametrize("backend", ["local", "s3"], indirect=True)  # one case re-reads versions on S3
def test_a_write_behind_the_barrier_before_any_unit_is_absorbed(backend: str, tmp_path: Path) -> None:
    """A commit of an old writer that never reads the stamp, landing after the cutover's plan: more delta."""
    uri = new_root(backend, tmp_path)
    build_fixture(uri, compact=True)
    stale = open_graph(open_store(uri), LEGACY_PROFILE, write=True)  # an old writer that was never stopped
    crashed = migrate("run", uri, "--owner", "ci", failpoint="migrate.after_plan")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    assert Manifest(open_store(uri)).read_stamp()[0] == "migrating"
    _stale_v4_write(stale, "main", "Written Behind The Barrier")
    resumed = migrate("resume", uri, "--token", claim_token(uri), "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert Manifest(open_store(uri)).read_stamp()[0] == "5"
    assert count_ids(uri, "main", "node:Person", "Written Behind The Barrier") == 1
    assert_check_clean(uri)


def test_a_writer_left_running_after_the_units_started_lowers_the_barrier(tmp_path: Path) -> None:
    """What cannot be absorbed (units progressed) stops the migration and lowers the barrier, with the reason."""
    uri = new_root("local", tmp_path)
    build_fixture(uri, compact=True)
    stale = open_graph(open_store(uri), LEGACY_PROFILE, write=True)  # an old writer that was never stopped
    crashed = migrate("run", uri, "--owner", "ci", failpoint="migrate.after_units")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    _stale_v4_write(stale, "lazy", "Written Behind The Barrier")
    resumed = migrate("resume", uri, "--token", claim_token(uri), "--json")
    assert resumed.returncode == 1, resumed.stderr
    error = json.loads(resumed.stdout)["error"]
    assert error["code"] == "drift_detected" and "head of lazy" in error["message"]
    assert Manifest(open_store(uri)).read_stamp()[0] == "4"  # the barrier was lowered: writers go on
    assert inspect(open_store(uri), CLAIM_PATH) is None
    _stale_v4_write(stale, "lazy", "Written After The Lowering")
    again = run_printed(f"omnigraph-migrate run {uri}")
    assert again.returncode == 0, again.stderr
    assert count_ids(uri, "lazy", "node:Person", "Written After The Lowering") == 1
    assert_check_clean(uri)


def test_a_crash_between_image_records_and_the_failure_record_does_not_resume_past_duplicates(
    tmp_path: Path,
) -> None:
    """The broken image is validated again on resume: no PK, no stamp over duplicates."""
    uri = new_root("local", tmp_path)
    twin = build_duplicate(uri, tmp_path)
    crashed = migrate("run", uri, "--owner", "ci", failpoint="migrate.after_image_records")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    resumed = migrate("resume", uri, "--token", claim_token(uri), "--json")
    assert resumed.returncode == 4, resumed.stderr
    error = json.loads(resumed.stdout)["error"]
    assert [e["entity_id"] for e in error["details"]["inventory"]] == [twin]
    assert _table_heads_without_pk(uri) == []
    assert Manifest(open_store(uri)).read_stamp()[0] == "migrating"
    assert_check_finds(uri, ["duplicate_ids", "migration_in_progress"])


def test_a_unit_that_finds_its_table_moved_lowers_the_barrier(tmp_path: Path) -> None:
    """A late commit met by a unit (not by the verification) stops the migration the same way: aborted, stamp 4."""
    uri = new_root("local", tmp_path)
    build_fixture(uri, compact=True)
    stale = open_graph(open_store(uri), LEGACY_PROFILE, write=True)  # an old writer that was never stopped
    crashed = migrate("run", uri, "--owner", "ci", "--parallel", "1", failpoint="unit.after_pk")  # main's first unit only
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    _stale_v4_write(stale, "lazy", "Written Behind The Barrier")
    resumed = migrate("resume", uri, "--token", claim_token(uri), "--json")
    assert resumed.returncode == 1, resumed.stderr
    error = json.loads(resumed.stdout)["error"]
    assert error["code"] == "drift_detected" and "the migration was aborted" in error["message"]
    assert Manifest(open_store(uri)).read_stamp()[0] == "4" and inspect(open_store(uri), CLAIM_PATH) is None
    run_printed(first_command(error["message"])).ok()
    assert count_ids(uri, "lazy", "node:Person", "Written Behind The Barrier") == 1
    assert_check_clean(uri)
