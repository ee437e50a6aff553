"""What a server process does with its graph: fresh read-only opens, and barrier-checked writes.

Every method blocks (Lance and object-storage I/O); the HTTP layer runs them in a worker thread,
never on the event loop.

- Reads re-read the stamp per request and reopen the graph read-only when it changed (stamp
  ``4``, ``migrating`` and ``5`` are readable by the format-5 program); every read folds the
  latest ``__manifest``, so it sees the latest commits.
- Writes are serialised within the process by one lock. What can be checked without committed
  state is checked before the lock is taken (a load body is parsed and validated, a ``.gq``
  source parsed), so a large or bad request never holds up the other writes. Writes re-read the stamp (and the migration
  claim) right before each write (:class:`omnigraph.Graph` applies the barrier): a server that started at format 4 starts accepting
  writes as soon as the stamp is 5, and one that was accepting writes refuses them from the
  moment the barrier is stamped, without a restart. The read-write graph (which resolves
  interrupted commits when opened) is opened on the first allowed write and reopened after any
  ``recovery_required``.
- Several server processes on one graph (``--workers N``, or several hosts) take turns per branch
  through the branch's lease, as concurrent CLIs do (:mod:`omnigraph.engine.reconcile.branch_lease`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import omnigraph

if TYPE_CHECKING:
    from omnigraph import BlobReader

LoadMode = Literal["append", "merge", "overwrite"]
EXPORT_BLOCK_BYTES = 256 * 1024
"""The size an export block reaches before it is sent (whole lines: a block may be a line longer)."""


class GraphService:
    """One graph served by one process under one program profile.

    It is a lazy :class:`omnigraph.Graph` (nothing is opened until the first request), whose reads
    run in parallel and whose writes it serialises.
    """

    def __init__(
        self, uri: str, program: str = omnigraph.ENGINE, on_recovery: Callable[[Sequence[omnigraph.Recovery]], None] | None = None
    ):
        """``on_recovery`` is told what each read-write open resolved (interrupted commits)."""
        self.uri = uri
        self.program = program
        self.graph = omnigraph.open(uri, program=program, lazy=True, on_recovery=on_recovery)

    # -- reads ---------------------------------------------------------------------------------

    def readiness(self) -> dict[str, Any]:
        """``{format, writable, reason}``: the barrier, then the writer audit for a fenced program at stamp 5.

        In the writer audit, a late format-4 commit or an image without the PK is not writable.
        """
        return self.graph.readiness().to_dict()

    def snapshot(self, branch: str) -> dict[str, Any]:
        """The snapshot document of ``branch``: what it pins."""
        return self.graph.snapshot(branch).to_dict()

    def branches(self) -> list[dict[str, Any]]:
        """The document of every branch."""
        return [branch.to_dict() for branch in self.graph.branches()]

    def commits(self, branch: str) -> list[dict[str, Any]]:
        """The document of every commit of ``branch``."""
        return [commit.to_dict() for commit in self.graph.commits(branch)]

    def export(self, branch: str, types: list[str]) -> Iterator[bytes]:
        """JSONL in blocks of about :data:`EXPORT_BLOCK_BYTES` (whole lines each).

        The first line is produced here, so a bad request fails before streaming. One block per
        send: a line per send made the HTTP export many times slower than the CLI's.
        """
        lines = self.graph.export_jsonl(branch, types)
        first = next(lines, None)

        def blocks() -> Iterator[bytes]:
            if first is None:
                return
            block, size = [first], len(first)
            for line in lines:
                if size >= EXPORT_BLOCK_BYTES:
                    yield ("\n".join(block) + "\n").encode("utf-8")
                    block, size = [], 0
                block.append(line)
                size += len(line) + 1
            yield ("\n".join(block) + "\n").encode("utf-8")

        return blocks()

    def blob(self, branch: str, type_name: str, row_id: str, prop: str) -> BlobReader:
        """One Blob cell, opened (its size known, no byte read yet).

        The cell is opened here, so a refused cell fails before streaming; the caller streams it
        (:meth:`omnigraph.BlobReader.chunks` closes it at the end) or closes it.
        """
        return self.graph.open_blob(type_name, row_id, prop, branch=branch)

    def query(
        self, branch: str, source: str, name: str | None, params: dict[str, Any], at: str | None, cancel: omnigraph.QueryCancel
    ) -> dict[str, Any]:
        """The output document of one read query (parsed and checked before any data is read); ``cancel`` stops it."""
        return self.graph.query(source, name=name, params=params, branch=branch, at=at, cancel=cancel).to_dict()

    def explain(self, branch: str, source: str, name: str | None, params: dict[str, Any], at: str | None) -> dict[str, Any]:
        """The plan document of one read query, not run (:meth:`omnigraph.Graph.explain_query`)."""
        return self.graph.explain_query(source, name=name, params=params, branch=branch, at=at).to_dict()

    # -- writes --------------------------------------------------------------------------------

    def stop_writes(self) -> None:
        """Wait for the write in flight, then close the graph: the process is exiting.

        Called on shutdown after the server stopped taking requests, so a request cancelled by
        the graceful-shutdown timeout still finishes (or fails typed) its commit before the
        process ends, and leaves no intent; writes queued behind it never start.
        """
        self.graph.close()

    def load(self, branch: str, mode: LoadMode, data: bytes, actor: str) -> dict[str, Any]:
        """Parse and validate ``data`` against the catalog first, then publish under the write lock.

        The barrier is checked before the parse too, so a refused write parses nothing. A Blob value
        must be bytes: an external URI would have the server read its own files or buckets.
        """
        return self.graph.load(data, mode=mode, branch=branch, actor=actor, external_blobs=False).to_dict()

    def create_branch(self, name: str, source: str) -> dict[str, Any]:
        """Create branch ``name`` from the head of ``source``; the created branch's document."""
        return self.graph.create_branch(name, from_branch=source).to_dict()

    def delete_branch(self, name: str) -> None:
        """Delete branch ``name``."""
        self.graph.delete_branch(name)

    def mutate(
        self, branch: str, source: str, name: str | None, params: dict[str, Any], if_commit: str | None, actor: str
    ) -> dict[str, Any]:
        """One ``.gq`` query as one commit.

        Syntax, the insert/delete mix and an external Blob URI (see :meth:`load`) are refused before any I/O.
        """
        return self.graph.mutate(
            source, name=name, params=params, branch=branch, if_commit=if_commit, actor=actor, external_blobs=False
        ).to_dict()

    def plan_schema(self, source: str) -> dict[str, Any]:
        """The ``omnigraph schema plan --json`` document of ``source``; writes nothing."""
        plan = self.graph.plan_schema(source)
        return {**plan.model_dump(mode="json"), "data_loss": plan.data_loss}

    def apply_schema(self, source: str, allow_data_loss: bool, actor: str) -> dict[str, Any]:
        """The ``omnigraph schema apply --json`` document: ``source`` applied to every branch."""
        return self.graph.apply_schema(source, allow_data_loss=allow_data_loss, actor=actor).document()

    def merge(self, source: str, into: str, actor: str) -> dict[str, Any]:
        """Merge branch ``source`` into ``into`` as ``actor``; the merge result's document."""
        return self.graph.merge(source, into=into, actor=actor).to_dict()
