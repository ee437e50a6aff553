"""Reconciliation: what a read-write open does with interrupted and out-of-band commits.

:mod:`~engine.reconcile.intents` are the write intents under ``__recovery/`` (armed before a
commit's first effect, deleted after its publish), :mod:`~engine.reconcile.recovery` resolves the
intents of dead writers, :mod:`~engine.reconcile.drift` finds, classifies, adopts or reverts
table commits made outside the engine, :mod:`~engine.reconcile.pins` decides what a write does
about a table past its pin (wait, resolve, settle, refresh) and
:mod:`~engine.reconcile.branch_guard` is the per-branch guard that branch create, delete and
recovery hold.
"""

from engine.reconcile import branch_guard, drift, intents, pins, recovery
from engine.reconcile.branch_guard import abandoned
from engine.reconcile.intents import (
    RECOVERY_LOG_DIR,
    IntentTable,
    RecoveryRecord,
    WriteIntent,
    arm,
    intent_path,
    list_intents,
    owner_is_alive,
)
from engine.reconcile.pins import PinVerdict
from engine.storage.process import process_start_marker, this_host  # what writers record in their intents

__all__ = [
    "RECOVERY_LOG_DIR",
    "IntentTable",
    "PinVerdict",
    "RecoveryRecord",
    "WriteIntent",
    "abandoned",
    "arm",
    "branch_guard",
    "drift",
    "intent_path",
    "intents",
    "list_intents",
    "owner_is_alive",
    "pins",
    "process_start_marker",
    "recovery",
    "this_host",
]
