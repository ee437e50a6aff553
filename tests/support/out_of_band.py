"""Writing a graph the way a foreign program would: Lance directly, then a hand-published pin.

Suites use these to build the states ``omnigraph check`` and drift reconciliation must find.
"""

from __future__ import annotations

from typing import Any

import lance
import pyarrow as pa

from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import TableEntry, with_version
from omnigraph.engine.storage.lance_io import open_dataset
from omnigraph.engine.storage.store import open_store


def publish_row(uri: str, branch: str, entry: TableEntry) -> None:
    """Publish one table row ``entry`` on ``branch`` (no head row, no checks)."""
    manifest = Manifest(open_store(uri))
    manifest.publish(manifest.snapshot(branch), [entry], None)


def append_unfenced(uri: str, table_key: str, rows: list[dict[str, Any]]) -> None:
    """Append rows to main's image of ``table_key`` with Lance directly and publish the pin."""
    store = open_store(uri)
    entry = Manifest(store).snapshot("main").table(table_key)
    dataset = open_dataset(store, entry.table_path)
    table = pa.Table.from_pylist(rows, schema=dataset.schema)
    appended = lance.write_dataset(table, dataset, mode="append")
    publish_row(uri, "main", with_version(entry, None, int(appended.version), appended.count_rows()))
