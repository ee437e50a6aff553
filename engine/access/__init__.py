"""Access: who may write a graph now, as every writer re-checks it.

:mod:`~engine.access.permission` is the one decision "may this program write at this stamp"
(:func:`write_permission`, whose :class:`WritePermission` verdict a graph open, the barrier and
the readiness probe all act on), :mod:`~engine.access.barrier` is the write barrier a
long-running writer re-reads before every write (the stamp and the migration claim),
:mod:`~engine.access.writer_audit` catches a format-4 writer that published after stamp 5 (and
the readiness check built on it) and :mod:`~engine.access.fleet` is the registry of running
servers and long writers under ``__fleet/``. The stamp values themselves are on-disk names:
:mod:`engine.storage.stamps`.
"""

from engine.access import barrier, fleet, permission, writer_audit
from engine.access.barrier import current_permission, require_writable_stamp
from engine.access.fleet import FleetRecord, list_records, record_path
from engine.access.permission import Access, Ground, WritePermission, write_permission
from engine.access.writer_audit import foreign_head, foreign_heads, readiness_problems, refence_command

__all__ = [
    "Access",
    "FleetRecord",
    "Ground",
    "WritePermission",
    "barrier",
    "current_permission",
    "fleet",
    "foreign_head",
    "foreign_heads",
    "list_records",
    "permission",
    "readiness_problems",
    "record_path",
    "refence_command",
    "require_writable_stamp",
    "write_permission",
    "writer_audit",
]
