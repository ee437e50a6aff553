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
their declared sizes, :mod:`omnigraph.engine.ops.blobs`); every chunk is checked before the first
write, and a chunk's external Blob objects are copied into it when its commit is prepared.
Overwrite is the bulk-replacement path and is not limited, and cannot be chunked (each chunk
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
from dataclasses import dataclass
from functools import partial
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.errors import BadRequest, KeyConflict, OmnigraphError
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import BranchSnapshot, TableEntry, lance_branch_name
from omnigraph.engine.ops.blobs import check_references, copy_external, refuse_external, staged_bytes
from omnigraph.engine.ops.constraints import ChunkProbe, check_chunk_constraints, check_overwrite_constraints, present_ids
from omnigraph.engine.ops.load_changes import TableCounts, append_counts, merge_changes, overwrite_counts
from omnigraph.engine.ops.write import MAX_ROWS, CommitPlan, CommitResult, LimitWording, Prepare, TableWrite, WriteKind, check_table, commit
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


@dataclass(frozen=True)
class _Chunk:
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


def _check_limits(store: GraphStore, records: RecordSet, chunks: list[_Chunk], chunked: bool) -> None:
    """Refuse (``resource_limit``) a commit over the per-commit limits in any table.

    The limits are :mod:`omnigraph.engine.ops.write`'s; the refusal names the option that splits
    the commit.
    """
    hint = "" if chunked else f"; split the load with --chunk-rows {MAX_ROWS} (one commit per chunk)"
    wording = LimitWording(
        rows="{table_key}: {actual} rows in one commit exceed the limit of {limit}" + hint,
        arrow_bytes="{table_key}: {actual} bytes of Arrow data in one commit exceed the limit of {limit}"
        + (hint or "; use a smaller --chunk-rows"),
    )
    for chunk in chunks:
        for table_key, (start, stop) in chunk.ranges.items():
            check_table(table_key, wording, rows=stop - start)
            table, rows = records.catalog.table(table_key), records.rows(table_key, start, stop)
            lines = records.column(table_key, "line", start, stop)
            check_table(table_key, wording, arrow_bytes=staged_bytes(store, table, rows, lines))


def _staged(graph: Graph, records: RecordSet, table_key: str, span: tuple[int, int]) -> pa.Table:
    """A strict-insert or upsert chunk of one table with its external Blob objects copied in.

    Their sizes were checked by :func:`_check_limits`; the copies are checked again.
    """
    table, lines = graph.catalog.table(table_key), records.column(table_key, "line", *span)
    rows = copy_external(graph.store, table, records.rows(table_key, *span), lines)
    check_table(table_key, LimitWording(rows=_COPIED, arrow_bytes=_COPIED), arrow_bytes=staged_bytes(graph.store, table, rows))
    return rows


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
    graph: Graph, records: RecordSet, chunk: _Chunk, mode: LoadMode, probe: ChunkProbe, message: str, claimed: Mapping[str, frozenset[str]]
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
            fenced_first = fenced and previous is None and table_key == first_effect and entry.table_branch == own_branch
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
            rows = _staged(graph, records, table_key, span)
            if mode == "merge":
                generated = records.column(table_key, "generated", *span) if table.kind == "edge" else None
                changes = merge_changes(graph, table, entry, rows, generated, claimed.get(table_key, frozenset()))
                rows, counts, ids_seen = changes.rows, changes.counts, changes.ids
            else:
                counts, ids_seen = append_counts(rows.num_rows), frozenset()
            _check_unique_committed(graph, entry, records, table_key, span, rows.column("id"))
            incoming[table_key] = rows
            payload[table_key] = (counts, ids_seen)
            writes.append(TableWrite(table_key, _WRITE_KIND[mode], rows))
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
    if mode != "overwrite":
        _check_limits(graph.store, records, chunks, chunked=chunk_rows is not None)
    else:
        for table_key in records.table_keys():
            check_references(graph.store, graph.catalog.table(table_key), records.reader(table_key), records.column(table_key, "line"))
    if len(chunks) > 1 and any(graph.catalog.table(key).kind == "edge" for key in records.table_keys()):
        whole = _Chunk({key: (0, records.num_rows(key)) for key in records.table_keys()})
        _check_endpoints(graph, records, whole, _committed_lookup(graph, graph.manifest.snapshot(branch), set()))
    return _publish(graph, records, chunks, mode, branch, actor, progress)


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
    for index, chunk in enumerate(chunks):
        message = f"load --mode {mode}" + (f" (chunk {index + 1}/{len(chunks)})" if len(chunks) > 1 else "")
        try:
            prepare = _prepare_for(graph, records, chunk, mode, probe, message, claimed)
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
