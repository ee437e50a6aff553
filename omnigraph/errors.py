"""The errors of the Python API: the one ``OmnigraphError`` family the CLIs and the server report.

Every error raised on purpose is an :class:`OmnigraphError` with a stable ``code`` (the same
string the CLI prints as ``error [code]`` and the server sends as ``error.code``), an
``http_status``, an ``exit_code`` (what the console scripts exit with) and a JSON-serialisable
``details`` mapping. Catch the class, never match on the message::

    try:
        graph.load(records, mode="append")
    except omnigraph.errors.KeyConflict as conflict:
        print(conflict.details["entity_id"])

The classes of the migrator, the claims and the ledger (``DriftDetected``, ``FleetActive``,
``LedgerFenced``, ...) are here too; the ones whose modules are heavier to import are loaded on
first access. ``docs/errors.md`` lists every code with its status, exit code and fix.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from omnigraph.engine.errors import (
    EXIT_CLAIM_HELD,
    EXIT_ERROR,
    EXIT_FORMAT_REFUSED,
    EXIT_OK,
    EXIT_RECOVERY_REQUIRED,
    EXIT_USAGE,
    EXIT_VALIDATION_FAILED,
    BadRequest,
    BranchExists,
    ClaimHeld,
    Conflict,
    FormatBarrier,
    FormatRefused,
    Internal,
    KeyConflict,
    MergeConflict,
    NotFound,
    OmnigraphError,
    PreconditionFailed,
    QueryCancelled,
    QueryTimeout,
    ReadOnlyGraph,
    ReadSetConflict,
    RecoveryRequired,
    ResourceLimit,
    StorageAccessDenied,
    StorageUnavailable,
    TableDrift,
    ValidationFailed,
    exit_code_for,
)
from omnigraph.migrator.errors import AnswersChanged, CutoverDeferred, DriftDetected, ExecutorFailed, MigrationRefused

if TYPE_CHECKING:
    from omnigraph.claims.errors import ClaimCorrupt
    from omnigraph.ledger.errors import LedgerCorrupt, LedgerFenced
    from omnigraph.migrator.inspection import FleetActive
    from omnigraph.playbooks.actions import AnswerUnavailable, StepFailed

_LAZY = {
    "AnswerUnavailable": "omnigraph.playbooks.actions",
    "ClaimCorrupt": "omnigraph.claims.errors",
    "FleetActive": "omnigraph.migrator.inspection",
    "LedgerCorrupt": "omnigraph.ledger.errors",
    "LedgerFenced": "omnigraph.ledger.errors",
    "StepFailed": "omnigraph.playbooks.actions",
}

__all__ = [
    "EXIT_CLAIM_HELD",
    "EXIT_ERROR",
    "EXIT_FORMAT_REFUSED",
    "EXIT_OK",
    "EXIT_RECOVERY_REQUIRED",
    "EXIT_USAGE",
    "EXIT_VALIDATION_FAILED",
    "AnswerUnavailable",
    "AnswersChanged",
    "BadRequest",
    "BranchExists",
    "ClaimCorrupt",
    "ClaimHeld",
    "Conflict",
    "CutoverDeferred",
    "DriftDetected",
    "ExecutorFailed",
    "FleetActive",
    "FormatBarrier",
    "FormatRefused",
    "Internal",
    "KeyConflict",
    "LedgerCorrupt",
    "LedgerFenced",
    "MergeConflict",
    "MigrationRefused",
    "NotFound",
    "OmnigraphError",
    "PreconditionFailed",
    "QueryCancelled",
    "QueryTimeout",
    "ReadOnlyGraph",
    "ReadSetConflict",
    "RecoveryRequired",
    "ResourceLimit",
    "StepFailed",
    "StorageAccessDenied",
    "StorageUnavailable",
    "TableDrift",
    "ValidationFailed",
    "exit_code_for",
]


def __getattr__(name: str) -> Any:
    """The error classes of :data:`_LAZY`, imported on first access."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
