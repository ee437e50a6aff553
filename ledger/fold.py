"""Fold a replayed ledger into the migration's current state.

Contract of :func:`fold` (every violation is a :class:`~omnigraph.ledger.errors.LedgerCorrupt` naming the
offending record's path):

- the first record is ``migration_started`` and no later record is;
- every record carries the first record's ``token`` and ``migration_id``;
- ``plan_recorded`` lists distinct unit ids; a later ``plan_recorded`` (a re-plan after a
  duplicate repair) replaces the plan only while no unit has progressed;
- ``unit_step`` / ``unit_completed`` name a planned unit that is not completed yet;
- ``answers_recorded`` appears at most once, after a plan and before any unit progressed (the
  answer check's baseline is taken before the first PK effect).

``phase`` is the phase of the last lifecycle record (see :data:`PHASE_OF_KIND`); the other kinds
(``drift_detected``, ``resumed``, ``claim_broken``, ``playbook_step``, ``repair_applied``,
``answers_recorded``, ``answers_checked``) leave it unchanged. ``owner`` is the owner of
``migration_started`` or of the last ``resumed``. A unit starts ``planned`` at its pinned location;
a ``unit_step`` makes it ``in_progress`` and, when it reports a ``table_version``, moves it to
``(table_branch, table_version)``; ``unit_completed`` makes it ``completed`` at the location it
reports. ``images`` maps image id to the digest, fingerprint and row count of its last
``image_validated`` record. ``answers`` are the digests of ``answers_recorded`` (empty without one)
and ``answers_sha256`` its ``queries_sha256``. ``outage_seconds`` is how long the barrier was up:
from each ``barrier_set`` to the ``barrier_lowered`` or ``claim_released`` after it (a barrier
still up counts to the last record), None if no barrier was set.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_serializer

from omnigraph.ledger.errors import LedgerCorrupt
from omnigraph.ledger.layout import record_path
from omnigraph.ledger.records import (
    Aborted,
    AnswerDigest,
    AnswersRecorded,
    BarrierLowered,
    BarrierSet,
    BranchPlan,
    ClaimReleased,
    ImageValidated,
    MigrationStarted,
    PlanRecorded,
    Record,
    Resumed,
    StampWritten,
    UnitCompleted,
    UnitPlan,
    UnitStep,
)

Phase = Literal[
    "started",
    "barrier",
    "planned",
    "validating",
    "validation_failed",
    "prepared",
    "installing",
    "verified",
    "stamped",
    "released",
    "aborted",
]

PHASE_OF_KIND: dict[str, Phase] = {
    "migration_started": "started",
    "barrier_set": "barrier",
    "plan_recorded": "planned",
    "image_validated": "validating",
    "validation_failed": "validation_failed",
    "prepared": "prepared",
    "barrier_lowered": "prepared",
    "unit_step": "installing",
    "units_started": "installing",
    "unit_completed": "installing",
    "verified": "verified",
    "stamp_written": "stamped",
    "claim_released": "released",
    "aborted": "aborted",
}


class UnitState(BaseModel):
    """Where one unit stands: its status, last achieved step and current table location."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["planned", "in_progress", "completed"]
    last_step: str | None
    table_branch: str | None
    table_version: int | None


class ImageState(BaseModel):
    """A validated image: logical digest, physical fingerprint and row count."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    digest: str
    fingerprint: str
    rows: int


class FoldedState(BaseModel):
    """The migration as its ledger tells it; ``units`` and ``images`` serialize sorted by key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    migration_id: str
    token: str
    owner: str
    phase: Phase
    units: dict[str, UnitState]
    plan: list[UnitPlan]
    branches: list[BranchPlan]
    images: dict[str, ImageState]
    answers: list[AnswerDigest]
    answers_sha256: str | None
    stamp_written: bool
    claim_released: bool
    aborted: bool
    outage_seconds: float | None
    last_seq: int

    @field_serializer("units", "images")
    def _sorted_by_key(self, value: dict[str, object]) -> dict[str, object]:
        return dict(sorted(value.items()))


def fold(records: list[tuple[int, Record]], directory: str) -> FoldedState:
    """Fold ``records`` (non-empty, ordered by seq) of the ledger at ``directory``."""
    first_seq, first = records[0]
    if not isinstance(first, MigrationStarted):
        raise LedgerCorrupt(record_path(directory, first_seq), f"the first record is {first.kind}, not migration_started")
    owner = first.owner
    phase: Phase = "started"
    plan: list[UnitPlan] | None = None
    branches: list[BranchPlan] = []
    units: dict[str, UnitState] = {}
    images: dict[str, ImageState] = {}
    answers: AnswersRecorded | None = None
    stamp_written = claim_released = aborted = False
    outage = _Outage()
    for seq, record in records[1:]:
        outage.see(record)
        path = record_path(directory, seq)
        _check_identity(path, first, record)
        phase = PHASE_OF_KIND.get(record.kind, phase)
        if isinstance(record, PlanRecorded):
            if any(unit.status != "planned" for unit in units.values()):
                raise LedgerCorrupt(path, "plan_recorded after units progressed; a plan is replaced only before that")
            plan = list(record.units)
            branches = list(record.branches)
            units = _planned_units(path, plan)
        elif isinstance(record, (UnitStep, UnitCompleted)):
            units[record.unit_id] = _advance(path, units.get(record.unit_id), record)
        elif isinstance(record, ImageValidated):
            images[record.image_id] = ImageState(digest=record.digest, fingerprint=record.fingerprint, rows=record.rows)
        elif isinstance(record, AnswersRecorded):
            _check_answers_baseline(path, plan, units, answers)
            answers = record
        elif isinstance(record, Resumed):
            owner = record.owner
        elif isinstance(record, StampWritten):
            stamp_written = True
        elif isinstance(record, ClaimReleased):
            claim_released = True
        elif isinstance(record, Aborted):
            aborted = True
    return FoldedState(
        migration_id=first.migration_id,
        token=first.token,
        owner=owner,
        phase=phase,
        units=units,
        plan=plan or [],
        branches=branches,
        images=images,
        answers=list(answers.answers) if answers else [],
        answers_sha256=answers.queries_sha256 if answers else None,
        stamp_written=stamp_written,
        claim_released=claim_released,
        aborted=aborted,
        outage_seconds=outage.seconds(),
        last_seq=records[-1][0],
    )


class _Outage:
    """The barrier's periods, as the records of a ledger go by."""

    def __init__(self) -> None:
        self.total = 0.0
        self.raised: datetime | None = None
        self.last: datetime | None = None
        self.seen = False

    def see(self, record: Record) -> None:
        at = datetime.fromisoformat(record.at.replace("Z", "+00:00"))
        self.last = at
        if isinstance(record, BarrierSet) and self.raised is None:
            self.raised, self.seen = at, True
        elif isinstance(record, (BarrierLowered, ClaimReleased)) and self.raised is not None:
            self.total += (at - self.raised).total_seconds()
            self.raised = None

    def seconds(self) -> float | None:
        if not self.seen:
            return None
        open_period = (self.last - self.raised).total_seconds() if self.raised is not None and self.last is not None else 0.0
        return round(self.total + open_period, 3)


def _check_identity(path: str, first: MigrationStarted, record: Record) -> None:
    if isinstance(record, MigrationStarted):
        raise LedgerCorrupt(path, "migration_started after the first record")
    if record.token != first.token:
        raise LedgerCorrupt(
            path,
            "its token is not the token of migration_started",
            expected_token=first.token,
            actual_token=record.token,
        )
    if record.migration_id != first.migration_id:
        raise LedgerCorrupt(
            path,
            "its migration_id is not the one of migration_started",
            expected_migration_id=first.migration_id,
            actual_migration_id=record.migration_id,
        )


def _check_answers_baseline(path: str, plan: list[UnitPlan] | None, units: dict[str, UnitState], earlier: AnswersRecorded | None) -> None:
    if earlier is not None:
        raise LedgerCorrupt(path, "answers_recorded twice; the answer check has one baseline")
    if plan is None:
        raise LedgerCorrupt(path, "answers_recorded before plan_recorded")
    if any(unit.status != "planned" for unit in units.values()):
        raise LedgerCorrupt(path, "answers_recorded after units progressed; the baseline is taken before any PK effect")


def _planned_units(path: str, plan: list[UnitPlan]) -> dict[str, UnitState]:
    units: dict[str, UnitState] = {}
    for unit in plan:
        if unit.unit_id in units:
            raise LedgerCorrupt(path, f"unit {unit.unit_id!r} is planned twice")
        units[unit.unit_id] = UnitState(
            status="planned",
            last_step=None,
            table_branch=unit.pinned_table_branch,
            table_version=unit.pinned_table_version,
        )
    return units


def _advance(path: str, unit: UnitState | None, record: UnitStep | UnitCompleted) -> UnitState:
    if unit is None:
        raise LedgerCorrupt(path, f"unit {record.unit_id!r} is not in the recorded plan")
    if unit.status == "completed":
        raise LedgerCorrupt(path, f"unit {record.unit_id!r} is already completed")
    if isinstance(record, UnitCompleted):
        return unit.model_copy(update={"status": "completed", "table_branch": record.table_branch, "table_version": record.table_version})
    update: dict[str, object] = {"status": "in_progress", "last_step": record.step}
    if record.table_version is not None:
        update.update(table_branch=record.table_branch, table_version=record.table_version)
    return unit.model_copy(update=update)
