"""Reconciliation: what a read-write open does with interrupted and out-of-band commits.

:mod:`~omnigraph.engine.reconcile.intents` are the write intents under ``__recovery/`` (armed before a
commit's first effect, deleted after its publish), :mod:`~omnigraph.engine.reconcile.recovery` resolves the
intents of dead writers, :mod:`~omnigraph.engine.reconcile.drift` finds, classifies, adopts or reverts
table commits made outside the engine, :mod:`~omnigraph.engine.reconcile.pins` decides what a write does
about a table past its pin (wait, resolve, settle, refresh) and
:mod:`~omnigraph.engine.reconcile.branch_guard` is the per-branch guard that branch create, delete and
recovery hold.

The names below (and the submodules) are imported on first access (a module-level
``__getattr__``): reading the write intents does not load drift adoption or recovery.
"""

from __future__ import annotations

from omnigraph.engine.lazy_exports import lazy_exports

_LAZY = {
    "RECOVERY_LOG_DIR": "omnigraph.engine.reconcile.intents",
    "IntentTable": "omnigraph.engine.reconcile.intents",
    "PinVerdict": "omnigraph.engine.reconcile.pins",
    "RecoveryRecord": "omnigraph.engine.reconcile.intents",
    "WriteIntent": "omnigraph.engine.reconcile.intents",
    "abandoned": "omnigraph.engine.reconcile.branch_guard",
    "arm": "omnigraph.engine.reconcile.intents",
    "intent_path": "omnigraph.engine.reconcile.intents",
    "list_intents": "omnigraph.engine.reconcile.intents",
    "owner_is_alive": "omnigraph.engine.reconcile.intents",
    "process_start_marker": "omnigraph.engine.storage.process",  # what writers record in their intents
    "this_host": "omnigraph.engine.storage.process",
}
"""Each exported name and the module that defines it."""
_SUBMODULES = ("branch_guard", "drift", "intents", "pins", "recovery")

__all__ = sorted([*_LAZY, *_SUBMODULES])


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, _SUBMODULES)
