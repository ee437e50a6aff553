"""``load``: a JSONL file into a branch as one graph commit (or one per ``--chunk-rows`` chunk).

Modes: ``append`` = strict insert (an existing id is ``key_conflict``, nothing written),
``merge`` = upsert by id, ``overwrite`` = replace the tables present in the file. Everything that
can be checked without committed state is checked for the whole file before any write; checks
against committed state (existing ids, ``@unique`` values, edge endpoints) run inside each
commit's prepare step, so a retry re-validates against the fresh snapshot.

Limits: strict-insert and upsert inputs are at most :data:`MAX_ROWS` rows and
:data:`MAX_ARROW_BYTES` bytes of Arrow memory per table per commit (inclusive); every chunk is
checked before the first write. Overwrite is the bulk-replacement path and is not limited, and
cannot be chunked (each chunk would replace the previous one). Chunks are cut from the file's
records ordered node tables first, then edge tables, so every edge's endpoints are committed
no later than the edge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import BadRequest, KeyConflict, OmnigraphError, ResourceLimit
from engine.graph import Graph
from engine.lance_io import open_dataset
from engine.manifest import BranchSnapshot, TableEntry
from engine.records import (
    EdgeRow,
    NodeRow,
    ParsedFile,
    check_endpoints,
    parse_jsonl,
    rows_to_arrow,
)
from engine.write import CommitResult, TableWrite, commit

LoadMode = Literal["append", "merge", "overwrite"]
MAX_ROWS = 8192
MAX_ARROW_BYTES = 32 * 1024 * 1024
_WRITE_KIND = {"append": "insert", "merge": "upsert", "overwrite": "overwrite"}

Row = NodeRow | EdgeRow


@dataclass(frozen=True)
class LoadResult:
    """What a load published."""

    branch: str
    mode: LoadMode
    commits: list[CommitResult]
    rows: dict[str, int]


@dataclass(frozen=True)
class _Chunk:
    parsed: ParsedFile
    tables: dict[str, pa.Table]


def _ordered_rows(parsed: ParsedFile) -> list[tuple[str, Row]]:
    ordered: list[tuple[str, Row]] = []
    for type_name in sorted(parsed.nodes):
        ordered.extend((f"node:{type_name}", row) for row in parsed.nodes[type_name])
    for type_name in sorted(parsed.edges):
        ordered.extend((f"edge:{type_name}", row) for row in parsed.edges[type_name])
    return ordered


def _as_parsed(rows: Iterable[tuple[str, Row]], line_count: int) -> ParsedFile:
    nodes: dict[str, list[NodeRow]] = {}
    edges: dict[str, list[EdgeRow]] = {}
    for table_key, row in rows:
        kind, type_name = table_key.split(":", 1)
        if kind == "node":
            nodes.setdefault(type_name, []).append(row)  # type: ignore[arg-type]
        else:
            edges.setdefault(type_name, []).append(row)  # type: ignore[arg-type]
    return ParsedFile(nodes=nodes, edges=edges, line_count=line_count)


def _chunks(graph: Graph, parsed: ParsedFile, chunk_rows: int | None) -> list[_Chunk]:
    ordered = _ordered_rows(parsed)
    if chunk_rows is None:
        groups = [ordered]
    else:
        groups = [ordered[i : i + chunk_rows] for i in range(0, len(ordered), chunk_rows)] or [[]]
    chunks = []
    for group in groups:
        chunk_parsed = _as_parsed(group, parsed.line_count)
        tables = {}
        for table_key, rows in _table_rows(chunk_parsed).items():
            table = graph.catalog.table(table_key)
            tables[table_key] = rows_to_arrow(table, rows, with_pk=graph.profile.router.with_pk)
        chunks.append(_Chunk(chunk_parsed, tables))
    return chunks


def _table_rows(parsed: ParsedFile) -> dict[str, list[Row]]:
    result: dict[str, list[Row]] = {}
    for type_name, nodes in sorted(parsed.nodes.items()):
        result[f"node:{type_name}"] = list(nodes)
    for type_name, edges in sorted(parsed.edges.items()):
        result[f"edge:{type_name}"] = list(edges)
    return dict(sorted(result.items()))


def _check_limits(chunks: list[_Chunk], chunked: bool) -> None:
    hint = "" if chunked else f"; split the load with --chunk-rows {MAX_ROWS} (one commit per chunk)"
    for chunk in chunks:
        for table_key, table in chunk.tables.items():
            if table.num_rows > MAX_ROWS:
                raise ResourceLimit(
                    "rows", MAX_ROWS, table.num_rows,
                    f"{table_key}: {table.num_rows} rows in one commit exceed the limit of {MAX_ROWS}{hint}",
                    table_key=table_key,
                )
            if table.nbytes > MAX_ARROW_BYTES:
                raise ResourceLimit(
                    "arrow_bytes", MAX_ARROW_BYTES, table.nbytes,
                    f"{table_key}: {table.nbytes} bytes of Arrow data in one commit exceed the limit of "
                    f"{MAX_ARROW_BYTES}{hint or '; use a smaller --chunk-rows'}",
                    table_key=table_key,
                )


def present_ids(graph: Graph, entry: TableEntry, ids: list[str]) -> set[str]:
    """The subset of ``ids`` present in the pinned image of ``entry``."""
    if not ids:
        return set()
    dataset = open_dataset(graph.store, entry.table_path, entry.table_branch, entry.table_version)
    found = dataset.to_table(columns=["id"], filter=pc.field("id").isin(pa.array(ids, pa.utf8())))
    return set(found.column("id").to_pylist())


def _check_unique_committed(graph: Graph, entry: TableEntry, table_key: str, rows: list[Row]) -> None:
    table = graph.catalog.table(table_key)
    if not table.unique:
        return
    own_ids = {row.id for row in rows}
    dataset = open_dataset(graph.store, entry.table_path, entry.table_branch, entry.table_version)
    for prop in table.unique:
        by_value = {row.values[prop]: row for row in rows if row.values.get(prop) is not None}
        if not by_value:
            continue
        hits = dataset.to_table(columns=["id", prop], filter=pc.field(prop).isin(list(by_value)))
        for committed_id, value in sorted(zip(hits.column("id").to_pylist(), hits.column(prop).to_pylist())):
            if committed_id not in own_ids:
                row = by_value[value]
                raise BadRequest(
                    f"line {row.line}: {table.type_name}.{prop} value {value!r} is already used by "
                    f"id {committed_id!r} (@unique)",
                    {"line": row.line, "type_name": table.type_name, "property": prop, "existing_id": committed_id},
                )


def _committed_lookup(graph: Graph, snapshot: BranchSnapshot, replaced: set[str]) -> Callable[[str, list[str]], set[str]]:
    def lookup(type_name: str, ids: list[str]) -> set[str]:
        table_key = f"node:{type_name}"
        if table_key in replaced:
            return set()
        return present_ids(graph, snapshot.table(table_key), ids)

    return lookup


def _check_dangling_edges(graph: Graph, snapshot: BranchSnapshot, parsed: ParsedFile, replaced: set[str]) -> None:
    """Overwrite: committed edges of tables not in the file must keep their endpoints."""
    new_ids = {type_name: {row.id for row in rows} for type_name, rows in parsed.nodes.items()}
    for table_key in graph.catalog.table_keys():
        table = graph.catalog.table(table_key)
        if table.kind != "edge" or table_key in replaced:
            continue
        for column, node_type in (("src", table.from_type), ("dst", table.to_type)):
            if f"node:{node_type}" not in replaced:
                continue
            entry = snapshot.table(table_key)
            dataset = open_dataset(graph.store, entry.table_path, entry.table_branch, entry.table_version)
            values = dataset.to_table(columns=["id", column])
            for edge_id, endpoint in sorted(zip(values.column("id").to_pylist(), values.column(column).to_pylist())):
                if endpoint not in new_ids.get(str(node_type), set()):
                    raise BadRequest(
                        f"overwriting node:{node_type} would leave committed {table_key} {edge_id!r} "
                        f"without its {column} {endpoint!r}; include that edge table or the node",
                        {"table_key": table_key, "edge_id": edge_id, "missing": endpoint},
                    )


def _prepare_for(graph: Graph, chunk: _Chunk, mode: LoadMode) -> Callable[[BranchSnapshot], list[TableWrite]]:
    replaced = set(chunk.tables) if mode == "overwrite" else set()
    table_rows = _table_rows(chunk.parsed)

    def prepare(snapshot: BranchSnapshot) -> list[TableWrite]:
        writes = []
        for table_key, arrow_rows in chunk.tables.items():
            entry = snapshot.table(table_key)
            rows = table_rows[table_key]
            if mode == "append":
                existing = present_ids(graph, entry, [row.id for row in rows])
                if existing:
                    table = graph.catalog.table(table_key)
                    raise KeyConflict(table.kind, table.type_name, min(existing))
            if mode != "overwrite":
                _check_unique_committed(graph, entry, table_key, rows)
            writes.append(TableWrite(table_key, _WRITE_KIND[mode], arrow_rows))  # type: ignore[arg-type]
        check_endpoints(chunk.parsed, graph.catalog, _committed_lookup(graph, snapshot, replaced))
        if mode == "overwrite":
            _check_dangling_edges(graph, snapshot, chunk.parsed, replaced)
        return writes

    return prepare


def load(
    graph: Graph,
    data: bytes,
    *,
    mode: LoadMode,
    branch: str,
    actor: str,
    chunk_rows: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> LoadResult:
    """Validate ``data`` and publish it to ``branch``; see the module docstring."""
    if chunk_rows is not None and chunk_rows < 1:
        raise BadRequest("--chunk-rows must be at least 1")
    if chunk_rows is not None and mode == "overwrite":
        raise BadRequest("--chunk-rows cannot be used with --mode overwrite: each chunk would replace the last")
    graph.manifest.require_branch(branch)
    parsed = parse_jsonl(data, graph.catalog)
    chunks = _chunks(graph, parsed, chunk_rows)
    if mode != "overwrite":
        _check_limits(chunks, chunked=chunk_rows is not None)
    first = graph.manifest.snapshot(branch)
    check_endpoints(parsed, graph.catalog, _committed_lookup(graph, first, set(chunks[0].tables) if mode == "overwrite" else set()))
    commits: list[CommitResult] = []
    rows: dict[str, int] = {}
    for index, chunk in enumerate(chunks):
        message = f"load --mode {mode}" + (f" (chunk {index + 1}/{len(chunks)})" if len(chunks) > 1 else "")
        try:
            result = commit(graph, branch, _prepare_for(graph, chunk, mode), message=message, actor=actor)
        except OmnigraphError as error:
            if commits:
                error.message += (
                    f" ({len(commits)} of {len(chunks)} chunks were committed before this failure: "
                    f"{', '.join(c.commit_id for c in commits)}; later chunks were not)"
                )
                error.details["committed_chunks"] = [c.commit_id for c in commits]
                error.details["chunks_total"] = len(chunks)
            raise
        if result is not None:
            commits.append(result)
        for table_key, table in chunk.tables.items():
            rows[table_key] = rows.get(table_key, 0) + table.num_rows
        if progress is not None:
            progress(index + 1, len(chunks))
    return LoadResult(branch, mode, commits, dict(sorted(rows.items())))
