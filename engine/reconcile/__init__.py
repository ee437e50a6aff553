"""Reconciliation: what a read-write open does with interrupted and out-of-band commits.

:mod:`~omnigraph.engine.reconcile.recovery` are the write intents under ``__recovery/`` (armed before a
commit's first effect, deleted after its publish), :mod:`~omnigraph.engine.reconcile.recovery` resolves the
intents of dead writers, :mod:`~omnigraph.engine.reconcile.drift` finds, classifies, adopts or reverts
table commits made outside the engine, :mod:`~omnigraph.engine.reconcile.pins` decides what a write does
about a table past its pin (wait, resolve, settle, refresh) and
:mod:`~omnigraph.engine.reconcile.branch_guard` is the per-branch guard that branch create, delete and
recovery hold.

The names below (and the submodules) are imported on first access (a module-level
``__getattr__``): reading the write intents does not load drift adoption or recovery.
"""
