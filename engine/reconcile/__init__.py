"""Reconciliation: what a read-write open does with interrupted and out-of-band commits.

:mod:`~omnigraph.engine.reconcile.recovery` holds the write intents under ``__recovery/`` (armed before a
commit's first effect, deleted after its publish) and resolves the intents of dead writers;
:mod:`~omnigraph.engine.reconcile.drift` finds, classifies, adopts or reverts table commits made outside
the engine; :mod:`~omnigraph.engine.reconcile.pins` decides what a write does about a table past its
pin (wait, resolve, settle, refresh); :mod:`~omnigraph.engine.reconcile.branch_lease` is the
per-branch lease that every write, branch create, branch delete and recovery hold.

The package itself defines no names: callers import them from the module that defines them, so
that importing one module loads only what it needs (a read-only open loads none of them).
"""
