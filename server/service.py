"""What a server process does with its graph: fresh read-only opens, and barrier-checked writes.

Every method blocks (Lance and object-storage I/O); the HTTP layer runs them in a worker thread,
never on the event loop.

- Reads re-read the stamp per request and reopen the graph read-only when it changed (stamp
  ``4``, ``migrating`` and ``5`` are readable by the format-5 program); every read folds the
  latest ``__manifest``, so it sees the latest commits.
- Writes are serialised within the process by one lock. What can be checked without committed
  state is checked before the lock is taken (a load body is parsed and validated, a ``.gq``
  source parsed), so a large or bad request never holds up the other writes. Writes re-read the stamp (and the migration
  claim) right before each write (:func:`engine.access.barrier.require_writable_stamp`, which acts
  on :func:`engine.access.write_permission`): a server that started at format 4 starts accepting
  writes as soon as the stamp is 5, and one that was accepting writes refuses them from the
  moment the barrier is stamped, without a restart. The read-write graph (which resolves
  interrupted commits when opened) is opened on the first allowed write and reopened after any
  ``recovery_required``.
- Several server processes on one graph (``--workers N``, or several hosts) contend through the
  fenced write protocol: duplicate ids are refused across processes, as for concurrent CLIs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from engine.access import current_permission, readiness_problems, require_writable_stamp
from engine.door import EngineProfile
from engine.errors import RecoveryRequired
from engine.graph import Graph, open_graph
from engine.manifest import Manifest, commit_history
from engine.ops import branch_documents, create_branch, delete_branch, export_lines, merge_branch, snapshot_document
from engine.ops.load import LoadMode, load_records
from engine.ops.mutate import mutate, select_query
from engine.reconcile.intents import RecoveryRecord
from engine.records import read_records
from engine.storage import FORMAT_5, open_store

T = TypeVar("T")


class GraphService:
    """One graph served by one process under one program profile."""

    def __init__(self, uri: str, profile: EngineProfile,
                 on_recovery: Callable[[list[RecoveryRecord]], None] | None = None):
        """``on_recovery`` is told what each read-write open resolved (interrupted commits)."""
        self.uri = uri
        self.profile = profile
        self._on_recovery = on_recovery
        self.store = open_store(uri)
        self.manifest = Manifest(self.store)
        self._write_lock = threading.Lock()
        self._writable: Graph | None = None
        self._reader: Graph | None = None

    # -- reads ---------------------------------------------------------------------------------

    def reader(self) -> Graph:
        """The graph opened read-only, reopened (stamp rules applied afresh) when the stamp changed.

        Every read then reads the latest ``__manifest`` itself; only the store client and the
        catalog are reused between requests.
        """
        graph = self._reader
        if graph is None or self.manifest.read_stamp()[0] != graph.stamp:
            graph = self._reader = open_graph(self.uri, self.profile, write=False)
        return graph

    def readiness(self) -> dict[str, Any]:
        """``{format, writable, reason}``: the barrier, then, for a fenced program at stamp 5, the
        writer audit (a late format-4 commit or an image without the PK is not writable)."""
        permission = current_permission(self.manifest, self.profile)
        stamp, writable, reason = permission.stamp, permission.writable, permission.reason
        if writable and stamp == FORMAT_5 and self.profile.router.with_pk:
            problems = readiness_problems(self.store, self.manifest)
            if problems:
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                writable, reason = False, f"format_refused: {problems[0]}{more}"
        return {"format": stamp, "writable": writable, "reason": reason}

    def snapshot(self, branch: str) -> dict[str, Any]:
        return snapshot_document(self.reader(), branch)

    def branches(self) -> list[dict[str, Any]]:
        return branch_documents(self.reader())

    def commits(self, branch: str) -> list[dict[str, Any]]:
        history = commit_history(self.reader().manifest, branch)
        return [
            {"commit_id": h.commit_id, "parents": list(h.parents), "actor": h.actor, "message": h.message,
             "committed_at": h.committed_at}
            for h in history
        ]

    def export(self, branch: str, types: list[str]) -> Iterator[str]:
        """JSONL lines; the first line is produced here, so a bad request fails before streaming."""
        lines = export_lines(self.reader(), branch, types)
        first = next(lines, None)

        def chained() -> Iterator[str]:
            if first is None:
                return
            yield first + "\n"
            for line in lines:
                yield line + "\n"

        return chained()

    # -- writes --------------------------------------------------------------------------------

    def stop_writes(self) -> None:
        """Wait for the write in flight, then take the write lock for good: the process is exiting.

        Called on shutdown after the server stopped taking requests, so a request cancelled by
        the graceful-shutdown timeout still finishes (or fails typed) its commit before the
        process ends, and leaves no intent; writes queued behind it never start.
        """
        self._write_lock.acquire()

    def write(self, operation: Callable[[Graph], T]) -> T:
        """Run ``operation`` on the read-write graph once the barrier allows writes."""
        with self._write_lock:
            require_writable_stamp(self.manifest, self.profile)
            if self._writable is None:
                self._writable = open_graph(self.uri, self.profile, write=True)
                if self._on_recovery is not None and self._writable.recovered:
                    self._on_recovery(self._writable.recovered)
            try:
                return operation(self._writable)
            except RecoveryRequired:
                self._writable = None  # the next write reopens read-write, which resolves it
                raise

    def load(self, branch: str, mode: LoadMode, data: bytes, actor: str) -> dict[str, Any]:
        """Parse and validate ``data`` against the catalog first, then publish under the write lock
        (the barrier is checked before the parse too, so a refused write parses nothing)."""
        require_writable_stamp(self.manifest, self.profile)
        reader = self.reader()
        reader.manifest.require_branch(branch)
        with read_records(data, reader.catalog, with_pk=self.profile.router.with_pk) as records:
            result = self.write(lambda graph: load_records(graph, records, mode=mode, branch=branch, actor=actor))
        return {
            "branch": result.branch,
            "mode": result.mode,
            "commits": [c.commit_id for c in result.commits],
            "manifest_version": result.commits[-1].manifest_version if result.commits else None,
            "rows": result.rows,
        }

    def create_branch(self, name: str, source: str) -> dict[str, Any]:
        branch = self.write(lambda graph: create_branch(graph, name, source))
        return {"name": branch.name, "parent_branch": branch.parent_branch, "incarnation": branch.incarnation}

    def delete_branch(self, name: str) -> None:
        self.write(lambda graph: delete_branch(graph, name))

    def mutate(self, branch: str, source: str, name: str | None, params: dict[str, Any], if_commit: str | None,
               actor: str) -> dict[str, Any]:
        """One ``.gq`` query as one commit; syntax and the insert/delete mix are refused before any I/O."""
        select_query(source, name)
        result = self.write(lambda graph: mutate(graph, source, name=name, params=params, branch=branch,
                                                 if_commit=if_commit, actor=actor))
        return result.document()

    def merge(self, source: str, into: str, actor: str) -> dict[str, Any]:
        return self.write(lambda graph: merge_branch(graph, source, into, actor=actor)).document()
