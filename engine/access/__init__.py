"""Access: who may write a graph now, as every writer re-checks it.

:mod:`~omnigraph.engine.access.permission` is the one decision "may this program write at this stamp"
(:func:`~omnigraph.engine.access.permission.write_permission`, whose
:class:`~omnigraph.engine.access.permission.WritePermission` verdict a graph open, the barrier and the
readiness probe all act on) and the write barrier a long-running writer re-reads before every write
(the stamp and the migration claim: :func:`~omnigraph.engine.access.permission.current_permission`,
:func:`~omnigraph.engine.access.permission.require_writable_stamp`);
:mod:`~omnigraph.engine.access.writer_audit` catches a format-4 writer that published after stamp 5 (and
holds the readiness check built on it); :mod:`~omnigraph.engine.access.fleet` is the registry of running
servers and long writers under ``__fleet/``. The stamp values themselves are on-disk names:
:mod:`omnigraph.engine.storage.names`.

The package itself defines no names: callers import them from the module that defines them, so
that a read-only open of a graph loads only the permission and the barrier, not the fleet
registry (pydantic models) nor the writer audit.
"""
