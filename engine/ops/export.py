"""``export``: a branch as JSONL, tables in table-key order, rows by id (byte order)."""

from __future__ import annotations

from collections.abc import Iterator

from engine.errors import BadRequest
from engine.graph import Graph
from engine.records import arrow_to_records
from engine.storage import open_pinned


def export_lines(graph: Graph, branch: str, types: list[str] | None = None) -> Iterator[str]:
    """Yield one JSONL line per row; ``types`` limits the export to those node/edge type names."""
    snapshot = graph.manifest.snapshot(branch)
    wanted = set(types or [])
    known = {key.split(":", 1)[1] for key in snapshot.tables}
    unknown = sorted(wanted - known)
    if unknown:
        raise BadRequest(f"unknown type(s) {unknown}; known: {sorted(known)}", {"unknown": unknown})
    with graph.manifest.reading(branch):
        for table_key, entry in snapshot.tables.items():
            if wanted and table_key.split(":", 1)[1] not in wanted:
                continue
            dataset = open_pinned(graph.store, entry.image)
            yield from arrow_to_records(graph.catalog.table(table_key), dataset.to_table().sort_by("id"))
