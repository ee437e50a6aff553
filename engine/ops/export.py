"""``export``: a branch as JSONL, tables in table-key order, rows by id (byte order), or as one
Arrow table per table key in the same order."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from engine.errors import BadRequest
from engine.graph import Graph
from engine.manifest import BranchSnapshot, TableEntry
from engine.records import arrow_to_records
from engine.storage import open_pinned


def _wanted(snapshot: BranchSnapshot, types: list[str] | None) -> list[tuple[str, TableEntry]]:
    """The (table key, entry) pairs of ``types`` (every table when none), in table-key order;
    ``bad_request`` naming the unknown types."""
    wanted = set(types or [])
    known = {key.split(":", 1)[1] for key in snapshot.tables}
    unknown = sorted(wanted - known)
    if unknown:
        raise BadRequest(f"unknown type(s) {unknown}; known: {sorted(known)}", {"unknown": unknown})
    return [(key, entry) for key, entry in snapshot.tables.items() if not wanted or key.split(":", 1)[1] in wanted]


def export_lines(graph: Graph, branch: str, types: list[str] | None = None) -> Iterator[str]:
    """Yield one JSONL line per row; ``types`` limits the export to those node/edge type names."""
    snapshot = graph.manifest.snapshot(branch)
    chosen = _wanted(snapshot, types)
    with graph.manifest.reading(branch):
        for table_key, entry in chosen:
            dataset = open_pinned(graph.store, entry.image)
            yield from arrow_to_records(graph.catalog.table(table_key), dataset.to_table().sort_by("id"))


def export_tables(graph: Graph, branch: str, types: list[str] | None = None) -> dict[str, pa.Table]:
    """The rows :func:`export_lines` would write, as one Arrow table per table key (sorted by id,
    the physical columns: ``id``, for edges ``src`` and ``dst``, then the properties)."""
    snapshot = graph.manifest.snapshot(branch)
    chosen = _wanted(snapshot, types)
    with graph.manifest.reading(branch):
        return {key: open_pinned(graph.store, entry.image).to_table().sort_by("id") for key, entry in chosen}
