"""Ledger: gap-free create-if-absent appends, fencing of losers, loud replay failures, schema."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from omnigraph.engine.errors import BadRequest, NotFound
from omnigraph.engine.storage.store import GraphStore, open_store
from omnigraph.ledger.errors import LedgerCorrupt, LedgerFenced
from omnigraph.ledger.fold import ImageState
from omnigraph.ledger.layout import record_path
from omnigraph.ledger.ledger import Ledger
from omnigraph.ledger.records import (
    BarrierSet,
    BranchPlan,
    ImageValidated,
    MigrationStarted,
    PlanRecorded,
    PlaybookStep,
    Resumed,
    StampWritten,
    UnitCompleted,
    UnitPlan,
    UnitStep,
    Verified,
)
from omnigraph.ledger.render import render_json, render_table
from omnigraph.ledger.schema import SCHEMA_FILE, schema_text
from tests.support.process_race import release_together, spawn

DIR = "__migration/m-1/ledger"
TOKEN = "a1" * 16
MIGRATION = "m-1"
AT = "2026-07-10T12:00:01.000000Z"
APPENDS_PER_WRITER = 5

# Imports and opens the ledger, says "ready", waits for the start time sent on stdin, then
# appends until fenced or done; prints what it wrote.
APPEND_SCRIPT = r"""
import json, sys, time
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.errors import LedgerFenced
from omnigraph.ledger.ledger import Ledger
from omnigraph.ledger.records import PlaybookStep
root, directory, writer, token, count = sys.argv[1:6]
ledger = Ledger(open_store(root), directory)
print("ready", flush=True)
start = float(sys.stdin.readline())
while time.time() < start:
    time.sleep(0.001)
written, outcome = [], "done"
for i in range(int(count)):
    record = PlaybookStep(token=token, migration_id="m-1", playbook="race", step=writer, status="ok", detail=str(i))
    try:
        written.append(ledger.append(record))
    except LedgerFenced as error:
        outcome = f"{error.code}:{error.exit_code}:{error.details['seq']}"
        break
print(json.dumps({"writer": writer, "written": written, "outcome": outcome}))
"""


def _started(**overrides: object) -> MigrationStarted:
    fields: dict[str, object] = {
        "token": TOKEN,
        "migration_id": MIGRATION,
        "owner": "alice",
        "host": "host-a",
        "pid": 4242,
        "tool_version": "0.1.0",
        "graph_uri": "s3://bucket/graph",
        "at": "2026-07-10T12:00:00.000000Z",
    }
    fields.update(overrides)
    return MigrationStarted.model_validate(fields)


def _unit(unit_id: str) -> UnitPlan:
    return UnitPlan(
        unit_id=unit_id,
        graph_branch="main",
        branch_incarnation="inc-1",
        table_key="node:Person",
        table_path="nodes/Person-1",
        pinned_table_branch=None,
        pinned_table_version=3,
        image_id="img-1",
    )


def _lifecycle(store: GraphStore) -> Ledger:
    """A ledger holding a plausible migration up to its stamp, with fixed timestamps."""
    ledger = Ledger(store, DIR)
    for record in (
        _started(),
        BarrierSet(previous_format="4", token=TOKEN, migration_id=MIGRATION, at=AT),
        PlanRecorded(
            branches=[BranchPlan(graph_branch="main", incarnation="main", head_commit_id="c-1")],
            units=[_unit("u-1"), _unit("u-2")],
            token=TOKEN,
            migration_id=MIGRATION,
            at=AT,
        ),
        ImageValidated(
            image_id="img-1",
            table_path="nodes/Person-1",
            table_branch=None,
            table_version=3,
            rows=7,
            digest="d1",
            fingerprint="f1",
            null_ids=0,
            duplicate_ids=0,
            token=TOKEN,
            migration_id=MIGRATION,
            at=AT,
        ),
        UnitStep(
            unit_id="u-2",
            step="sidecar_written",
            table_branch=None,
            table_version=None,
            token=TOKEN,
            migration_id=MIGRATION,
            at=AT,
        ),
        UnitStep(
            unit_id="u-2",
            step="pk_installed",
            table_branch=None,
            table_version=4,
            detail="PK [id]",
            token=TOKEN,
            migration_id=MIGRATION,
            at=AT,
        ),
        UnitCompleted(unit_id="u-2", table_branch=None, table_version=4, digest="d1", token=TOKEN, migration_id=MIGRATION, at=AT),
        UnitStep(
            unit_id="u-1",
            step="fork_created",
            table_branch="feature",
            table_version=3,
            token=TOKEN,
            migration_id=MIGRATION,
            at=AT,
        ),
        Resumed(owner="bob", host="host-b", pid=77, token=TOKEN, migration_id=MIGRATION, at=AT),
        Verified(ok=True, problems=[], token=TOKEN, migration_id=MIGRATION, at=AT),
        StampWritten(format="5", token=TOKEN, migration_id=MIGRATION, at=AT),
    ):
        ledger.append(record)
    return ledger


def test_append_numbers_records_and_replay_folds_them(root_uri: str) -> None:
    store = open_store(root_uri)
    _lifecycle(store)
    assert store.list(DIR) == [f"{seq:08d}.json" for seq in range(1, 12)]
    raw = store.read_bytes(record_path(DIR, 2))
    assert raw == json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")).encode()

    replay = Ledger(store, DIR).replay()
    assert [seq for seq, _ in replay.records] == list(range(1, 12))
    assert [record.kind for _, record in replay.records][:3] == ["migration_started", "barrier_set", "plan_recorded"]
    state = replay.state
    assert (state.migration_id, state.token, state.owner, state.phase) == (MIGRATION, TOKEN, "bob", "stamped")
    assert (state.stamp_written, state.claim_released, state.aborted, state.last_seq) == (True, False, False, 11)
    assert state.images == {"img-1": ImageState(digest="d1", fingerprint="f1", rows=7)}
    assert [b.head_commit_id for b in state.branches] == ["c-1"]
    assert [unit.unit_id for unit in state.plan] == ["u-1", "u-2"]
    assert state.units["u-2"].model_dump() == {
        "status": "completed",
        "last_step": "pk_installed",
        "table_branch": None,
        "table_version": 4,
    }
    assert state.units["u-1"].model_dump() == {
        "status": "in_progress",
        "last_step": "fork_created",
        "table_branch": "feature",
        "table_version": 3,
    }


def test_append_refuses_records_that_do_not_belong(root_uri: str) -> None:
    store = open_store(root_uri)
    ledger = Ledger(store, DIR)
    with pytest.raises(BadRequest):
        ledger.append(Verified(token=TOKEN, migration_id=MIGRATION, ok=True, problems=[]))
    assert ledger.append(_started()) == 1
    with pytest.raises(BadRequest) as wrong_token:
        ledger.append(Verified(token="b2" * 16, migration_id=MIGRATION, ok=True, problems=[]))
    assert wrong_token.value.details["expected_token"] == TOKEN
    with pytest.raises(BadRequest):
        Ledger(store, DIR).append(Verified(token=TOKEN, migration_id="m-other", ok=True, problems=[]))
    with pytest.raises(BadRequest):
        ledger.append(_started())
    assert store.list(DIR) == ["00000001.json"]


def test_a_writer_that_loses_a_sequence_number_stays_fenced(root_uri: str) -> None:
    store = open_store(root_uri)
    stale = Ledger(store, DIR)
    stale.append(_started())
    Ledger(store, DIR).append(BarrierSet(token=TOKEN, migration_id=MIGRATION, previous_format="4"))
    verified = Verified(token=TOKEN, migration_id=MIGRATION, ok=True, problems=[])
    for _ in range(2):
        with pytest.raises(LedgerFenced) as fenced:
            stale.append(verified)
        assert fenced.value.details == {"path": record_path(DIR, 2), "seq": 2}
        assert fenced.value.code == "ledger_fenced" and fenced.value.exit_code == 3
    assert [record.kind for _, record in Ledger(store, DIR).replay().records] == ["migration_started", "barrier_set"]


def test_eight_concurrent_appenders_leave_a_gap_free_ledger(root_uri: str) -> None:
    store = open_store(root_uri)
    Ledger(store, DIR).append(_started())
    outcomes = release_together(
        [spawn([sys.executable, "-c", APPEND_SCRIPT, root_uri, DIR, f"w{i}", TOKEN, str(APPENDS_PER_WRITER)]) for i in range(8)], timeout=60
    )
    assert all(o.returncode == 0 for o in outcomes), [o.stderr for o in outcomes]
    results = [o.json() for o in outcomes]

    written = sorted(seq for result in results for seq in result["written"])
    assert written == list(range(2, 2 + len(written)))
    done = [result for result in results if result["outcome"] == "done"]
    losers = [result for result in results if result["outcome"] != "done"]
    assert len(losers) >= 1
    assert all(len(result["written"]) == APPENDS_PER_WRITER for result in done)
    for result in losers:
        code, exit_code, seq = result["outcome"].split(":")
        assert (code, exit_code) == ("ledger_fenced", "3")
        assert int(seq) in written and int(seq) not in result["written"]
    top = max(written)
    assert any(top in result["written"] for result in done)

    replay = Ledger(store, DIR).replay()
    assert [seq for seq, _ in replay.records] == [1, *written]
    by_writer = {result["writer"]: result["written"] for result in results}
    for seq, record in replay.records[1:]:
        assert isinstance(record, PlaybookStep) and seq in by_writer[record.step]
        assert record.detail == str(by_writer[record.step].index(seq))


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[: len(raw) // 2],
        lambda raw: raw.replace(b'"previous_format":"4"', b'"previous_format":4'),
    ],
    ids=["truncated-json", "wrong-field-type"],
)
def test_a_corrupt_record_fails_replay_loudly_and_stays(root_uri: str, damage) -> None:
    store = open_store(root_uri)
    _lifecycle(store)
    path = record_path(DIR, 2)
    original = store.read_bytes(path)
    corrupt = damage(original)
    assert corrupt != original
    store.delete(path)
    assert store.put_if_absent(path, corrupt)
    with pytest.raises(LedgerCorrupt) as failure:
        Ledger(store, DIR).replay()
    assert failure.value.code == "ledger_corrupt"
    assert failure.value.details["path"] == path and path in failure.value.message
    assert store.read_bytes(path) == corrupt
    assert len(store.list(DIR)) == 11


def test_a_missing_sequence_number_is_refused(root_uri: str) -> None:
    store = open_store(root_uri)
    _lifecycle(store)
    store.delete(record_path(DIR, 5))
    for attempt in (
        lambda: Ledger(store, DIR).replay(),
        lambda: Ledger(store, DIR).append(Verified(token=TOKEN, migration_id=MIGRATION, ok=True, problems=[])),
    ):
        with pytest.raises(LedgerCorrupt) as gap:
            attempt()
        assert gap.value.details["path"] == record_path(DIR, 5) and gap.value.details["missing_seq"] == 5
    assert len(store.list(DIR)) == 10


def test_a_foreign_file_is_refused(root_uri: str) -> None:
    store = open_store(root_uri)
    _lifecycle(store)
    store.write_bytes(f"{DIR}/notes.txt", b"hello")
    with pytest.raises(LedgerCorrupt) as foreign:
        Ledger(store, DIR).replay()
    assert foreign.value.details["path"] == f"{DIR}/notes.txt"


def test_an_inconsistent_record_is_refused_by_the_fold(root_uri: str) -> None:
    store = open_store(root_uri)
    ledger = Ledger(store, DIR)
    ledger.append(_started())
    ledger.append(UnitStep(token=TOKEN, migration_id=MIGRATION, unit_id="u-9", step="pk_present", table_branch=None, table_version=2))
    with pytest.raises(LedgerCorrupt) as unplanned:
        ledger.replay()
    assert unplanned.value.details["path"] == record_path(DIR, 2) and "u-9" in unplanned.value.message


def test_replay_of_an_absent_ledger_is_not_found(root_uri: str) -> None:
    with pytest.raises(NotFound):
        Ledger(open_store(root_uri), DIR).replay()


def test_rendering_is_deterministic_and_json_parses(root_uri: str) -> None:
    store = open_store(root_uri)
    _lifecycle(store)
    first, second = Ledger(store, DIR).replay(), Ledger(store, DIR).replay()
    assert render_table(first) == render_table(second)
    table = render_table(first).splitlines()
    assert table[0].split() == ["seq", "at", "kind", "summary"]
    assert table[2].split()[:3] == ["2", "2026-07-10T12:00:01.000000Z", "barrier_set"]
    assert "format=migrating previous_format=4" in table[2]
    assert table[-1] == "migration m-1: phase stamped, owner bob, units 1/2 completed, last seq 11"

    text = json.dumps(render_json(first))
    assert text == json.dumps(render_json(second))
    document = json.loads(text)
    assert [record["seq"] for record in document["records"]] == list(range(1, 12))
    assert document["records"][0]["kind"] == "migration_started"
    assert list(document["state"]) == sorted(document["state"])
    assert list(document["state"]["units"]) == ["u-1", "u-2"]


def test_committed_schema_matches_the_models() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), (
        "ledger/record-schema.json is stale: run `python -m omnigraph.ledger schema > ledger/record-schema.json`"
    )
    schema = json.loads(schema_text())
    assert sorted(schema["discriminator"]["mapping"]) == sorted(
        [
            "aborted",
            "answers_checked",
            "answers_recorded",
            "barrier_lowered",
            "barrier_set",
            "claim_broken",
            "claim_released",
            "drift_detected",
            "image_validated",
            "migration_started",
            "plan_recorded",
            "playbook_step",
            "prepared",
            "repair_applied",
            "resumed",
            "stamp_written",
            "unit_completed",
            "unit_step",
            "units_started",
            "validation_failed",
            "verified",
        ]
    )


def test_schema_command_prints_the_committed_schema() -> None:
    printed = subprocess.run([sys.executable, "-m", "omnigraph.ledger", "schema"], capture_output=True, text=True, check=True)
    assert printed.stdout == SCHEMA_FILE.read_text(encoding="utf-8")


def _plan(*unit_ids: str) -> PlanRecorded:
    return PlanRecorded(
        branches=[BranchPlan(graph_branch="main", incarnation="main", head_commit_id="c-1")],
        units=[_unit(u) for u in unit_ids],
        token=TOKEN,
        migration_id=MIGRATION,
        at=AT,
    )


def test_a_replan_replaces_the_plan_only_before_any_unit_progressed(root_uri: str) -> None:
    store = open_store(root_uri)
    ledger = Ledger(store, DIR)
    ledger.append(_started())
    ledger.append(_plan("u-1"))
    ledger.append(_plan("u-1", "u-2"))
    assert sorted(ledger.replay().state.units) == ["u-1", "u-2"]
    ledger.append(
        UnitStep(unit_id="u-1", step="sidecar_written", table_branch=None, table_version=None, token=TOKEN, migration_id=MIGRATION, at=AT)
    )
    seq = ledger.append(_plan("u-3"))
    with pytest.raises(LedgerCorrupt) as refused:
        Ledger(store, DIR).replay()
    assert record_path(DIR, seq) in refused.value.message
