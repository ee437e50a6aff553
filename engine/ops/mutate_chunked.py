"""``mutate --chunk-rows N``: an update- or delete-only query applied as a chain of atomic commits.

For a query that matches more rows than one commit may carry (:mod:`omnigraph.engine.ops.limits`), each
statement runs in chunks: a chunk is the next at most ``N`` committed rows it matches whose id is
greater than the last id done (ids ascending; an update never changes an id, so the order is
stable and a row is updated once even when the update keeps it matching), evaluated on a fresh
snapshot like any mutation and published as one graph commit (``mutate NAME (chunk K)``). A
statement is done when a chunk matches nothing; statements run in order, so a later one sees
what the earlier ones committed. The query as a whole is **not** atomic: a crash or a conflict
leaves the chunks committed so far, and the report says which.

Progress is durable: before the first chunk the operation writes its start
(:class:`ChunkedStart`: the query source, name, parameters, branch, chunk size) and after each
commit one :class:`ChunkDone` record (statement, last id, commit, rows), create-if-absent, under
``__recovery/chunked/<operation id>/`` (:data:`PROGRESS_DIR`). ``resume=OPERATION`` continues an
operation from its last record with its own source and parameters; a crash between a commit and
its record repeats that one chunk, whose update writes the same values again (a delete finds
nothing left). The progress of a finished operation stays as its record. A chunk that is refused
(``read_set_conflict`` when the branch moved while it was written, ``resource_limit``, ...) is
raised with ``details.chunked``: the operation id, the chunks committed and the command that
resumes it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from omnigraph.engine.errors import BadRequest, NotFound, OmnigraphError
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.gq.checker import BoundQuery, check_query
from omnigraph.engine.graph import Graph, default_actor
from omnigraph.engine.manifest.rows import BranchSnapshot
from omnigraph.engine.ops.mutate import now_utc, select_query
from omnigraph.engine.ops.mutate_eval import Affected, Evaluation, Window
from omnigraph.engine.ops.write import commit
from omnigraph.engine.ops.write_plan import CommitPlan
from omnigraph.engine.schema.ids import new_ulid
from omnigraph.engine.storage.names import RECOVERY_DIR
from omnigraph.engine.storage.store import canonical_json

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
class ChunkedResult:
    """What a chunked mutation committed (every chunk, in order)."""

    operation_id: str
    query: str
    branch: str
    chunks: list[ChunkDone] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return {
            "operation_id": self.operation_id,
            "query": self.query,
            "branch": self.branch,
            "affected_nodes": sum(c.nodes for c in self.chunks),
            "affected_edges": sum(c.edges for c in self.chunks),
            "commits": [c.commit_id for c in self.chunks],
            "chunks": [c.model_dump(mode="json") for c in self.chunks],
        }


def resume_command(uri: str, operation_id: str) -> str:
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


def _bound(source: str, name: str, params: dict[str, Any], now: dt.datetime, graph: Graph) -> BoundQuery:
    """The checked query; ``bad_request`` for one that inserts (only updates and deletes chunk)."""
    bound = check_query(select_query(source, name), graph.catalog, params, now)
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
    source: str | None,
    *,
    name: str | None = None,
    params: dict[str, Any] | None = None,
    branch: str = "main",
    chunk_rows: int | None = None,
    actor: str | None = None,
    resume: str | None = None,
    announce: Callable[[str], None] = lambda _line: None,
) -> ChunkedResult:
    """Run (or, with ``resume``, continue) a chunked mutation; see the module docstring. The
    query is checked before its start is recorded, so a refused one writes nothing; once it is
    recorded, ``announce`` gets one line naming the command that resumes it. Failpoint
    ``mutate.after_chunk``: a chunk is committed and recorded, the next not begun."""
    if resume is None:
        if source is None or chunk_rows is None:
            raise BadRequest("a chunked mutation needs a query and --chunk-rows (or --resume OPERATION)")
        graph.manifest.require_branch(branch)
        now = now_utc()
        query_name = _bound(source, select_query(source, name).name, params or {}, now, graph).name
        start = ChunkedStart(
            operation_id=new_ulid(),
            query=source,
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
    result = ChunkedResult(start.operation_id, start.name, start.branch, list(done))
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
    return result


def _one_chunk(
    graph: Graph, start: ChunkedStart, bound: BoundQuery, index: int, after: str | None, result: ChunkedResult
) -> ChunkDone | None:
    """Commit the next chunk of statement ``index`` after id ``after``; None when nothing is left."""
    single = replace(bound, statements=(bound.statements[index],))
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
            **result.document(),
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
