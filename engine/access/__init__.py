"""Access: who may write a graph now, as every writer re-checks it.

:mod:`~engine.access.barrier` is the write barrier a long-running writer re-reads before every
write (the stamp and the migration claim), :mod:`~engine.access.writer_audit` catches a format-4
writer that published after stamp 5 (and the readiness check built on it) and
:mod:`~engine.access.fleet` is the registry of running servers and long writers under
``__fleet/``. The stamp values themselves are on-disk names: :mod:`engine.storage.stamps`.
"""

from engine.access import barrier, fleet, writer_audit
from engine.access.barrier import barrier_state, require_writable_stamp
from engine.access.fleet import FleetRecord, list_records, record_path
from engine.access.writer_audit import foreign_heads, readiness_problems, refence_command

__all__ = [
    "FleetRecord",
    "barrier",
    "barrier_state",
    "fleet",
    "foreign_heads",
    "list_records",
    "readiness_problems",
    "record_path",
    "refence_command",
    "require_writable_stamp",
    "writer_audit",
]
