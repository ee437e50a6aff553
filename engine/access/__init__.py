"""Access: who may write a graph now, as every writer re-checks it.

:mod:`~omnigraph.engine.access.permission` is the one decision "may this program write at this stamp"
(:func:`write_permission`, whose :class:`WritePermission` verdict a graph open, the barrier and
the readiness probe all act on), :mod:`~omnigraph.engine.access.permission` is the write barrier a
long-running writer re-reads before every write (the stamp and the migration claim),
:mod:`~omnigraph.engine.access.writer_audit` catches a format-4 writer that published after stamp 5 (and
the readiness check built on it) and :mod:`~omnigraph.engine.access.fleet` is the registry of running
servers and long writers under ``__fleet/``. The stamp values themselves are on-disk names:
:mod:`omnigraph.engine.storage.names`.

The names below (and the submodules) are imported on first access (a module-level
``__getattr__``): opening a graph needs the permission and the barrier, not the fleet registry
(pydantic models) nor the writer audit.
"""
