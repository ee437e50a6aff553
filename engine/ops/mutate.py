"""``mutate``: run one ``.gq`` query against a branch as (at most) one graph commit, or in chunks.

Semantics (see ``docs/mutations.md``):

* keyed node ``insert`` = upsert by the derived id, the whole row replaced (omitted nullable
  properties become null); unkeyed node and edge ``insert`` = strict insert with a generated id
  (or an explicit ``id:``, as load's ``data.id``); an attempted id that exists is ``key_conflict``;
* ``update`` (nodes only) rewrites the matched rows with the assigned properties;
* ``delete`` removes the matched rows; a node delete also removes every edge whose ``src`` or
  ``dst`` is a deleted node (both directions, every edge type over that node type);
* statements run in order over the committed snapshot plus the query's own pending rows
  (read-your-writes: a pending row shadows the committed row with its id, a pending delete hides
  it); one commit at the end; a query that writes nothing publishes no commit (``commit`` None);
* edge endpoints and ``@unique`` are checked on the result before anything is armed
  (:func:`omnigraph.engine.ops.merge.check_merged`, the same checks as branch merge).

This module selects and binds the query and runs it as one commit (:func:`mutate`) or as a chain
of commits (:func:`mutate_chunked`); the evaluation itself (what each statement stages) is
:mod:`omnigraph.engine.ops.mutate_eval`.

Limits: per table, strict-insert plus upsert rows (an update's matched rows included, counted
while matching) and their Arrow data within the per-commit limits
(:mod:`omnigraph.engine.ops.write`; a row that counts more than the Arrow limit on its own is
staged alone, each Blob cell within the per-cell limit, :mod:`omnigraph.engine.ops.blobs`), else
``resource_limit`` before any intent is armed. Deleted ids are not staged rows and are not
limited.

Conflicts (all through :func:`omnigraph.engine.ops.write.commit`, which re-runs ``prepare`` on a
fresh snapshot after a storage conflict that landed nothing): an insert-only query is
re-prepared (upserts retried, strict inserts re-probed: ``key_conflict`` only if an attempted id
now exists, generated ids stay the same, never turned into an upsert); a query with an
``update`` or ``delete`` read the branch, so a re-prepare on a moved head is
``read_set_conflict`` ``{member, expected, actual}``.

Conditional mutation (``if_commit``): the branch head must be that commit at every prepare (the
last one runs under the branch's lease), else ``precondition_failed`` ``{expected, actual}`` with
nothing written, also for a query that would write nothing. Its plan is never rebased
(``CommitPlan.rebase`` False): a publish that loses to another head rolls its effects back and
prepares again, which refuses. So of several conditional mutations on one head exactly one
publishes. A chunked mutation takes no ``if_commit`` (it is many commits).

Chunks (``mutate --chunk-rows N``, :func:`mutate_chunked`): an update- or delete-only query
applied as a chain of atomic commits, for a query that matches more rows than one commit may
carry. Each statement runs in chunks: a chunk is the next at most ``N`` committed rows it
matches whose id is greater than the last id done (ids ascending; an update never changes an id,
so the order is stable and a row is updated once even when the update keeps it matching),
evaluated on a fresh snapshot like any mutation and published as one graph commit
(``mutate NAME (chunk K)``). A statement is done when a chunk matches nothing; statements run in
order, so a later one sees what the earlier ones committed. ``now()`` stands for one instant in
every chunk. The query as a whole is **not** atomic: a crash or a conflict leaves the chunks
committed so far, and the report says which.

Progress is durable: before the first chunk the operation writes its start
(:class:`ChunkedStart`: the query source, name, parameters, branch, chunk size) and after each
commit one :class:`ChunkDone` record (statement, last id, commit, rows), create-if-absent, under
``__recovery/chunked/<operation id>/`` (:data:`PROGRESS_DIR`). ``resume=OPERATION`` continues an
operation from its last record with its own source and parameters; a crash between a commit and
its record repeats that one chunk, whose update writes the same values again (a delete finds
nothing left). The progress of a finished operation stays as its record. A chunk that is refused
(``read_set_conflict`` when the branch moved while it was written, ``resource_limit``, ...) is
raised with ``details.chunked``: the operation id, the chunks committed and the command that
resumes it. Failpoint ``mutate.after_chunk``: a chunk is committed and recorded, the next not
begun.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from lance.blob import Blob
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from omnigraph.engine.errors import BadRequest, NotFound, OmnigraphError, PreconditionFailed, ReadSetConflict
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.gq.checker import BoundQuery, check_mix, check_query
from omnigraph.engine.gq.parser import choose_query
from omnigraph.engine.gq.syntax import Query
from omnigraph.engine.graph import Graph, default_actor
from omnigraph.engine.manifest.rows import BranchSnapshot
from omnigraph.engine.ops.blobs import BYTES_ONLY
from omnigraph.engine.ops.mutate_eval import Affected, Evaluation, Window
from omnigraph.engine.ops.write import CommitPlan, CommitResult, commit
from omnigraph.engine.results import ChunkedMutationResult, MutationResult
from omnigraph.engine.schema.ids import new_ulid
from omnigraph.engine.storage.names import RECOVERY_DIR
from omnigraph.engine.storage.store import canonical_json


class MutationOutcome(msgspec.Struct, frozen=True):
    """What a mutation's commit did, the commit itself included (None when it wrote nothing).

    :meth:`result` is the answer an application gets.
    """

    query: str
    branch: str
    affected_nodes: int
    affected_edges: int
    distinct_nodes: int
    distinct_edges: int
    commit: CommitResult | None

    def result(self) -> MutationResult:
        """The mutation's result: ``affected_*`` per statement, ``distinct_*`` each row once."""
        return MutationResult(
            affected_nodes=self.affected_nodes,
            affected_edges=self.affected_edges,
            distinct_nodes=self.distinct_nodes,
            distinct_edges=self.distinct_edges,
            commit=self.commit.commit_id if self.commit else None,
        )

    def document(self) -> dict[str, Any]:
        """The ``mutate --json`` document (:meth:`result`'s)."""
        return self.result().to_dict()


def select_query(query: str, name: str | None) -> Query:
    """Parse the ``.gq`` text ``query`` and pick the mutation ``name``.

    ``name`` is optional when the text declares one query. A read query is refused (it names
    ``omnigraph query``); so is the insert/update + delete mix, before any I/O.
    """
    chosen = choose_query(query, name, "mutation")
    check_mix(chosen)
    return chosen


def now_utc() -> dt.datetime:
    """The current instant as naive UTC with millisecond precision (what a DateTime stores)."""
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def mutate(
    graph: Graph,
    query: str,
    *,
    name: str | None = None,
    params: dict[str, Any] | None = None,
    branch: str,
    if_commit: str | None = None,
    actor: str,
    external_blobs: bool = True,
) -> MutationOutcome:
    """Run the mutation ``name`` of the ``.gq`` text ``query`` on ``branch``; see the module docstring.

    Without ``external_blobs`` a Blob value naming an external object is refused before any I/O.
    """
    catalog = graph.catalog
    bound = check_query(select_query(query, name), catalog, params or {}, now_utc())
    if not external_blobs:
        _refuse_external(bound)
    graph.manifest.require_branch(branch)
    ids = _generated_ids(bound)
    reads_branch = any(statement.verb != "insert" for statement in bound.statements)

    def prepare(snapshot: BranchSnapshot, previous: CommitPlan[Affected] | None) -> CommitPlan[Affected]:
        head = snapshot.head.commit_id
        if if_commit is not None and head != if_commit:
            raise PreconditionFailed(
                f"branch {branch!r} is at commit {head}, not {if_commit} (the if-commit condition); nothing was "
                "written: read the branch again and decide on its new head",
                {"expected": if_commit, "actual": head},
            )
        if reads_branch and previous is not None and head != previous.base_head:
            raise ReadSetConflict(
                f"branch {branch!r} moved from {previous.base_head} to {head} while query {bound.name!r} was "
                "being written; its update/delete matched rows of the old head; nothing was written, "
                "run the mutation again",
                {"member": branch, "expected": previous.base_head, "actual": head},
            )
        staged = Evaluation(graph, snapshot, ids).run(bound)
        return CommitPlan(staged.writes(), (head,), f"mutate {bound.name}", staged.affected(), rebase=if_commit is None)

    done = commit(graph, branch, prepare, actor=actor, catalog=catalog)
    affected = done.plan.payload
    return MutationOutcome(
        bound.name, branch, affected.nodes, affected.edges, affected.distinct_nodes, affected.distinct_edges, done.published
    )


def _refuse_external(bound: BoundQuery) -> None:
    for statement in bound.statements:
        for prop, value in sorted(statement.values.items()):
            if isinstance(value, Blob) and value.uri is not None:
                raise BadRequest(
                    f"line {statement.line}: {statement.table.type_name}.{prop} " + BYTES_ONLY.format(uri=value.uri),
                    {"line": statement.line, "type_name": statement.table.type_name, "property": prop},
                )


def _generated_ids(bound: BoundQuery) -> dict[int, str]:
    """One id per strict insert without an explicit id, minted once so a re-prepare reuses it."""
    return {
        index: new_ulid()
        for index, statement in enumerate(bound.statements)
        if statement.verb == "insert" and statement.table.key is None and "id" not in statement.values
    }


PROGRESS_DIR = f"{RECOVERY_DIR}/chunked"


class ChunkedStart(BaseModel):
    """What a chunked mutation was asked to do (record ``00000000.json`` of its progress)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    operation_id: str
    query: str
    name: str
    params: dict[str, Any]
    branch: str
    chunk_rows: int = Field(ge=1)
    actor: str
    now: str  # the instant now() stands for in every chunk, ISO 8601


class ChunkDone(BaseModel):
    """One committed chunk: statement index, the last id it did, its commit and its counts."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    statement: int
    last_id: str
    commit_id: str
    nodes: int
    edges: int


@dataclass
class ChunkedProgress:
    """What a chunked mutation has committed so far (every chunk, in order).

    :meth:`result` is the answer an application gets once it is done.
    """

    operation_id: str
    query: str
    branch: str
    chunks: list[ChunkDone] = field(default_factory=list)

    def result(self) -> ChunkedMutationResult:
        """The chunked mutation's result: the counts and every chunk's commit, so far."""
        return ChunkedMutationResult(
            operation_id=self.operation_id,
            query=self.query,
            branch=self.branch,
            affected_nodes=sum(c.nodes for c in self.chunks),
            affected_edges=sum(c.edges for c in self.chunks),
            commits=tuple(c.commit_id for c in self.chunks),
            chunks=tuple(c.model_dump(mode="json") for c in self.chunks),
        )


def resume_command(uri: str, operation_id: str) -> str:
    """The command that continues chunked mutation ``operation_id`` of the graph at ``uri``."""
    return f"omnigraph mutate --resume {operation_id} {uri}"


def _record_path(operation_id: str, seq: int) -> str:
    return f"{PROGRESS_DIR}/{operation_id}/{seq:08d}.json"


def _progress(graph: Graph, operation_id: str) -> tuple[ChunkedStart, list[ChunkDone]]:
    """The start and the chunks done of operation ``operation_id``; ``not_found`` if it has none."""
    directory = f"{PROGRESS_DIR}/{operation_id}"
    names = sorted(n for n in graph.store.list(directory) if n.endswith(".json") and not n.startswith("."))
    if not names:
        raise NotFound(f"no chunked mutation {operation_id!r} on {graph.store.uri}", {"operation_id": operation_id})
    try:
        start = ChunkedStart.model_validate_json(graph.store.read_bytes(f"{directory}/{names[0]}"))
        done = [ChunkDone.model_validate_json(graph.store.read_bytes(f"{directory}/{n}")) for n in names[1:]]
    except ValidationError as error:
        raise BadRequest(f"the progress of chunked mutation {operation_id} is unreadable: {error}") from error
    return start, done


def _bound(query: str, name: str, params: dict[str, Any], now: dt.datetime, graph: Graph) -> BoundQuery:
    """The checked query; ``bad_request`` for one that inserts (only updates and deletes chunk)."""
    bound = check_query(select_query(query, name), graph.catalog, params, now)
    if any(statement.verb == "insert" for statement in bound.statements):
        raise BadRequest(
            f"--chunk-rows applies to update-only and delete-only queries; {bound.name!r} inserts "
            "(split it into several mutations, or write the rows as a JSONL file for `load --chunk-rows`); nothing "
            "was written",
            {"query": bound.name},
        )
    return bound


def mutate_chunked(
    graph: Graph,
    query: str | None,
    *,
    name: str | None = None,
    params: dict[str, Any] | None = None,
    branch: str = "main",
    chunk_rows: int | None = None,
    actor: str | None = None,
    resume: str | None = None,
    announce: Callable[[str], None] = lambda _line: None,
) -> ChunkedMutationResult:
    """Run (or, with ``resume``, continue) a chunked mutation; see the module docstring.

    The query is checked before its start is recorded, so a refused one writes nothing; once it
    is recorded, ``announce`` gets one line naming the command that resumes it. Failpoint
    ``mutate.after_chunk``: a chunk is committed and recorded, the next not begun.
    """
    if resume is None:
        if query is None or chunk_rows is None:
            raise BadRequest("a chunked mutation needs a query and --chunk-rows (or --resume OPERATION)")
        graph.manifest.require_branch(branch)
        now = now_utc()
        query_name = _bound(query, select_query(query, name).name, params or {}, now, graph).name
        start = ChunkedStart(
            operation_id=new_ulid(),
            query=query,
            name=query_name,
            params=params or {},
            branch=branch,
            chunk_rows=chunk_rows,
            actor=actor or default_actor(),
            now=now.isoformat(),
        )
        graph.store.put_if_absent(_record_path(start.operation_id, 0), canonical_json(start))
        done: list[ChunkDone] = []
    else:
        start, done = _progress(graph, resume)
    bound = _bound(start.query, start.name, start.params, dt.datetime.fromisoformat(start.now), graph)
    result = ChunkedProgress(start.operation_id, start.name, start.branch, list(done))
    announce(
        f"chunked mutation {start.operation_id} of {start.name!r} on {start.branch}, {len(done)} chunk(s) done; "
        f"if it is interrupted, `{resume_command(graph.store.uri, start.operation_id)}` continues it"
    )
    first = done[-1].statement if done else 0
    for index in range(first, len(bound.statements)):
        after = done[-1].last_id if done and done[-1].statement == index else None
        while (chunk := _one_chunk(graph, start, bound, index, after, result)) is not None:
            result.chunks.append(chunk)
            graph.store.put_if_absent(_record_path(start.operation_id, len(result.chunks)), canonical_json(chunk))
            failpoint("mutate.after_chunk")
            after = chunk.last_id
    return result.result()


def _one_chunk(
    graph: Graph, start: ChunkedStart, bound: BoundQuery, index: int, after: str | None, result: ChunkedProgress
) -> ChunkDone | None:
    """Commit the next chunk of statement ``index`` after id ``after``; None when nothing is left."""
    single = msgspec.structs.replace(bound, statements=(bound.statements[index],))
    window = Window(after, start.chunk_rows)

    def prepare(
        snapshot: BranchSnapshot, _previous: CommitPlan[tuple[Affected, str | None]] | None
    ) -> CommitPlan[tuple[Affected, str | None]]:
        evaluation = Evaluation(graph, snapshot, {}, window).run(single)
        message = f"mutate {bound.name} (chunk {len(result.chunks) + 1})"
        return CommitPlan(evaluation.writes(), (snapshot.head.commit_id,), message, (evaluation.affected(), evaluation.window_last))

    try:
        done = commit(graph, start.branch, prepare, actor=start.actor)
    except OmnigraphError as error:
        error.details["chunked"] = {
            **result.result().to_dict(),
            "resume": resume_command(graph.store.uri, start.operation_id),
        }
        error.message += (
            f"; {len(result.chunks)} chunk(s) of {start.name!r} were committed before this one "
            f"(`{resume_command(graph.store.uri, start.operation_id)}` continues after them)"
        )
        raise
    affected, last = done.plan.payload
    if done.published is None or last is None:
        return None
    return ChunkDone(statement=index, last_id=last, commit_id=done.published.commit_id, nodes=affected.nodes, edges=affected.edges)
