"""``load``: a JSONL file into a branch as one graph commit (or one per ``--chunk-rows`` chunk).

Modes: ``append`` = strict insert (an existing id is ``key_conflict``, nothing written),
``merge`` = upsert by id, ``overwrite`` = replace the tables present in the file. Everything that
can be checked without committed state (types, in-file duplicates, ``@range``/``@check``) is
checked for the whole file before any write; checks against committed state (existing ids,
``@unique`` values, edge endpoints, composite ``@unique`` and ``@card``,
:mod:`omnigraph.engine.ops.constraints`) run inside each commit's prepare step, so a retry
re-validates against the fresh snapshot. A chunked load with edges also checks every edge's
endpoints against the branch before its first commit.

Existing ids of a strict insert: at format 5 the first table of a commit's first attempt is not
probed when the branch already owns its image (no fork). Its fenced strict merge
(``when_matched_fail``) fails with nothing landed on an id present at the pinned version, and,
being the commit's first effect, that disarms the intent and runs the attempt again
(:mod:`omnigraph.engine.ops.write`), which probes and refuses with ``key_conflict`` as before.
Every other table is probed before anything is armed, because a refusal after an earlier
table's effect landed would be ``recovery_required``.

Limits: strict-insert and upsert inputs stay within the per-commit limits of
:mod:`omnigraph.engine.ops.write` (rows and Arrow memory per table per commit, Blob cells counted by
their declared sizes, :mod:`omnigraph.engine.ops.blobs`; a row that counts more than the Arrow
limit on its own is staged alone and not counted); every chunk is checked before the first
write, and a refusal names a ``--chunk-rows`` checked to fit. A chunk's external Blob objects are
copied into it when its commit is prepared (a row staged alone: when its own Lance commit is
written). Overwrite is the bulk-replacement path and is not limited (but for the per-cell Blob
limit), and cannot be chunked (each chunk
would replace the previous one); it keeps external Blob URIs as references (after checking that
the objects exist). Chunks are cut from the file's records ordered node tables first, then edge
tables, so every edge's endpoints are committed no later than the edge.

Reading: the input (bytes, or a binary file read in blocks) is validated by
:func:`omnigraph.engine.records.read.read_records`, columnar where it can be and row by row where it must,
with the row parser's results and errors either way. The validated rows wait in a bounded
spool (:mod:`omnigraph.engine.records.record_set`); an overwrite streams them into its one Lance commit, a chunked
load reads them chunk by chunk. The checks against committed state work on Arrow columns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Literal

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.errors import BadRequest, KeyConflict, OmnigraphError, ResourceLimit
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import BranchSnapshot, TableEntry, lance_branch_name
from omnigraph.engine.ops.blobs import Staging, check_references, copy_external, plan_staging, refuse_external, split_alone, staged_bytes
from omnigraph.engine.ops.constraints import ChunkProbe, check_chunk_constraints, check_overwrite_constraints, present_ids
from omnigraph.engine.ops.load_changes import TableCounts, append_counts, merge_changes, overwrite_counts, upsert_counts
from omnigraph.engine.ops.write import (
    MAX_ARROW_BYTES,
    MAX_ROWS,
    AloneRow,
    CommitPlan,
    CommitResult,
    LimitWording,
    Prepare,
    TableWrite,
    WriteKind,
    check_table,
    commit,
)
from omnigraph.engine.records.jsonl_blocks import JsonlSource
from omnigraph.engine.records.read import read_records
from omnigraph.engine.records.record_set import EdgeEnds, RecordSet, check_edge_endpoints
from omnigraph.engine.results import LoadResult
from omnigraph.engine.storage.lance_io import open_pinned
from omnigraph.engine.storage.store import GraphStore

LoadMode = Literal["append", "merge", "overwrite"]
LOAD_MODES: tuple[LoadMode, ...] = ("append", "merge", "overwrite")
_WRITE_KIND: dict[LoadMode, WriteKind] = {"append": "insert", "merge": "upsert", "overwrite": "overwrite"}
_COPIED = (
    "{table_key}: the external Blob objects grew while they were copied: {actual} bytes in one commit exceed the "
    "limit of {limit}; nothing was written. Load again once the objects stop changing"
)


class _Chunk(msgspec.Struct, frozen=True):
    """One commit's share of the input: a row range ``(start, stop)`` per table, in table-key order."""

    ranges: dict[str, tuple[int, int]]


def _chunks(records: RecordSet, chunk_rows: int | None) -> list[_Chunk]:
    """The commits of a load: one for the whole input, or consecutive runs of ``chunk_rows`` records.

    The runs are taken from node tables (by type name) then edge tables (by type name).
    """
    if chunk_rows is None:
        return [_Chunk({key: (0, records.num_rows(key)) for key in records.table_keys()})]
    order = [(key, records.num_rows(key)) for key in records.load_order()]
    total = sum(count for _, count in order)
    chunks = []
    for begin in range(0, total, chunk_rows):
        ranges, position = {}, 0
        for key, count in order:
            low, high = max(begin, position), min(begin + chunk_rows, position + count)
            if low < high:
                ranges[key] = (low - position, high - position)
            position += count
        chunks.append(_Chunk(dict(sorted(ranges.items()))))
    return chunks or [_Chunk({})]


def _stagings(store: GraphStore, records: RecordSet, chunks: list[_Chunk]) -> list[dict[str, Staging]]:
    """Per chunk, per table, how its rows are staged (:func:`omnigraph.engine.ops.blobs.plan_staging`).

    Refuses a Blob cell over the per-cell limit and a row whose other columns exceed the
    per-commit limit on their own.
    """
    return [{key: _plan(store, records, key, span) for key, span in chunk.ranges.items()} for chunk in chunks]


def _plan(store: GraphStore, records: RecordSet, table_key: str, span: tuple[int, int]) -> Staging:
    rows, lines = records.rows(table_key, *span), records.column(table_key, "line", *span)
    return plan_staging(store, records.catalog.table(table_key), rows, MAX_ARROW_BYTES, lines)


def _over_rows(chunks: list[_Chunk]) -> tuple[str, str, int] | None:
    """The first (table key, ``rows``, count) of a chunk over the row limit (rows staged alone count too), else None."""
    for chunk in chunks:
        for key, (start, stop) in chunk.ranges.items():
            if stop - start > MAX_ROWS:
                return key, "rows", stop - start
    return None


def _over_bytes(chunks: list[_Chunk], stagings: list[dict[str, Staging]]) -> tuple[str, str, int] | None:
    """The first (table key, ``arrow_bytes``, bytes) of a chunk over the Arrow limit, else None."""
    for chunk, staging in zip(chunks, stagings, strict=True):
        for key in chunk.ranges:
            if staging[key].counted > MAX_ARROW_BYTES:
                return key, "arrow_bytes", staging[key].counted
    return None


def _advised_chunk_rows(store: GraphStore, records: RecordSet) -> int:
    """The largest ``--chunk-rows`` of 8192, 4096, ..., 1 whose every chunk fits the per-commit limits.

    Every one of them fits the row limit; one row always fits the Arrow limit (a row over it is
    staged alone, and one whose other columns alone exceed it was refused before), so the search
    ends.
    """
    rows = MAX_ROWS
    while rows > 1:
        chunks = _chunks(records, rows)
        if _over_bytes(chunks, _stagings(store, records, chunks)) is None:
            break
        rows //= 2
    return rows


def _check_limits(store: GraphStore, records: RecordSet, chunks: list[_Chunk], chunk_rows: int | None) -> list[dict[str, Staging]]:
    """Refuse (``resource_limit``) a commit over the per-commit limits in any table; the stagings of the chunks.

    The limits are :mod:`omnigraph.engine.ops.write`'s: the row limit counts every row (before
    any is read), the Arrow limit the rows not staged alone. The refusal names the
    ``--chunk-rows`` that makes every chunk fit (checked here, by the same rules), so the command
    it prints works.
    """
    over = _over_rows(chunks)
    if over is None:
        stagings = _stagings(store, records, chunks)
        over = _over_bytes(chunks, stagings)
        if over is None:
            return stagings
    table_key, resource, actual = over
    advised = _advised_chunk_rows(store, records)
    what = "rows" if resource == "rows" else "bytes of Arrow data"
    limit = MAX_ROWS if resource == "rows" else MAX_ARROW_BYTES
    now = "" if chunk_rows is None else f" (chunks of {chunk_rows} rows)"
    raise ResourceLimit(
        resource,
        limit,
        actual,
        f"{table_key}: {actual} {what} in one commit{now} exceed the limit of {limit}; nothing was written. Split the "
        f"load with --chunk-rows {advised} (one commit per chunk, not atomic as a whole)",
        table_key=table_key,
        chunk_rows=advised,
    )


def _staged(
    graph: Graph, records: RecordSet, table_key: str, span: tuple[int, int], staging: Staging, upsert: bool
) -> tuple[pa.Table, tuple[AloneRow, ...]]:
    """A strict-insert or upsert chunk of one table: its rows staged together, and those staged alone.

    The rows staged together have their external Blob objects copied in here.

    Sizes were checked by :func:`_check_limits`; the copies are checked again. A row staged
    alone has its external objects copied when its own commit is written.
    """
    table, lines = graph.catalog.table(table_key), records.column(table_key, "line", *span)
    together, alone = split_alone(records.rows(table_key, *span), staging)
    alone_set = set(staging.alone)
    kept_lines = lines.take(pa.array([i for i in range(len(lines)) if i not in alone_set], pa.int64())) if alone_set else lines
    rows = copy_external(graph.store, table, together, kept_lines)
    check_table(table_key, LimitWording(rows=_COPIED, arrow_bytes=_COPIED), arrow_bytes=staged_bytes(graph.store, table, rows))
    staged = tuple(
        AloneRow(partial(copy_external, graph.store, table, row, lines.slice(index, 1)), upsert)
        for index, row in zip(staging.alone, alone, strict=True)
    )
    return rows, staged


def _check_unique_committed(
    graph: Graph, entry: TableEntry, records: RecordSet, table_key: str, span: tuple[int, int], chunk_ids: pa.Array | pa.ChunkedArray
) -> None:
    """A non-null ``@unique`` value of the chunk must not belong to a committed row with another id.

    ``chunk_ids`` are the ids the chunk writes (a merge's matched id-less edges carry their
    committed ids).
    """
    table = graph.catalog.table(table_key)
    if not table.unique:
        return
    own_ids: set[str] | None = None
    lines = records.column(table_key, "line", *span)
    dataset = open_pinned(graph.store, entry.image)
    for prop in table.unique:
        values = records.column(table_key, prop, *span)
        given = values.is_valid()
        if not pc.any(given).as_py():
            continue
        values, value_lines = values.filter(given), lines.filter(given)
        hits = dataset.to_table(columns=["id", prop], filter=pc.field(prop).isin(values))
        for committed_id, value in sorted(zip(hits.column("id").to_pylist(), hits.column(prop).to_pylist(), strict=True)):
            own_ids = own_ids if own_ids is not None else set(chunk_ids.to_pylist())
            if committed_id not in own_ids:
                line = value_lines[pc.index(values, pa.scalar(value, values.type)).as_py()].as_py()
                raise BadRequest(
                    f"line {line}: {table.type_name}.{prop} value {value!r} is already used by id {committed_id!r} (@unique)",
                    {"line": line, "type_name": table.type_name, "property": prop, "existing_id": committed_id},
                )


def _committed_lookup(graph: Graph, snapshot: BranchSnapshot, replaced: set[str]) -> Callable[[str, list[str]], set[str]]:
    def lookup(type_name: str, ids: list[str]) -> set[str]:
        table_key = f"node:{type_name}"
        if table_key in replaced:
            return set()
        return present_ids(graph, snapshot.table(table_key), ids)

    return lookup


def _check_endpoints(graph: Graph, records: RecordSet, chunk: _Chunk, lookup: Callable[[str, list[str]], set[str]]) -> None:
    """Every edge of the chunk has its endpoints among the chunk's nodes or the committed ones."""
    edges: list[EdgeEnds] = []
    for table_key, span in chunk.ranges.items():
        table = graph.catalog.table(table_key)
        if table.kind == "edge":
            assert table.from_type is not None and table.to_type is not None
            edges.append(
                EdgeEnds(
                    table.type_name,
                    table.from_type,
                    table.to_type,
                    src=records.column(table_key, "src", *span),
                    dst=records.column(table_key, "dst", *span),
                    lines=records.column(table_key, "line", *span),
                )
            )
    if not edges:
        return
    node_ids = {
        graph.catalog.table(key).type_name: records.column(key, "id", *span)
        for key, span in chunk.ranges.items()
        if key.startswith("node:")
    }
    check_edge_endpoints(sorted(edges, key=lambda edge: edge.edge_type), node_ids, lookup)


def _check_dangling_edges(graph: Graph, snapshot: BranchSnapshot, records: RecordSet, replaced: set[str]) -> None:
    """Overwrite: committed edges of tables not in the file must keep their endpoints."""
    for table_key in graph.catalog.table_keys():
        table = graph.catalog.table(table_key)
        if table.kind != "edge" or table_key in replaced:
            continue
        for column, node_type in (("src", table.from_type), ("dst", table.to_type)):
            node_key = f"node:{node_type}"
            if node_key not in replaced:
                continue
            entry = snapshot.table(table_key)
            dataset = open_pinned(graph.store, entry.image)
            values = dataset.to_table(columns=["id", column])
            kept = values.filter(pc.invert(pc.is_in(values.column(column), value_set=records.column(node_key, "id"))))
            if kept.num_rows:
                first = kept.sort_by([("id", "ascending"), (column, "ascending")]).slice(0, 1).to_pylist()[0]
                edge_id, endpoint = first["id"], first[column]
                raise BadRequest(
                    f"overwriting node:{node_type} would leave committed {table_key} {edge_id!r} "
                    f"without its {column} {endpoint!r}; include that edge table or the node",
                    {"table_key": table_key, "edge_id": edge_id, "missing": endpoint},
                )


_Payload = dict[str, tuple[TableCounts, frozenset[str]]]
"""Per table key of a commit: its counts, and (merge) the ids it wrote or matched."""


def _prepare_for(
    graph: Graph,
    records: RecordSet,
    chunk: _Chunk,
    staging: dict[str, Staging],
    mode: LoadMode,
    probe: ChunkProbe,
    message: str,
    claimed: Mapping[str, frozenset[str]],
) -> Prepare[_Payload]:
    replaced = set(chunk.ranges) if mode == "overwrite" else set()
    fenced = graph.profile.router.with_pk

    def prepare(snapshot: BranchSnapshot, previous: CommitPlan[_Payload] | None) -> CommitPlan[_Payload]:
        _check_endpoints(graph, records, chunk, _committed_lookup(graph, snapshot, replaced))
        writes: list[TableWrite] = []
        incoming: dict[str, pa.Table] = {}
        payload: _Payload = {}
        own_branch = lance_branch_name(snapshot.branch)
        first_effect = min(chunk.ranges, default=None)  # the commit writes its tables in key order
        for table_key, span in chunk.ranges.items():
            entry = snapshot.table(table_key)
            table = graph.catalog.table(table_key)
            alone_rows = mode != "overwrite" and bool(staging[table_key].alone)  # the fence covers the first commit only
            fenced_first = fenced and previous is None and table_key == first_effect and entry.table_branch == own_branch and not alone_rows
            if mode == "append" and not fenced_first:
                ids = records.column(table_key, "id", *span)
                existing = probe.existing(entry, ids, span[0], partial(records.column, table_key, "id", span[0]))
                if existing:
                    raise KeyConflict(table.kind, table.type_name, min(existing))
            if mode == "overwrite":
                ids = records.column(table_key, "id", *span)
                payload[table_key] = (overwrite_counts(graph, entry, ids), frozenset())
                writes.append(TableWrite(table_key, "overwrite", records.reader(table_key)))
                continue
            rows, alone = _staged(graph, records, table_key, span, staging[table_key], upsert=mode == "merge")
            # Rows staged alone have a Blob property: their ids are never matched, only classified.
            alone_ids = records.column(table_key, "id", *span).take(pa.array(staging[table_key].alone, pa.int64()))
            if mode == "merge":
                generated = records.column(table_key, "generated", *span) if table.kind == "edge" else None
                changes = merge_changes(graph, table, entry, rows, generated, claimed.get(table_key, frozenset()))
                rows, ids_seen = changes.rows, changes.ids | frozenset(alone_ids.to_pylist())
                counts = changes.counts.plus(upsert_counts(graph, entry, alone_ids))
            else:
                counts, ids_seen = append_counts(rows.num_rows + len(alone)), frozenset()
            _check_unique_committed(graph, entry, records, table_key, span, pa.chunked_array([*rows.column("id").chunks, alone_ids]))
            incoming[table_key] = records.rows(table_key, *span) if alone else rows
            payload[table_key] = (counts, ids_seen)
            writes.append(TableWrite(table_key, _WRITE_KIND[mode], rows, alone=alone))
        if mode == "overwrite":
            _check_dangling_edges(graph, snapshot, records, replaced)
            check_overwrite_constraints(graph, snapshot, records)
        else:
            check_chunk_constraints(graph, snapshot, records, chunk.ranges, incoming, upsert=mode == "merge")
        return CommitPlan(tuple(writes), (snapshot.head.commit_id,), message, payload)

    return prepare


def load(
    graph: Graph,
    data: JsonlSource,
    *,
    mode: LoadMode,
    branch: str,
    actor: str,
    chunk_rows: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> LoadResult:
    """Validate ``data`` (JSONL bytes, or a binary file read in blocks) and publish it to ``branch``.

    See the module docstring.
    """
    check_load_options(mode, chunk_rows)
    graph.manifest.require_branch(branch)
    with read_records(data, graph.catalog, with_pk=graph.profile.router.with_pk) as records:
        return load_records(graph, records, mode=mode, branch=branch, actor=actor, chunk_rows=chunk_rows, progress=progress)


def load_records(
    graph: Graph,
    records: RecordSet,
    *,
    mode: LoadMode,
    branch: str,
    actor: str,
    chunk_rows: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    external_blobs: bool = True,
) -> LoadResult:
    """:func:`load` of records already read (the caller keeps and closes them).

    The records were read by :func:`omnigraph.engine.records.read.read_records` against this
    graph's catalog and ``with_pk``: a server parses and validates a body before it takes its
    write lock, then publishes under it. Without ``external_blobs`` a Blob cell naming an
    external object is refused before anything else.
    """
    check_load_options(mode, chunk_rows)
    if not external_blobs:
        for table_key in records.table_keys():
            refuse_external(graph.catalog.table(table_key), records.reader(table_key), records.column(table_key, "line"))
    graph.manifest.require_branch(branch)
    chunks = _chunks(records, chunk_rows)
    stagings: list[dict[str, Staging]] = [{} for _ in chunks]
    if mode != "overwrite":
        stagings = _check_limits(graph.store, records, chunks, chunk_rows)
    else:
        for table_key in records.table_keys():
            check_references(graph.store, graph.catalog.table(table_key), records.reader(table_key), records.column(table_key, "line"))
    if len(chunks) > 1 and any(graph.catalog.table(key).kind == "edge" for key in records.table_keys()):
        whole = _Chunk({key: (0, records.num_rows(key)) for key in records.table_keys()})
        _check_endpoints(graph, records, whole, _committed_lookup(graph, graph.manifest.snapshot(branch), set()))
    return _publish(graph, records, chunks, stagings, mode, branch, actor, progress)


def check_load_options(mode: LoadMode, chunk_rows: int | None) -> None:
    """``bad_request`` for a bad mode, a bad ``chunk_rows``, or ``chunk_rows`` with ``overwrite``.

    A mode must be one of :data:`LOAD_MODES`; ``chunk_rows`` None or an integer of at least 1;
    with ``overwrite`` each chunk would replace the last. Reads nothing: callers check the options before any input or storage is read.
    """
    if not isinstance(mode, str) or mode not in LOAD_MODES:
        raise BadRequest(f"mode must be one of {', '.join(LOAD_MODES)}, got {mode!r}", {"mode": repr(mode), "allowed": list(LOAD_MODES)})
    if chunk_rows is not None and (isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int)):
        raise BadRequest(f"chunk_rows must be an integer or None, got {chunk_rows!r}", {"chunk_rows": repr(chunk_rows)})
    if chunk_rows is not None and chunk_rows < 1:
        raise BadRequest("--chunk-rows must be at least 1")
    if chunk_rows is not None and mode == "overwrite":
        raise BadRequest("--chunk-rows cannot be used with --mode overwrite: each chunk would replace the last")


def _publish(
    graph: Graph,
    records: RecordSet,
    chunks: list[_Chunk],
    stagings: list[dict[str, Staging]],
    mode: LoadMode,
    branch: str,
    actor: str,
    progress: Callable[[int, int], None] | None,
) -> LoadResult:
    """One commit per chunk, in order; a failure names the chunks already committed."""
    commits: list[CommitResult] = []
    rows: dict[str, int] = {}
    counts: dict[str, TableCounts] = {}
    claimed: dict[str, frozenset[str]] = {}
    probe = ChunkProbe(graph)
    for index, (chunk, staging) in enumerate(zip(chunks, stagings, strict=True)):
        message = f"load --mode {mode}" + (f" (chunk {index + 1}/{len(chunks)})" if len(chunks) > 1 else "")
        try:
            prepare = _prepare_for(graph, records, chunk, staging, mode, probe, message, claimed)
            written = commit(graph, branch, prepare, actor=actor, catalog=records.catalog)
        except OmnigraphError as error:
            if commits:
                error.message += (
                    f" ({len(commits)} of {len(chunks)} chunks were committed before this failure: "
                    f"{', '.join(c.commit_id for c in commits)}; later chunks were not)"
                )
                error.details["committed_chunks"] = [c.commit_id for c in commits]
                error.details["chunks_total"] = len(chunks)
            raise
        if written.published is not None:
            commits.append(written.published)
            probe.landed({key: stop for key, (_, stop) in chunk.ranges.items()})
        for table_key, (table_counts, ids) in written.plan.payload.items():
            counts[table_key] = counts.get(table_key, TableCounts()).plus(table_counts)
            if ids and len(chunks) > 1:
                claimed[table_key] = claimed.get(table_key, frozenset()) | ids
        for table_key, (start, stop) in chunk.ranges.items():
            rows[table_key] = rows.get(table_key, 0) + stop - start
        if progress is not None:
            progress(index + 1, len(chunks))
    return LoadResult(
        branch=branch,
        mode=mode,
        commits=tuple(c.commit_id for c in commits),
        manifest_version=commits[-1].manifest_version if commits else None,
        rows=dict(sorted(rows.items())),
        changes={key: counts[key].as_dict() for key in sorted(counts)},
    )
