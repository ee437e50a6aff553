"""Every kind of migration ledger record, as one pydantic discriminated union.

A record is stored as canonical JSON at ``<ledger dir>/<seq:08d>.json``; its sequence number is
its file name, never a field. Every record carries ``kind`` (the discriminator), ``token`` (the
migration claim's token), ``at`` (ISO-8601 UTC, ``Z``) and ``migration_id``. Models are frozen,
forbid unknown fields and validate strictly (``"7"`` is not an int), so a stored record either
parses exactly or is refused. Lists are stored in the order the writer gives them: writers sort
them (deterministic output is the writer's contract, not this module's).
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    TypeAdapter,
    model_validator,
)

from omnigraph.claims.fields import ClaimToken, UtcTimestamp, utc_timestamp

Text = Annotated[str, Field(min_length=1)]
UnitStepName = Literal["sidecar_written", "fork_created", "fork_adopted", "pk_installed", "pk_present", "published", "digest_checked"]


# A model's docstring is its ``description`` in the committed ``ledger/record-schema.json``: it
# changes only together with that file (``python -m omnigraph.ledger schema``). Hence the ``noqa`` on the
# record kinds their fields document and on the summaries that span two lines.


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class UnitPlan(_Strict):
    """One migration unit: a live keyed table as one graph branch pins it."""

    unit_id: Text
    graph_branch: Text
    branch_incarnation: Text
    table_key: Text
    table_path: Text
    pinned_table_branch: str | None
    pinned_table_version: NonNegativeInt
    image_id: Text


class BranchPlan(_Strict):
    """A live graph branch as the plan saw it; a different head or incarnation later is drift."""

    graph_branch: Text
    incarnation: Text
    head_commit_id: Text


class InventoryEntry(_Strict):
    """One duplicate or null ``id`` found while validating a pinned table image."""

    entity_kind: Literal["node", "edge"]
    type_name: Text
    entity_id: str | None
    problem: Literal["duplicate", "null"]
    graph_branches: list[str]
    table_path: Text
    table_branch: str | None
    table_version: NonNegativeInt
    rows: NonNegativeInt


class DriftItem(_Strict):
    """Something that moved under the barrier: what, the expected value, the value found."""

    what: Text
    expected: str
    actual: str


class RepairDecision(_Strict):
    """What a duplicate repair did with one id: keep it, rename it to ``new_id``, or delete it.

    ``entity_id`` is None for rows whose id was null.
    """

    entity_id: str | None
    action: Literal["keep", "rename", "delete"]
    new_id: str | None
    rows: NonNegativeInt

    @model_validator(mode="after")
    def _new_id_only_for_rename(self) -> RepairDecision:
        if (self.action == "rename") != (self.new_id is not None):
            raise ValueError("new_id is required for action 'rename' and forbidden otherwise")
        return self


class AnswerCheck(_Strict):
    """The answer check a migration was asked for: the ``.gq`` source, the params by query name
    (canonical JSON) and the sha256 that identifies the two together.
    """  # noqa: D205

    source: Text
    params: Text
    queries_sha256: Text


class AnswerDigest(_Strict):
    """The answer of one read query, with one params object, on one live graph branch.

    ``params`` is the canonical JSON of the params object; ``commit`` is the branch head read;
    ``digest`` is the sha256 over the answer's rows in its order (each
    row's canonical JSON and a newline). ``answer`` holds those row texts when they total at most
    64 KiB (None above that, when only the digest is kept).
    """

    query: Text
    params: Text
    graph_branch: Text
    commit: Text
    rows: NonNegativeInt
    digest: Text
    answer: list[str] | None


class AnswerChange(_Strict):
    """A recorded answer that differs now: the first differing row (0-based) and both versions
    of it (None for a row one side does not have, or when the recorded rows were not kept).
    """  # noqa: D205

    query: Text
    params: Text
    graph_branch: Text
    expected_digest: Text
    actual_digest: Text
    expected_rows: NonNegativeInt
    actual_rows: NonNegativeInt
    first_row: NonNegativeInt | None
    expected_row: str | None
    actual_row: str | None


class LedgerRecord(_Strict):
    """Fields every record carries; ``at`` defaults to now."""

    kind: str
    token: ClaimToken
    at: UtcTimestamp = Field(default_factory=utc_timestamp)
    migration_id: Text


class MigrationStarted(LedgerRecord):
    """First record of every ledger: who runs the migration of which graph, and the answer check
    it was asked for (None without one), so a resume after any crash still takes it.
    """  # noqa: D205

    kind: Literal["migration_started"] = "migration_started"
    owner: Text
    host: Text
    pid: PositiveInt
    tool_version: Text
    graph_uri: Text
    answer_check: AnswerCheck | None = None


class BarrierSet(LedgerRecord):  # noqa: D101
    kind: Literal["barrier_set"] = "barrier_set"
    previous_format: Text
    format: Literal["migrating"] = "migrating"


class PlanRecorded(LedgerRecord):  # noqa: D101
    kind: Literal["plan_recorded"] = "plan_recorded"
    branches: list[BranchPlan]
    units: list[UnitPlan]


class ImageValidated(LedgerRecord):
    """One pinned image validated: its receipt. ``hash_sum``/``hash_xor`` let a later image of the
    same table be validated from this one by reading only the rows changed since (``delta_from``
    names the receipt such a record was derived from, ``changed_rows`` the rows it read).
    """  # noqa: D205

    kind: Literal["image_validated"] = "image_validated"
    image_id: Text
    table_path: Text
    table_branch: str | None
    table_version: NonNegativeInt
    rows: NonNegativeInt
    digest: Text
    fingerprint: Text
    null_ids: NonNegativeInt
    duplicate_ids: NonNegativeInt
    hash_sum: NonNegativeInt | None = None
    hash_xor: NonNegativeInt | None = None
    delta_from: str | None = None
    changed_rows: NonNegativeInt | None = None


class ValidationFailedRecord(LedgerRecord):  # noqa: D101
    kind: Literal["validation_failed"] = "validation_failed"
    inventory: list[InventoryEntry]


class Prepared(LedgerRecord):
    """One online round of ``prepare`` ended: every pinned image has a clean receipt, and what a
    cutover would do now (units, rows changed since the receipts, estimated seconds).
    """  # noqa: D205

    kind: Literal["prepared"] = "prepared"
    images: NonNegativeInt
    validated: NonNegativeInt
    units: NonNegativeInt
    changed_rows: NonNegativeInt
    estimated_cutover_seconds: NonNegativeFloat


class BarrierLowered(LedgerRecord):
    """A cutover put stamp ``4`` back before any unit progressed, for ``reason``; the online claim
    stays, so the receipts are kept and ``cutover`` may be run again.
    """  # noqa: D205

    kind: Literal["barrier_lowered"] = "barrier_lowered"
    reason: str


class UnitStep(LedgerRecord):
    """One achieved step of a unit; ``table_version`` None when the step moved no table.

    Written by earlier releases between a unit's sidecar and its ``unit_completed``; read (and
    folded) so that a migration they started can be resumed. This release records a unit's
    achieved steps in its ``unit_completed`` alone.
    """

    kind: Literal["unit_step"] = "unit_step"
    unit_id: Text
    step: UnitStepName
    table_branch: str | None
    table_version: NonNegativeInt | None
    detail: str = ""


class UnitsStarted(LedgerRecord):
    """The units are about to run (phase ``installing``): written once, before the first unit's
    sidecar. A unit's own progress is its sidecar, then its ``unit_completed``.
    """  # noqa: D205

    kind: Literal["units_started"] = "units_started"


class UnitCompleted(LedgerRecord):
    """A unit done: its PK is on ``(table_branch, table_version)``, published, rows unchanged.

    The other fields say how each step was achieved (None in records of earlier releases,
    which recorded them as ``unit_step`` records): ``fork`` ``created`` or ``adopted`` (None for
    an owned image) with the fork's Lance ``fork_identifier``; ``pk`` ``installed`` or
    ``present``; ``manifest_version`` of the publish (None if an earlier attempt published);
    ``rows_check`` ``same data files`` or ``ids re-read``.
    """

    kind: Literal["unit_completed"] = "unit_completed"
    unit_id: Text
    table_branch: str | None
    table_version: NonNegativeInt
    digest: Text
    fork: Literal["created", "adopted"] | None = None
    fork_identifier: str | None = None
    pk: Literal["installed", "present"] | None = None
    manifest_version: NonNegativeInt | None = None
    rows_check: Literal["same data files", "ids re-read"] | None = None


class AnswersRecorded(LedgerRecord):
    """The answer check's baseline, complete under the barrier before the first PK effect: the
    ``.gq`` source, the params by query name (canonical JSON) and every answer's digest.
    ``requeried`` names the branches queried under the barrier; the others' answers were taken
    just before it and their heads have not moved since (None: every branch was queried under it).
    """  # noqa: D205

    kind: Literal["answers_recorded"] = "answers_recorded"
    source: Text
    params: Text
    queries_sha256: Text
    answers: list[AnswerDigest]
    requeried: list[str] | None = None


class AnswersChecked(LedgerRecord):
    """The answers taken again after verification and before the stamp; ``changed`` is empty
    when ``ok``.
    """  # noqa: D205

    kind: Literal["answers_checked"] = "answers_checked"
    ok: bool
    changed: list[AnswerChange]


class DriftDetected(LedgerRecord):  # noqa: D101
    kind: Literal["drift_detected"] = "drift_detected"
    moved: list[DriftItem]


class Verified(LedgerRecord):  # noqa: D101
    kind: Literal["verified"] = "verified"
    ok: bool
    problems: list[str]


class StampWritten(LedgerRecord):  # noqa: D101
    kind: Literal["stamp_written"] = "stamp_written"
    format: Text


class ClaimReleased(LedgerRecord):  # noqa: D101
    kind: Literal["claim_released"] = "claim_released"


class Aborted(LedgerRecord):  # noqa: D101
    kind: Literal["aborted"] = "aborted"
    stamp_restored: Text
    reason: str


class Resumed(LedgerRecord):  # noqa: D101
    kind: Literal["resumed"] = "resumed"
    owner: Text
    host: Text
    pid: PositiveInt


class ClaimBroken(LedgerRecord):  # noqa: D101
    kind: Literal["claim_broken"] = "claim_broken"
    breaker: Text
    reason: Text


class PlaybookStep(LedgerRecord):  # noqa: D101
    kind: Literal["playbook_step"] = "playbook_step"
    playbook: Text
    step: Text
    status: Literal["ok", "failed", "skipped"]
    detail: str


class RepairApplied(LedgerRecord):  # noqa: D101
    kind: Literal["repair_applied"] = "repair_applied"
    graph_branch: Text
    table_key: Text
    decisions: list[RepairDecision]
    commit_id: Text


Record = Annotated[
    MigrationStarted
    | BarrierSet
    | PlanRecorded
    | ImageValidated
    | ValidationFailedRecord
    | Prepared
    | BarrierLowered
    | UnitStep
    | UnitsStarted
    | UnitCompleted
    | AnswersRecorded
    | AnswersChecked
    | DriftDetected
    | Verified
    | StampWritten
    | ClaimReleased
    | Aborted
    | Resumed
    | ClaimBroken
    | PlaybookStep
    | RepairApplied,
    Field(discriminator="kind"),
]

RECORD_ADAPTER: TypeAdapter[Record] = TypeAdapter(Record)
RECORD_TYPES: tuple[type[LedgerRecord], ...] = get_args(get_args(Record)[0])


def parse_record(data: bytes) -> Record:
    """Parse one stored record; ``pydantic.ValidationError`` if it is not JSON or not a record."""
    return RECORD_ADAPTER.validate_json(data)
