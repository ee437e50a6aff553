"""``export``: a branch as JSONL or as Arrow tables, tables in table-key order, rows by id.

JSONL (:func:`export_lines`) writes the tables in table-key order, rows by id (byte order);
:func:`export_tables` gives one Arrow table per table key in the same order. A Blob cell is
exported in the spelling load accepts (:mod:`omnigraph.engine.schema.types`): the URI of an
external reference, ``base64:`` of managed bytes. JSONL export reads the payloads of
:data:`BLOB_ROWS` rows at a time (one cell at a time within them).
"""

from __future__ import annotations

from collections.abc import Iterator

import lance
import pyarrow as pa

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.commit_graph import read_point
from omnigraph.engine.manifest.rows import BranchSnapshot, TableEntry
from omnigraph.engine.records.parse import arrow_to_records
from omnigraph.engine.schema.types import spell_bytes
from omnigraph.engine.storage.blobs import ROW_ID, blob_names, contents

BLOB_ROWS = 64
"""Rows of a table with Blob columns whose cells are spelled (payloads read) at a time."""


def _wanted(snapshot: BranchSnapshot, types: list[str] | None) -> list[tuple[str, TableEntry]]:
    """The (table key, entry) pairs of ``types`` (every table when none), in table-key order.

    ``bad_request`` naming the unknown types.
    """
    wanted = set(types or [])
    known = {key.split(":", 1)[1] for key in snapshot.tables}
    unknown = sorted(wanted - known)
    if unknown:
        raise BadRequest(f"unknown type(s) {unknown}; known: {sorted(known)}", {"unknown": unknown})
    return [(key, entry) for key, entry in snapshot.tables.items() if not wanted or key.split(":", 1)[1] in wanted]


def export_lines(graph: Graph, branch: str, types: list[str] | None = None, at: str | None = None) -> Iterator[str]:
    """Yield one JSONL line per row; ``types`` limits the export to those node/edge type names.

    ``at`` exports commit ``at`` of the branch instead of its head, with that commit's schema.
    """
    point = read_point(graph.manifest, branch, at)
    chosen = _wanted(point.snapshot, types)
    catalog = graph.catalog_for(point.snapshot)
    with point.reading(graph.manifest):
        datasets = point.open_images(graph.manifest, [table_key for table_key, _ in chosen])
        for table_key, dataset in datasets.items():
            table, rows = catalog.table(table_key), _sorted(dataset)
            step = BLOB_ROWS if blob_names(dataset.schema) else max(rows.num_rows, 1)
            for start in range(0, rows.num_rows, step):
                yield from arrow_to_records(table, _spelled(dataset, rows.slice(start, step)))


def _sorted(dataset: lance.LanceDataset) -> pa.Table:
    """Every row of an image by id; with ``_rowid`` when it has Blob columns (to read their cells)."""
    return dataset.to_table(with_row_id=bool(blob_names(dataset.schema))).sort_by("id")


def _spelled(dataset: lance.LanceDataset, rows: pa.Table) -> pa.Table:
    """``rows`` of :func:`_sorted` with each Blob column as the Utf8 spellings of its cells.

    ``_rowid`` is dropped.
    """
    names = blob_names(dataset.schema)
    for name in names:
        cells = contents(dataset, rows, name)
        spelled = pa.array([spell_bytes(c) if isinstance(c, bytes) else c for c in cells], pa.utf8())
        rows = rows.set_column(rows.schema.get_field_index(name), name, spelled)
    return rows.drop_columns([ROW_ID]) if names else rows


def export_tables(graph: Graph, branch: str, types: list[str] | None = None, at: str | None = None) -> dict[str, pa.Table]:
    """The rows :func:`export_lines` would write (of commit ``at`` when given), as one Arrow table per table key.

    Each is sorted by id, with the physical columns: ``id``, for edges ``src`` and ``dst``, then
    the properties; a Blob column as the Utf8 spellings of its cells, so every payload of the
    table is in memory.
    """
    point = read_point(graph.manifest, branch, at)
    chosen = _wanted(point.snapshot, types)
    with point.reading(graph.manifest):
        datasets = point.open_images(graph.manifest, [key for key, _ in chosen])
        return {key: _spelled(dataset, _sorted(dataset)) for key, dataset in datasets.items()}
