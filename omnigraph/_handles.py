"""The engine handles behind one :class:`omnigraph.Graph`, and the rules for using them from threads.

A :class:`Handles` holds at most one read-only and one read-write engine handle of a root:

- :meth:`Handles.reading` returns the read-only handle, opened on first use and reopened (the
  stamp rules applied afresh) whenever the stamp changed since it was opened. Reads share it and
  run in parallel: each read folds the latest ``__manifest`` itself.
- :meth:`Handles.write` runs one write on the read-write handle under one lock, after re-reading
  the stamp and the migration claim (``format_barrier`` while a migration holds the barrier). The
  handle is opened (which resolves interrupted commits) on the first write that the barrier
  allows, and dropped after a ``recovery_required`` so that the next write reopens and resolves it.
- With ``every_call=False`` (a command that opens, acts once and exits) the stamp and the claim
  are checked only when a handle is opened.

Every handle is opened on the graph's one :class:`~omnigraph.engine.storage.store.GraphStore`, which
keeps the S3 settings it was opened with.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from omnigraph import ENGINE, FORMAT_4_WRITER
from omnigraph.engine.access.permission import require_writable_stamp
from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.door.routing import EngineProfile
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import BadRequest, RecoveryRequired
from omnigraph.engine.graph import Graph as EngineGraph
from omnigraph.engine.graph import open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.store import GraphStore

if TYPE_CHECKING:
    from omnigraph.engine.reconcile.recovery import RecoveryRecord
    from omnigraph.engine.schema.catalog import Catalog

__all__ = ["PROGRAMS", "Handles", "program_profile"]

T = TypeVar("T")


PROGRAMS: dict[str, EngineProfile] = {ENGINE: FENCED_PROFILE, FORMAT_4_WRITER: LEGACY_PROFILE}
"""The program profiles a graph can be opened with: the engine (writes stamp ``5``, reads ``4``,
``migrating`` and ``5``) and the format-4 writer's emulation (reads and writes only ``4``)."""


def program_profile(program: str) -> EngineProfile:
    """The profile of ``program`` (a key of :data:`PROGRAMS`).

    Raises:
        BadRequest: an unknown program.
    """
    try:
        return PROGRAMS[program]
    except KeyError:
        raise BadRequest(f"unknown program {program!r}; one of {sorted(PROGRAMS)}", {"program": program}) from None


class Handles:
    """The read-only and read-write engine handles of one root (see the module docstring)."""

    def __init__(
        self,
        store: GraphStore,
        profile: EngineProfile,
        *,
        on_recovery: Callable[[Sequence[RecoveryRecord]], None] | None,
        every_call: bool,
    ) -> None:
        """``on_recovery`` is told what each read-write open resolved, when it resolved anything."""
        self.store = store
        self.manifest = Manifest(store)
        self.profile = profile
        self.recovered: tuple[RecoveryRecord, ...] = ()
        self._on_recovery = on_recovery
        self._every_call = every_call
        self._write_lock = threading.Lock()
        self._reader: EngineGraph | None = None
        self._writer: EngineGraph | None = None
        self._closed = False

    def require_open(self) -> None:
        """``bad_request`` once :meth:`close` was called."""
        if self._closed:
            raise BadRequest(f"this Graph of {self.store.uri} is closed", {"uri": self.store.uri})

    def open_reader(self) -> EngineGraph:
        """Open (or reopen) the read-only handle now: ``not_found``, ``format_refused`` as the open rules say."""
        self._reader = open_graph(self.store, self.profile, write=False)
        return self._reader

    def open_writer(self) -> EngineGraph:
        """Open the read-write handle now, resolving interrupted commits.

        Raises ``format_refused`` or ``claim_held`` when the barrier forbids writing.
        """
        writer = open_graph(self.store, self.profile, write=True)
        self._writer = writer
        self.recovered = tuple(writer.recovered)
        if self._on_recovery is not None and writer.recovered:
            self._on_recovery(writer.recovered)
        return writer

    def adopt_writer(self, writer: EngineGraph) -> None:
        """Use ``writer`` (a graph just created by init) as the read-write handle."""
        self._writer = writer

    def reading(self) -> EngineGraph:
        """The read-only handle, reopened (stamp rules applied afresh) when the stamp changed."""
        self.require_open()
        graph = self._reader
        if graph is not None and not self._every_call:
            return graph
        if graph is None or self.manifest.read_stamp()[0] != graph.stamp:
            graph = self.open_reader()
        return graph

    def any(self) -> EngineGraph:
        """Any open handle (for the accepted catalog as this process last read it), opening the reader if none is."""
        self.require_open()
        return self._writer or self._reader or self.open_reader()

    def accept_catalog(self, catalog: Catalog) -> None:
        """Make ``catalog`` (a schema this process just accepted) the catalog of both open handles."""
        for handle in (self._reader, self._writer):
            if handle is not None:
                handle.catalog = catalog

    def check_barrier(self) -> None:
        """Refuse a write before its input is parsed while the barrier holds (``format_barrier``)."""
        if self._every_call:
            require_writable_stamp(self.manifest, self.profile)

    def write(self, operation: Callable[[EngineGraph], T]) -> T:
        """Run ``operation`` on the read-write handle, under the write lock, once the barrier allows."""
        with self._write_lock:
            self.require_open()
            if self._every_call or self._writer is None:
                require_writable_stamp(self.manifest, self.profile)
            writer = self._writer or self.open_writer()
            try:
                return operation(writer)
            except RecoveryRequired:
                self._writer = None  # the next write reopens read-write, which resolves it
                raise

    def close(self) -> None:
        """Wait for the write in flight, then drop both handles; later use is ``bad_request``."""
        with self._write_lock:
            self._closed = True
            self._reader = self._writer = None
