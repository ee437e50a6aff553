"""``snapshot``: what a branch pins, as the JSON document of DESIGN section 6."""

from __future__ import annotations

from typing import Any

from omnigraph.engine.graph import Graph
from omnigraph.engine.storage.lance_io import open_pinned, primary_key


def snapshot_document(graph: Graph, branch: str) -> dict[str, Any]:
    """``{branch, manifest_version, format, tables: [{table_key, path, table_branch, version, rows, pk}]}``."""
    snapshot = graph.manifest.snapshot(branch)
    tables = []
    with graph.manifest.reading(branch):
        for table_key, entry in snapshot.tables.items():
            dataset = open_pinned(graph.store, entry.image)
            tables.append(
                {
                    "table_key": table_key,
                    "path": entry.table_path,
                    "table_branch": entry.table_branch,
                    "version": entry.table_version,
                    "rows": entry.row_count,
                    "pk": primary_key(dataset.schema),
                }
            )
    return {
        "branch": branch,
        "manifest_version": snapshot.manifest_version,
        "format": graph.stamp,
        "tables": tables,
    }
