"""The online upgrade: ``prepare`` while format-4 writers go on, a short ``cutover`` that validates only what moved.

Every writer here is a real ``omnigraph-v4`` process and every migrator command a real
``omnigraph-migrate`` process. The claims checked:

* ``prepare`` leaves the graph at stamp 4 and writable (a format-4 write succeeds under its
  claim, ``omnigraph check`` is clean), and a killed ``prepare`` never leaves writers refused;
* a second ``prepare --token`` validates only the image that moved, from its receipt, reading the
  changed rows only; the cutover validates only what moved since the last round; every
  acknowledged write is in the migrated graph;
* a duplicate written after ``prepare`` refuses the stamp at the cutover (exit 4, the inventory);
* a cutover over its outage bound writes nothing and its advice, run as printed, converges;
* a writer that armed its commit before the barrier is waited for and its rows absorbed; one that
  does not finish within the bound makes the cutover lower the barrier again, and the printed
  command finishes the migration;
* a branch deleted and made again between prepare and cutover is validated again, not taken
  from the receipts of the images of its earlier incarnation (their version numbers collide);
* a kill at the durable steps of prepare, of a catch-up and of the cutover (the claim, the
  receipts, the round, the barrier, the image records, a unit, the stamp; one on S3) converges by
  the printed advice.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from omnigraph.engine.failpoints import FAILPOINT_EXIT_STATUS
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.ledger import Ledger
from omnigraph.ledger.records import BarrierSet, ImageValidated
from omnigraph.migrator.layout import ledger_dir
from tests.support.advice import first_command, run_printed
from tests.support.graph_helpers import OMNIGRAPH, OMNIGRAPH_V4, Cli, export_text, run_cli
from tests.support.migration_cli import MIGRATE, claim_token, migrate
from tests.support.migration_fixtures import add_duplicate, compact_copy
from tests.support.paused_process import pause_at

MIGRATE_PATH = Path(MIGRATE)


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    """One compact format-4 fixture per backend, copied for each test (:func:`compact_copy`)."""
    return {}


def _person_file(tmp_path: Path, *names: str) -> Path:
    path = tmp_path / f"people-{names[0]}-{len(names)}.jsonl"
    path.write_text("".join(json.dumps({"type": "Person", "data": {"name": name}}) + "\n" for name in names), encoding="utf-8")
    return path


def _v4_append(uri: str, tmp_path: Path, *names: str, branch: str = "main") -> Cli:
    return run_cli(OMNIGRAPH_V4, "load", "--mode", "append", "--branch", branch, "--data", str(_person_file(tmp_path, *names)), uri)


def _json(result: subprocess.CompletedProcess[str] | Cli, code: int = 0) -> dict[str, Any]:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    return json.loads(result.stdout)


def _stamp(uri: str) -> str | None:
    return Manifest(open_store(uri)).read_stamp()[0]


def _records_after_last_barrier(uri: str, migration_id: str) -> list[Any]:
    records = [record for _, record in Ledger(open_store(uri), ledger_dir(migration_id)).replay().records]
    last = max(i for i, record in enumerate(records) if isinstance(record, BarrierSet))
    return records[last:]


def _people(uri: str, branch: str = "main") -> str:
    return export_text(uri, branch, ["Person"])


@pytest.mark.parametrize("backend", ["local", "s3"], indirect=True)
def test_writers_go_on_while_preparing_and_the_cutover_validates_only_what_moved(
    backend: str, tmp_path: Path, sources: dict[str, str]
) -> None:
    uri = compact_copy(backend, tmp_path, sources)
    first = _json(migrate("prepare", uri, "--owner", "sre", "--json"))
    assert first["status"] == "prepared" and first["validated"] == first["images"] > 0
    assert _stamp(uri) == "4"
    _v4_append(uri, tmp_path, "Online A").ok()  # the online claim bars no format-4 writer
    checked = run_cli(OMNIGRAPH, "check", uri, "--json")
    assert checked.returncode == 4  # the held claim is a finding, worded as an online one
    [finding] = json.loads(checked.stdout)["error"]["details"]["findings"]
    assert finding["kind"] == "claim_held" and "writers go on" in finding["message"]

    token = first["token"]
    planned = _json(migrate("plan", uri, "--json"))["cutover"]  # against the receipts: one changed row
    assert (planned["changed_rows"], planned["unreceived_rows"], planned["units"]) == (1, 0, first["cutover"]["units"])
    assert planned["estimated_seconds"] >= planned["floor_seconds"] == first["cutover"]["floor_seconds"]
    second = _json(migrate("prepare", uri, "--token", token, "--json"))
    assert (second["validated"], second["changed_rows"], second["rounds"]) == (1, 1, 2)
    _v4_append(uri, tmp_path, "Online B", "Online C").ok()

    done = _json(migrate("cutover", uri, "--token", token, "--max-outage", "60s", "--json"))
    assert done["status"] == "migrated" and done["stamp"] == "5"
    assert done["outage_seconds"] is not None and done["outage_seconds"] > 0
    under_barrier = [r for r in _records_after_last_barrier(uri, done["migration_id"]) if isinstance(r, ImageValidated)]
    assert len(under_barrier) == 1, under_barrier  # only main's Person image moved since the last round
    assert under_barrier[0].delta_from is not None and under_barrier[0].changed_rows == 2
    run_cli(MIGRATE_PATH, "verify", uri).ok()
    people = _people(uri)
    assert all(name in people for name in ("Online A", "Online B", "Online C"))
    status = _json(migrate("status", uri, "--json"))
    assert status["outage_seconds"] == done["outage_seconds"] and status["barrier_age_seconds"] is None


def test_a_duplicate_written_after_prepare_refuses_the_stamp(tmp_path: Path, sources: dict[str, str]) -> None:
    uri = compact_copy("local", tmp_path, sources)
    token = _json(migrate("prepare", uri, "--owner", "sre", "--json"))["token"]
    twin = add_duplicate(uri, tmp_path)
    refused = _json(migrate("cutover", uri, "--token", token, "--max-outage", "60s", "--json"), 4)["error"]
    assert refused["code"] == "validation_failed"
    assert [(e["entity_id"], e["graph_branches"]) for e in refused["details"]["inventory"]] == [(twin, ["dup"])]
    assert _stamp(uri) == "migrating"  # the repair works behind the barrier, which stays up
    advice = _json(migrate("status", uri, "--json"))["next"]
    assert "duplicate-repair" in advice


def test_a_duplicate_found_by_prepare_leaves_the_graph_writable(tmp_path: Path, sources: dict[str, str]) -> None:
    uri = compact_copy("local", tmp_path, sources)
    twin = add_duplicate(uri, tmp_path)
    refused = _json(migrate("prepare", uri, "--owner", "sre", "--json"), 4)["error"]
    assert refused["code"] == "validation_failed" and refused["details"]["inventory"][0]["entity_id"] == twin
    assert _stamp(uri) == "4"
    _v4_append(uri, tmp_path, "Still Writing").ok()
    # The advice, run as printed: the cutover stops at the duplicates behind the barrier, where
    # status names the repair playbook.
    cutover = first_command(refused["message"])
    assert (
        cutover
        == first_command(_json(migrate("status", uri, "--json"))["next"])
        == f"omnigraph-migrate cutover {uri} --token {claim_token(uri)}"
    )
    stopped = run_printed(cutover)
    assert stopped.returncode == 4 and _stamp(uri) == "migrating"
    assert "duplicate-repair" in _json(migrate("status", uri, "--json"))["next"]


def test_a_cutover_over_its_bound_writes_nothing_and_the_printed_advice_converges(tmp_path: Path, sources: dict[str, str]) -> None:
    uri = compact_copy("local", tmp_path, sources)
    prepared = _json(migrate("prepare", uri, "--owner", "sre", "--json"))
    token, floor = prepared["token"], prepared["cutover"]["floor_seconds"]
    _v4_append(uri, tmp_path, *[f"Bulk {i:05d}" for i in range(6000)]).ok()
    bound = f"{floor + 0.004:.3f}s"  # the changed rows, not the units, put it over the bound
    before = Manifest(open_store(uri)).snapshot("main").head.commit_id
    refused = _json(migrate("cutover", uri, "--token", token, "--max-outage", bound, "--json"), 1)["error"]
    assert refused["code"] == "cutover_deferred"
    assert _stamp(uri) == "4" and Manifest(open_store(uri)).snapshot("main").head.commit_id == before
    catch_up = first_command(refused["message"])
    assert catch_up == f"omnigraph-migrate prepare {uri} --token {token}"
    run_printed(catch_up).ok()
    # Units alone over the bound: catching up cannot help, and the advice says to raise it.
    tight = _json(migrate("cutover", uri, "--token", token, "--max-outage", "10ms", "--json"), 1)["error"]
    raise_bound = first_command(tight["message"])
    assert raise_bound.startswith(f"omnigraph-migrate cutover {uri} --token {token} --max-outage ")
    assert _stamp(uri) == "4"
    run_printed(raise_bound).ok()
    assert _stamp(uri) == "5" and "Bulk 05999" in _people(uri)


def _wait_for_stamp(uri: str, stamp: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while _stamp(uri) != stamp:
        assert time.monotonic() < deadline, f"stamp never became {stamp}"
        time.sleep(0.05)


def test_a_commit_armed_before_the_barrier_is_waited_for_and_absorbed(tmp_path: Path, sources: dict[str, str]) -> None:
    uri = compact_copy("local", tmp_path, sources)
    token = _json(migrate("prepare", uri, "--owner", "sre", "--json"))["token"]
    writer = pause_at(
        "write.after_arm", "omnigraph-v4", "load", "--mode", "append", "--data", str(_person_file(tmp_path, "In Flight")), uri
    )
    cutover = subprocess.Popen(
        [MIGRATE, "cutover", uri, "--token", token, "--max-outage", "60s", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_stamp(uri, "migrating")
        time.sleep(0.5)  # the cutover is draining: it waits for the armed commit
        assert cutover.poll() is None
        behind = _json(migrate("status", uri, "--json"))
        assert behind["barrier_age_seconds"] >= 0.5 and behind["outage_seconds"] is not None
    finally:
        returncode, _, stderr = writer.release("continue")
    assert returncode == 0, stderr  # a format-4 writer never reads the stamp again: it publishes
    out, err = cutover.communicate(timeout=120)
    assert cutover.returncode == 0, err
    done = json.loads(out)
    assert "In Flight" in _people(uri)
    moved = [r for r in _records_after_last_barrier(uri, done["migration_id"]) if isinstance(r, ImageValidated)]
    assert [r.changed_rows for r in moved] == [1]
    run_cli(MIGRATE_PATH, "verify", uri).ok()


def test_a_commit_that_outlasts_the_bound_lowers_the_barrier_and_the_advice_finishes(tmp_path: Path, sources: dict[str, str]) -> None:
    uri = compact_copy("local", tmp_path, sources)
    token = _json(migrate("prepare", uri, "--owner", "sre", "--json"))["token"]
    writer = pause_at("write.after_arm", "omnigraph-v4", "load", "--mode", "append", "--data", str(_person_file(tmp_path, "Slow")), uri)
    try:
        lowered = _json(migrate("cutover", uri, "--token", token, "--max-outage", "2s", "--parallel", "8", "--json"), 1)["error"]
        assert lowered["code"] == "cutover_deferred" and "did not end within 2s" in lowered["message"]
        assert _stamp(uri) == "4"
        _v4_append(uri, tmp_path, "Meanwhile").ok()  # the barrier is down: writers go on
    finally:
        returncode, _, stderr = writer.release("continue")
    assert returncode == 0, stderr
    run_printed(first_command(lowered["message"])).ok()
    assert _stamp(uri) == "5"
    people = _people(uri)
    assert "Slow" in people and "Meanwhile" in people
    status = _json(migrate("status", uri, "--json"))
    assert status["phase"] == "released" and status["outage_seconds"] >= 2


def test_a_branch_made_again_between_prepare_and_cutover_is_validated_again(tmp_path: Path, sources: dict[str, str]) -> None:
    uri = compact_copy("local", tmp_path, sources)
    token = _json(migrate("prepare", uri, "--owner", "sre", "--json"))["token"]
    run_cli(OMNIGRAPH_V4, "branch", "delete", "feat2", uri).ok()
    run_cli(OMNIGRAPH_V4, "branch", "create", "feat2", uri).ok()
    _v4_append(uri, tmp_path, "Second Life", branch="feat2").ok()
    done = _json(migrate("cutover", uri, "--token", token, "--max-outage", "60s", "--json"))
    validated = {r.table_branch for r in _records_after_last_barrier(uri, done["migration_id"]) if isinstance(r, ImageValidated)}
    assert "feat2" in validated
    people = _people(uri, "feat2")
    assert "Second Life" in people and "Feat2 Only" not in people
    run_cli(MIGRATE_PATH, "verify", uri).ok()


KILLS = [
    ("local", "prepare", "migrate.after_claim_created"),
    ("local", "prepare", "prepare.after_receipts"),
    ("local", "prepare", "prepare.after_round"),
    ("local", "catch-up", "prepare.after_receipts"),
    ("local", "cutover", "migrate.after_barrier"),
    ("local", "cutover", "migrate.after_image_records"),
    ("local", "cutover", "unit.after_pk"),
    ("local", "cutover", "migrate.after_stamp"),
    ("s3", "cutover", "migrate.after_image_records"),
]


@pytest.mark.parametrize(("backend", "phase", "failpoint"), KILLS, ids=[f"{b}-{p}-{f}" for b, p, f in KILLS], indirect=["backend"])
def test_a_kill_anywhere_converges_by_the_printed_advice(
    backend: str, phase: str, failpoint: str, tmp_path: Path, sources: dict[str, str]
) -> None:
    uri = compact_copy(backend, tmp_path, sources)
    if phase in ("catch-up", "cutover"):
        token = _json(migrate("prepare", uri, "--owner", "sre", "--json"))["token"]
        _v4_append(uri, tmp_path, "Before Cutover").ok()
        command = ["prepare", uri, "--token", token] if phase == "catch-up" else ["cutover", uri, "--token", token, "--max-outage", "60s"]
        killed = migrate(*command, failpoint=failpoint)
    else:
        killed = migrate("prepare", uri, "--owner", "sre", failpoint=failpoint)
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.stderr
    wrote = _stamp(uri) == "4"
    if wrote:
        _v4_append(uri, tmp_path, "After Kill").ok()  # a killed prepare (or a cutover before its barrier) refuses no writer
    for _ in range(4):
        if _stamp(uri) == "5" and _json(migrate("status", uri, "--json"))["claim"] is None:
            break
        command = first_command(_json(migrate("status", uri, "--json"))["next"])
        run_printed(command).ok()
    else:
        pytest.fail("the printed advice did not converge to stamp 5 in 4 commands")
    run_cli(MIGRATE_PATH, "verify", uri).ok()
    people = _people(uri)
    assert ("After Kill" in people) == wrote
    assert ("Before Cutover" in people) == (phase != "prepare")
