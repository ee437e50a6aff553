"""``omnigraph.Graph``: one graph root opened by an application, read and written in-process.

A :class:`Graph` holds up to two engine handles on the root (:mod:`omnigraph._handles`): a
read-only one for every read and a read-write one for every write (opened, which resolves
interrupted commits of dead writers, on :func:`omnigraph.open` or on the first write of a
``lazy`` graph). It follows the rules a server process follows, because the server is built on
it: reads run in parallel, each on one consistent commit; writes are serialised by one lock per
:class:`Graph`, with what needs no committed state checked before the lock is taken; the stamp
and the migration claim are re-read before each read and write (``stamp_checks="every_call"``)
or only when a handle opens (``"at_open"``, what a one-shot console command uses), so a graph
behind a migration barrier refuses writes (``format_barrier``) until it is stamped ``5``.
Several :class:`Graph` objects on one root contend through the fenced write protocol: of two
strict inserts of one id, exactly one wins and the other raises
:class:`~omnigraph.errors.KeyConflict`. ``docs/python-api.md`` ("Threads and processes") says
what that means for an application.

Every method raises the :class:`~omnigraph.errors.OmnigraphError` family; the ``Raises``
sections name the errors a caller is expected to handle (any method may also raise
``storage_unavailable`` or ``access_denied`` when the object store fails or refuses).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from omnigraph import ENGINE
from omnigraph._handles import PROGRAMS, Handles, program_profile
from omnigraph.engine.door.routing import EngineProfile
from omnigraph.engine.errors import BadRequest, FormatBarrier, FormatRefused, ReadOnlyGraph
from omnigraph.engine.graph import default_actor, init_graph
from omnigraph.engine.manifest.commit_graph import commit_history
from omnigraph.engine.manifest.rows import MAIN
from omnigraph.engine.results import documents
from omnigraph.engine.storage.store import GraphStore, open_store
from omnigraph.results import (
    Branch,
    ChunkedMutationResult,
    Commit,
    CreatedBranch,
    DeletedBranch,
    LoadResult,
    MergeResult,
    MutationResult,
    QueryPlan,
    QueryResult,
    Readiness,
    Snapshot,
)

# Each engine capability (load, mutate, merge, export, blobs, queries, the fleet registry, the
# writer audit) is imported by the method that uses it: a command that opens a graph and does one
# thing loads only that thing (``tests/guards/test_startup_imports.py``).
if TYPE_CHECKING:
    import pyarrow as pa

    from omnigraph.engine.access import fleet
    from omnigraph.engine.maintenance.findings import CheckReport
    from omnigraph.engine.ops.blobs import BlobReader
    from omnigraph.engine.ops.load import LoadMode as LoadMode  # re-exported for annotations (omnigraph.cli.shared_commands)
    from omnigraph.engine.ops.schema_change import SchemaApplied
    from omnigraph.engine.query.limits import QueryCancel
    from omnigraph.engine.query.run import Answer as Answer  # re-exported for annotations (omnigraph.cli.query)
    from omnigraph.engine.reconcile.recovery import RecoveryRecord
    from omnigraph.engine.schema.annotations import SchemaWarning
    from omnigraph.engine.schema.catalog import Catalog
    from omnigraph.engine.schema.evolution import SchemaPlan
    from omnigraph.inputs import LoadData

__all__ = ["PROGRAMS", "Graph", "connect", "create", "is_branch_name"]

T = TypeVar("T")
StampChecks = Literal["every_call", "at_open"]


def _quiet(_line: str) -> None:
    """Announces nothing."""


def _one_of(name: str, value: object, allowed: Sequence[str]) -> None:
    """``bad_request`` unless ``value`` is one of the strings ``allowed``; reads nothing."""
    if not isinstance(value, str) or value not in allowed:
        raise BadRequest(f"{name} must be one of {', '.join(allowed)}, got {value!r}", {name: repr(value), "allowed": list(allowed)})


def _integer_properties(catalog: Catalog) -> dict[str, frozenset[str]]:
    """Per type name, its integer properties (``I32`` ... ``U64`` and lists of them)."""
    from omnigraph.engine.schema.types import INTEGER_RANGES, ListType, ScalarType

    def integer(ptype: object) -> bool:
        scalar = ptype.item if isinstance(ptype, ListType) else ptype
        return isinstance(scalar, ScalarType) and scalar.name in INTEGER_RANGES

    return {table.type_name: frozenset(p.name for p in table.properties if integer(p.type)) for table in catalog.tables()}


def _of_type(name: str, value: object, kinds: tuple[type, ...], what: str) -> None:
    """``bad_request`` unless ``value`` is an instance of ``kinds`` (never a bool standing for a number); reads nothing."""
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise BadRequest(f"{name} must be {what}, got {value!r}", {name: repr(value)})


def is_branch_name(name: str) -> bool:
    """True when ``name`` can name a branch: ``main``, or a name :meth:`Graph.create_branch` accepts.

    Letters, digits, '.', '_' and '-', at most 100, starting with a letter or digit; no '..', not
    ending in '.' or '.lock'.
    """
    from omnigraph.engine.ops.branches import is_branch_name as rule

    return rule(name)


class Graph:
    """A graph root opened with :func:`omnigraph.open` or :func:`omnigraph.init`.

    Safe to share between threads (see the module docstring). Use it as a context manager, or
    call :meth:`close`, to release its handles; a closed graph refuses every call.
    """

    def __init__(
        self,
        store: GraphStore,
        profile: EngineProfile,
        *,
        read_only: bool,
        actor: str | None,
        on_recovery: Callable[[Sequence[RecoveryRecord]], None] | None,
        stamp_checks: StampChecks = "every_call",
    ) -> None:
        """Not for direct use: :func:`omnigraph.open` and :func:`omnigraph.init` build graphs."""
        self._h = Handles(store, profile, on_recovery=on_recovery, every_call=stamp_checks == "every_call")
        self._read_only = read_only
        self._actor = actor

    # -- identity ------------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The graph's root as the engine names it (an absolute path, or ``s3://bucket/prefix``)."""
        return self._h.store.uri

    @property
    def program(self) -> str:
        """The program profile the graph was opened with (:data:`ENGINE` unless asked otherwise)."""
        return self._h.profile.program

    @property
    def writes_format(self) -> str:
        """The stamp this program writes (``5`` for the engine)."""
        return self._h.profile.init_stamp

    @property
    def read_only(self) -> bool:
        """True when every write is refused with :class:`~omnigraph.errors.ReadOnlyGraph`."""
        return self._read_only

    @property
    def actor(self) -> str:
        """Who commits record unless a write names its own: ``actor`` of :func:`omnigraph.open`, ``OMNIGRAPH_ACTOR``, the login."""
        return self._actor or default_actor()

    @property
    def recovered(self) -> tuple[RecoveryRecord, ...]:
        """The interrupted commits the latest read-write open resolved (empty if none)."""
        return self._h.recovered

    @property
    def format(self) -> str:
        """The stamp the graph had when a handle of this graph last opened it (no I/O; :meth:`stamp` reads it now)."""
        return self._h.any().stamp

    @property
    def tables(self) -> tuple[str, ...]:
        """Every table key of the schema (``node:Person``, ``edge:Knows``, ...), in catalog order."""
        return tuple(self._h.any().catalog.table_keys())

    @property
    def schema_warnings(self) -> tuple[SchemaWarning, ...]:
        """The schema's warnings (annotations it keeps but does not know), each with line:column."""
        return tuple(self._h.any().catalog.warnings)

    def schema(self) -> dict[str, Any]:
        """The ``omnigraph schema show --json`` document: the schema source, its warnings, the catalog (no I/O)."""
        from omnigraph.engine.ops.snapshot import schema_document

        return schema_document(self._h.any())

    def schema_text(self) -> list[str]:
        """The lines ``omnigraph schema show`` prints: a summary, then a block per table and interface (no I/O)."""
        from omnigraph.engine.ops.snapshot import render_schema

        return render_schema(self._h.any())

    def stamp(self) -> str:
        """The format stamp as it is now (``4``, ``migrating`` or ``5``).

        Raises:
            FormatRefused: the graph has no stamp or an unknown one.
        """
        self._h.require_open()
        return str(self._h.manifest.read_stamp()[0])

    # -- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release both handles (waiting for a write in flight); later calls raise ``bad_request``."""
        self._h.close()

    def _refuse_if_read_only(self, operation: str) -> None:
        self._h.require_open()
        if self._read_only:
            raise ReadOnlyGraph(
                f"{operation} refused: this Graph of {self.uri} was opened read-only (omnigraph.open(..., read_only=True))",
                {"operation": operation},
            )

    # -- reads ---------------------------------------------------------------------------------

    def readiness(self) -> Readiness:
        """Whether this program may write the graph now, and why (what ``GET /readyz`` answers).

        At stamp ``5`` the engine also runs the writer audit: a commit a format-4 writer published
        after the stamp, or an image without the primary key, makes the graph not writable.

        Raises:
            FormatRefused: the graph has no stamp or an unknown one.
        """
        from omnigraph.engine.access.writer_audit import readiness

        self._h.require_open()
        return readiness(self._h.manifest, self._h.profile)

    def wait_writable(self, timeout: float | None = None, *, poll_interval: float = 1.0) -> Readiness:
        """Block until this program may write the graph, and return that :meth:`readiness`.

        For an application deployed ahead of the upgrade (opened ``lazy=True`` at stamp ``4`` or
        ``migrating``): it returns once the graph is stamped ``5`` and no migration claim is held,
        the moment a server's ``GET /readyz`` turns 200. Other threads read meanwhile. The
        readiness is read every ``poll_interval`` seconds; ``timeout`` None waits for ever.

        Raises:
            FormatBarrier: still not writable after ``timeout`` seconds; the message says why.
            FormatRefused: the graph has no stamp or an unknown one.
            ReadOnlyGraph: the graph was opened read-only, so it never writes.
        """
        from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, stop_never, wait_fixed

        self._refuse_if_read_only("wait_writable")
        polls = Retrying(
            retry=retry_if_result(lambda ready: not ready.writable),
            wait=wait_fixed(poll_interval),
            stop=stop_never if timeout is None else stop_after_delay(timeout),
        )
        try:
            return polls(self.readiness)
        except RetryError as waited:
            last: Readiness = waited.last_attempt.result()
            raise FormatBarrier(
                f"{self.uri} is still not writable after {timeout:g} s: {last.reason}",
                {"format": last.format, "reason": last.reason, "timeout_s": timeout},
            ) from None

    def branches(self) -> tuple[Branch, ...]:
        """Every branch with its parent and incarnation: ``main`` first, then by name."""
        from omnigraph.engine.ops.branches import branch_documents

        return documents(Branch, branch_documents(self._h.reading()))

    def snapshot(self, branch: str = MAIN) -> Snapshot:
        """What ``branch`` pins: every table's image, rows and primary key.

        Raises:
            NotFound: no branch ``branch``.
        """
        from omnigraph.engine.ops.snapshot import snapshot_document

        return Snapshot.from_document(snapshot_document(self._h.reading(), branch))

    def commits(self, branch: str = MAIN) -> tuple[Commit, ...]:
        """The commits reachable from the head of ``branch`` through every parent, newest first.

        Raises:
            NotFound: no branch ``branch``.
        """
        history = commit_history(self._h.reading().manifest, branch)
        return tuple(Commit(h.commit_id, tuple(h.parents), h.actor, h.message, h.committed_at) for h in history)

    def export_jsonl(self, branch: str = MAIN, types: Sequence[str] | None = None, *, at: str | None = None) -> Iterator[str]:
        """The branch as JSONL lines (no newline), what ``omnigraph export`` writes and ``load`` accepts.

        Tables come in table-key order, rows by id. The branch is read as one commit (its head, or
        commit ``at`` of it, under that commit's schema); the lines are produced as they are consumed.

        Raises:
            NotFound: no branch ``branch`` (when the first line is asked for).
            BadRequest: ``types`` names a type the branch does not have.
        """
        from omnigraph.engine.ops.export import export_lines

        return export_lines(self._h.reading(), branch, list(types or []), at)

    def export(self, branch: str = MAIN, types: Sequence[str] | None = None, *, at: str | None = None) -> Iterator[dict[str, Any]]:
        """The branch (or its commit ``at``) as record dicts in the JSONL shape (:meth:`export_jsonl`, parsed).

        Raises:
            NotFound: no branch ``branch``.
            BadRequest: ``types`` names a type the branch does not have.
        """
        return (json.loads(line) for line in self.export_jsonl(branch, types, at=at))

    def export_tables(self, branch: str = MAIN, types: Sequence[str] | None = None, *, at: str | None = None) -> dict[str, pa.Table]:
        """The branch (or its commit ``at``) as one ``pyarrow.Table`` per table key (``node:Person``, ...), sorted by id.

        Each table has the physical columns: ``id``, for edges ``src`` and ``dst``, then the
        properties; a Blob column as Utf8 spellings, ``base64:`` of its bytes or a reference's URI,
        so every payload of the table is read into memory.

        Raises:
            NotFound: no branch ``branch``.
            BadRequest: ``types`` names a type the branch does not have.
        """
        from omnigraph.engine.ops.export import export_tables

        return export_tables(self._h.reading(), branch, list(types or []), at)

    def open_blob(self, type_name: str, row_id: str, prop: str, *, branch: str = MAIN) -> BlobReader:
        """One Blob cell of ``branch``'s current commit, opened for streaming.

        The reader has ``size``, ``read(n)`` and ``chunks()``; close it (or use it in a ``with`` block).

        Raises:
            NotFound: no branch ``branch``, no such type, property or id, a null cell, or an
                external object the cell references that is gone.
            BadRequest: ``prop`` is not a Blob property.
        """
        from omnigraph.engine.ops.blobs import open_blob

        return open_blob(self._h.reading(), branch, type_name, row_id, prop)

    def blob(self, type_name: str, row_id: str, prop: str, *, branch: str = MAIN) -> bytes:
        """The bytes of one Blob cell (:meth:`open_blob`, read whole).

        Raises:
            NotFound: as :meth:`open_blob`.
            BadRequest: as :meth:`open_blob`.
        """
        with self.open_blob(type_name, row_id, prop, branch=branch) as reader:
            return reader.read()

    @contextmanager
    def open_query(
        self,
        query: str,
        *,
        name: str | None = None,
        params: Mapping[str, Any] | None = None,
        branch: str = MAIN,
        at: str | None = None,
        cancel: QueryCancel | None = None,
    ) -> Iterator[Answer]:
        """Run a read query and stream its answer inside the block.

        The answer has ``columns``, ``commit`` and ``rows()`` (an iterator of value lists, consumable once).
        ``cancel`` (an :class:`omnigraph.QueryCancel`) stops the query when fired from another thread.

        Raises:
            BadRequest: a syntax, type or parameter error (with line:column), or a mutation.
            NotFound: no branch ``branch``, or no commit ``at`` on it.
            ResourceLimit: the query needs more memory (or spill disk) than its limit.
            QueryTimeout: the query ran past ``OMNIGRAPH_QUERY_TIMEOUT_S``.
            QueryCancelled: ``cancel`` was fired.
        """
        from omnigraph.engine.gq.parser import choose_query
        from omnigraph.engine.query.run import open_answer

        choose_query(query, name, "read")  # syntax, the name and the kind: refused before any I/O
        reading = self._h.reading()
        with open_answer(reading, query, name=name, params=dict(params or {}), branch=branch, at=at, cancel=cancel) as answer:
            yield answer

    def query(
        self,
        query: str,
        *,
        name: str | None = None,
        params: Mapping[str, Any] | None = None,
        branch: str = MAIN,
        at: str | None = None,
        cancel: QueryCancel | None = None,
    ) -> QueryResult:
        """Run the read query ``name`` of the ``.gq`` source ``query`` on ``branch``, or on its commit ``at``.

        ``name`` may be left out when the source declares one query; ``cancel`` as in :meth:`open_query`.

        Raises:
            BadRequest: a syntax, type or parameter error (with line:column), or a mutation.
            NotFound: no branch ``branch``, or no commit ``at`` on it.
            ResourceLimit: the query needs more memory (or spill disk) than its limit, or its
                answer is larger than its cap (``answer_bytes``: stream it with :meth:`open_query`).
            QueryTimeout: the query ran past ``OMNIGRAPH_QUERY_TIMEOUT_S``.
            QueryCancelled: ``cancel`` was fired.
        """
        with self.open_query(query, name=name, params=params, branch=branch, at=at, cancel=cancel) as answer:
            return QueryResult.from_document(answer.document())

    def explain_query(
        self, query: str, *, name: str | None = None, params: Mapping[str, Any] | None = None, branch: str = MAIN, at: str | None = None
    ) -> QueryPlan:
        """How :meth:`query` would run the same query, without running it (``omnigraph query --explain``).

        The tables and Lance versions it reads with their indexes, each variable's scan (an id
        lookup or the whole table), each filter (pushed into the scan, and the index serving it)
        and each traversal's mode; row figures from the manifest's counts.

        Raises:
            BadRequest: a syntax, type or parameter error (with line:column), or a mutation.
            NotFound: no branch ``branch``, or no commit ``at`` on it.
        """
        from omnigraph.engine.gq.parser import choose_query
        from omnigraph.engine.query.explain import explain_query

        choose_query(query, name, "read")  # syntax, the name and the kind: refused before any I/O
        return explain_query(self._h.reading(), query, name=name, params=dict(params or {}), branch=branch, at=at)

    def check(self) -> CheckReport:
        """:func:`omnigraph.check` of this graph's root (read-only; findings are returned, not raised).

        Raises:
            NotFound: there is no graph at the root any more.
        """
        self._h.require_open()
        from omnigraph.maintenance import integrity_check

        return integrity_check(self._h.store)

    # -- writes --------------------------------------------------------------------------------

    def load(
        self,
        data: LoadData,
        *,
        mode: LoadMode,
        branch: str = MAIN,
        chunk_rows: int | None = None,
        actor: str | None = None,
        progress: Callable[[int, int], None] | None = None,
        external_blobs: bool = True,
    ) -> LoadResult:
        """Load records into ``branch`` as one commit (or, with ``chunk_rows``, one per chunk).

        ``data`` is a path, JSONL bytes, a binary file, an iterable of record dicts or a mapping
        from type name to ``pyarrow.Table`` (:mod:`omnigraph.inputs`). ``mode``: ``append`` is a
        strict insert, ``merge`` an upsert by id, ``overwrite`` replaces the tables present.
        The records are parsed and validated before the write lock is taken. A chunked load
        registers in the fleet registry while it runs and calls ``progress(done, total)`` after
        each commit. ``external_blobs=False`` refuses a Blob value that names an external object
        (a file:// or s3:// URI) instead of reading it: what a server does for its callers.

        Every argument is checked before anything is read: a ``mode`` other than the three, a
        ``chunk_rows`` that is not an integer of at least 1 (or is given with ``overwrite``), a
        ``branch`` or ``actor`` that is not a string, a ``progress`` that is not callable or an
        ``external_blobs`` that is not a bool is ``BadRequest``.

        Raises:
            ReadOnlyGraph: the graph was opened read-only.
            BadRequest: a bad argument (above), invalid records (with the line or record number).
            NotFound: no branch ``branch``.
            KeyConflict: ``append`` met an existing id (nothing was written).
            ResourceLimit: a commit would exceed 8,192 rows or 32 MiB for a table.
            FormatBarrier: a migration barrier holds (the stamp is not ``5``, or a claim is held).
            RecoveryRequired: a commit was interrupted after an effect landed.
        """
        from omnigraph.engine.ops.load import check_load_options, load_records
        from omnigraph.engine.records.read import read_records
        from omnigraph.inputs import opened_data

        check_load_options(mode, chunk_rows)
        _of_type("branch", branch, (str,), "a branch name (a string)")
        _of_type("actor", actor, (str, type(None)), "a string or None")
        _of_type("external_blobs", external_blobs, (bool,), "a bool")
        if progress is not None and not callable(progress):
            raise BadRequest(f"progress must be callable or None, got {progress!r}", {"progress": repr(progress)})
        self._refuse_if_read_only("load")
        self._h.check_barrier()
        self._h.manifest.require_branch(branch)
        catalog = self._h.any().catalog
        registration: AbstractContextManager[object] = nullcontext()
        if chunk_rows is not None:  # a chunked load registers in the fleet registry
            from omnigraph.engine.access import fleet

            registration = fleet.registered(self._h.store, self.program, "load", self.writes_format)
        edges = frozenset(t.type_name for t in catalog.tables() if t.kind == "edge")
        with (
            registration,
            opened_data(data, edges, _integer_properties(catalog)) as source,
            read_records(source, catalog, with_pk=self._h.profile.router.with_pk) as records,
        ):
            result = self._h.write(
                lambda graph: load_records(
                    graph,
                    records,
                    mode=mode,
                    branch=branch,
                    actor=actor or self.actor,
                    chunk_rows=chunk_rows,
                    progress=progress,
                    external_blobs=external_blobs,
                )
            )
        return result

    def mutate(
        self,
        query: str,
        *,
        params: Mapping[str, Any] | None = None,
        name: str | None = None,
        branch: str = MAIN,
        if_commit: str | None = None,
        actor: str | None = None,
        external_blobs: bool = True,
    ) -> MutationResult:
        """Run one ``.gq`` mutation query as one commit (none when nothing matched).

        ``external_blobs=False`` refuses a Blob value naming an external object (see :meth:`load`).

        Raises:
            ReadOnlyGraph: the graph was opened read-only.
            BadRequest: a syntax, type or parameter error (before any I/O), an insert/delete mix.
            NotFound: no branch ``branch``.
            KeyConflict: a strict insert met an existing id.
            PreconditionFailed: ``if_commit`` is not the branch head.
            ReadSetConflict: the branch moved while an update or delete was being written.
            ResourceLimit: an update or delete matches more than 8,192 rows of a table
                (:meth:`mutate_chunked` applies it in chunks).
            FormatBarrier: a migration barrier holds.
            RecoveryRequired: a commit was interrupted after an effect landed.
        """
        from omnigraph.engine.ops.mutate import mutate, select_query

        self._refuse_if_read_only("mutate")
        select_query(query, name)
        result = self._h.write(
            lambda graph: mutate(
                graph,
                query,
                name=name,
                params=dict(params or {}),
                branch=branch,
                if_commit=if_commit,
                actor=actor or self.actor,
                external_blobs=external_blobs,
            )
        )
        return result.result()

    def mutate_chunked(
        self,
        query: str,
        *,
        chunk_rows: int,
        params: Mapping[str, Any] | None = None,
        name: str | None = None,
        branch: str = MAIN,
        actor: str | None = None,
        announce: Callable[[str], None] | None = None,
    ) -> ChunkedMutationResult:
        """Run an update or delete that matches more rows than one commit carries, as several commits.

        There is one commit per chunk of at most ``chunk_rows`` matched rows (not atomic as a whole;
        resumable with :meth:`resume_mutation`). ``announce`` is told the operation id once it is
        recorded.

        Raises:
            ReadOnlyGraph: the graph was opened read-only.
            BadRequest: a syntax, type or parameter error, or an insert.
            NotFound: no branch ``branch``.
            FormatBarrier: a migration barrier holds.
            RecoveryRequired: a commit was interrupted after an effect landed.
        """
        from omnigraph.engine.ops.mutate import mutate_chunked

        self._refuse_if_read_only("mutate_chunked")
        chunked = partial(mutate_chunked, query=query, name=name, params=dict(params or {}), branch=branch, chunk_rows=chunk_rows)
        return self._h.write(partial(chunked, actor=actor or self.actor, announce=announce or _quiet))

    def resume_mutation(self, operation_id: str, *, announce: Callable[[str], None] | None = None) -> ChunkedMutationResult:
        """Continue the chunked mutation ``operation_id`` from its last committed chunk.

        Raises:
            ReadOnlyGraph: the graph was opened read-only.
            NotFound: no chunked mutation ``operation_id``.
            FormatBarrier: a migration barrier holds.
        """
        from omnigraph.engine.ops.mutate import mutate_chunked

        self._refuse_if_read_only("resume_mutation")
        return self._h.write(partial(mutate_chunked, query=None, actor=self.actor, resume=operation_id, announce=announce or _quiet))

    def create_branch(self, name: str, *, from_branch: str = MAIN) -> CreatedBranch:
        """Create branch ``name`` from the current head of ``from_branch``.

        Only the catalog is forked; tables fork on their first write.

        Raises:
            ReadOnlyGraph: the graph was opened read-only.
            BadRequest: an invalid or existing name.
            NotFound: no branch ``from_branch``.
            FormatBarrier: a migration barrier holds.
        """
        from omnigraph.engine.ops.branches import create_branch as create_engine_branch

        self._refuse_if_read_only("create_branch")
        branch = self._h.write(lambda graph: create_engine_branch(graph, name, from_branch))
        return CreatedBranch(name=branch.name, parent_branch=branch.parent_branch, incarnation=branch.incarnation)

    def delete_branch(self, name: str) -> DeletedBranch:
        """Delete branch ``name``.

        Raises:
            ReadOnlyGraph: the graph was opened read-only.
            BadRequest: ``main``, or a branch other branches were forked from.
            NotFound: no branch ``name``.
            ReadSetConflict: a write to the branch is in flight.
            FormatBarrier: a migration barrier holds.
        """
        from omnigraph.engine.ops.branches import delete_branch as delete_engine_branch

        self._refuse_if_read_only("delete_branch")
        self._h.write(lambda graph: delete_engine_branch(graph, name))
        return DeletedBranch(deleted=name)

    def merge(self, source: str, *, into: str = MAIN, actor: str | None = None) -> MergeResult:
        """Merge branch ``source`` into ``into`` three-way from their merge base.

        The result is up to date, a fast-forward, or one merge commit.

        Raises:
            ReadOnlyGraph: the graph was opened read-only.
            NotFound: no branch ``source`` or ``into``.
            MergeConflict: ids changed differently on both branches (all listed; nothing written).
            ResourceLimit: the merge would exceed a commit's limits.
            FormatBarrier: a migration barrier holds.
            RecoveryRequired: a commit was interrupted after an effect landed.
        """
        from omnigraph.engine.ops.merge import merge_branch

        self._refuse_if_read_only("merge")
        return self._h.write(lambda graph: merge_branch(graph, source, into, actor=actor or self.actor))

    def plan_schema(self, source: str) -> SchemaPlan:
        """The steps from the accepted schema to the schema text ``source`` (``omnigraph schema plan``); writes nothing.

        Raises:
            BadRequest: ``source`` is not a valid schema, or a step cannot be applied (every one
                listed in ``details["refused"]``).
        """
        from omnigraph.engine.ops.schema_change import plan_schema

        return plan_schema(self._h.reading(), source)

    def apply_schema(self, source: str, *, allow_data_loss: bool = False, actor: str | None = None) -> SchemaApplied:
        """Apply the schema text ``source`` to every branch (``omnigraph schema apply``): one commit per branch.

        Raises:
            ReadOnlyGraph: the graph was opened read-only.
            BadRequest: as :meth:`plan_schema`; a step drops data and ``allow_data_loss`` is
                False; existing rows break a new constraint (``details["problems"]``, ids per branch).
            FormatRefused: the graph is not upgraded (format 4).
            ReadSetConflict: a schema change is in progress or was interrupted (run ``omnigraph recover``).
            FormatBarrier: a migration barrier holds.
        """
        from omnigraph.engine.ops.schema_change import apply_schema

        self._refuse_if_read_only("apply_schema")
        applied = self._h.write(lambda graph: apply_schema(graph, source, allow_data_loss=allow_data_loss, actor=actor or self.actor))
        from omnigraph.engine.schema.catalog import Catalog

        self._h.accept_catalog(Catalog.from_source(source))
        return applied

    def fleet_membership(self, role: Literal["server", "load"], address: str | None = None) -> fleet.Membership:
        """A fleet-registry record for this process: how servers announce themselves to ``omnigraph-migrate``.

        ``start()`` creates and heartbeats it, ``stop()`` deletes it.
        """
        from omnigraph.engine.access import fleet

        _one_of("role", role, ("server", "load"))
        self._h.require_open()
        return fleet.Membership(self._h.store, self.program, role, self.writes_format, address)


def connect(
    uri: str,
    *,
    read_only: bool = False,
    actor: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    program: str = ENGINE,
    lazy: bool = False,
    on_recovery: Callable[[Sequence[RecoveryRecord]], None] | None = None,
    stamp_checks: StampChecks = "every_call",
) -> Graph:
    """:func:`omnigraph.open` (see there); its arguments are checked before anything is read."""
    _one_of("stamp_checks", stamp_checks, get_args(StampChecks))
    _of_type("actor", actor, (str, type(None)), "a string or None")
    profile = program_profile(program)
    graph = Graph(
        open_store(uri, storage_options),
        profile,
        read_only=read_only,
        actor=actor,
        on_recovery=on_recovery,
        stamp_checks=stamp_checks,
    )
    if lazy:
        return graph
    if read_only:
        graph._h.open_reader()
        return graph
    try:
        graph._h.open_writer()
    except FormatRefused as refused:
        if refused.details.get("stamp") not in profile.read_only_stamps:
            raise
        raise FormatRefused(
            f"{refused.message}. An application deployed ahead of the upgrade opens the graph with "
            f"omnigraph.open(..., lazy=True): it reads now, its writes raise FormatBarrier until the graph is "
            f"stamped 5, and Graph.wait_writable() waits for that",
            refused.details,
        ) from None
    return graph


def create(
    uri: str,
    schema: str,
    *,
    actor: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    program: str = ENGINE,
    strict: bool = False,
) -> Graph:
    """:func:`omnigraph.init` (see there) of the schema source ``schema``."""
    profile = program_profile(program)
    created = init_graph(open_store(uri, storage_options), schema, profile, actor or default_actor(), strict=strict)
    graph = Graph(created.store, profile, read_only=False, actor=actor, on_recovery=None)
    graph._h.adopt_writer(created)
    return graph
