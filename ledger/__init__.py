"""The migration ledger: append-only, sequence-numbered, create-if-absent records.

Layout: ``__migration/<migration-id>/ledger/<seq:08d>.json`` under the graph root (the caller
passes the directory). See :mod:`ledger.ledger` for the write/read contracts,
:mod:`ledger.records` for the record kinds and :mod:`ledger.fold` for the folded state.
"""

from ledger.errors import LedgerCorrupt, LedgerFenced
from ledger.fold import PHASE_OF_KIND, FoldedState, ImageState, Phase, UnitState, fold
from ledger.layout import record_path
from ledger.ledger import Ledger, LedgerReplay
from ledger.records import (
    RECORD_ADAPTER,
    RECORD_TYPES,
    Aborted,
    BarrierSet,
    BranchPlan,
    ClaimBroken,
    ClaimReleased,
    DriftDetected,
    DriftItem,
    ImageValidated,
    InventoryEntry,
    LedgerRecord,
    MigrationStarted,
    PlanRecorded,
    PlaybookStep,
    Record,
    RepairApplied,
    RepairDecision,
    Resumed,
    StampWritten,
    UnitCompleted,
    UnitPlan,
    UnitStep,
    UnitStepName,
    ValidationFailedRecord,
    Verified,
    parse_record,
)
from ledger.render import render_json, render_table, summarize
from ledger.schema import SCHEMA_FILE, record_json_schema, schema_text

__all__ = [
    "PHASE_OF_KIND",
    "RECORD_ADAPTER",
    "RECORD_TYPES",
    "SCHEMA_FILE",
    "Aborted",
    "BarrierSet",
    "BranchPlan",
    "ClaimBroken",
    "ClaimReleased",
    "DriftDetected",
    "DriftItem",
    "FoldedState",
    "ImageState",
    "ImageValidated",
    "InventoryEntry",
    "Ledger",
    "LedgerCorrupt",
    "LedgerFenced",
    "LedgerRecord",
    "LedgerReplay",
    "MigrationStarted",
    "Phase",
    "PlanRecorded",
    "PlaybookStep",
    "Record",
    "RepairApplied",
    "RepairDecision",
    "Resumed",
    "StampWritten",
    "UnitCompleted",
    "UnitPlan",
    "UnitState",
    "UnitStep",
    "UnitStepName",
    "ValidationFailedRecord",
    "Verified",
    "fold",
    "parse_record",
    "record_json_schema",
    "record_path",
    "render_json",
    "render_table",
    "schema_text",
    "summarize",
]
