"""Three-way comparison of one table across a merge: base, source and target images.

The comparison runs in DuckDB over Arrow scans of the three pinned Lance images: each row is
summarised as the md5 of its JSON text (every column, in the image's column order), the three
``id -> digest`` relations are joined on ``id``, and only the ids whose source digest differs
from the base's come back to Python, sorted, 8,192 at a time. DuckDB holds the relations under a
memory limit (:data:`MEMORY_LIMIT`) and spills to a temporary directory beyond it, so a table
costs Python memory in proportion to the ids the merge changes, never to its rows. An image whose
pin equals the base's or the target's is not read twice. Per id (absence counts as a value;
"changed" = differs from base):

* source unchanged: keep target;
* source changed, target unchanged: take source (insert, update or delete);
* both changed to the same value: keep target;
* both changed differently: a conflict, ``divergent_insert`` (absent in base),
  ``delete_vs_update`` (one side deleted, the other updated), else ``divergent_update``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import duckdb

from engine.manifest import TableEntry
from engine.storage import GraphStore, open_pinned

ConflictKind = Literal["divergent_insert", "delete_vs_update", "divergent_update"]
_BATCH_ROWS = 8192
MEMORY_LIMIT = "256MB"
_CHANGED = """
SELECT coalesce(base.id, source.id) AS id, base.d, source.d, ours.d
FROM base FULL OUTER JOIN source ON base.id = source.id
LEFT JOIN {target} AS ours ON ours.id = coalesce(base.id, source.id)
WHERE base.d IS DISTINCT FROM source.d
ORDER BY 1
"""


@dataclass(frozen=True)
class Conflict:
    """One id both sides changed differently."""

    table_key: str
    id: str
    kind: ConflictKind

    def document(self) -> dict[str, str]:
        return {"table_key": self.table_key, "id": self.id, "kind": self.kind}


@dataclass
class TableChanges:
    """What merging the source into the target does to one table (ids sorted)."""

    table_key: str
    inserts: list[str] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.inserts) + len(self.updates) + len(self.deletes)


def _pin(entry: TableEntry | None) -> tuple[str, str | None, int] | None:
    return None if entry is None else (entry.table_path, entry.table_branch, entry.table_version)


@contextmanager
def _database() -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection limited to :data:`MEMORY_LIMIT`, spilling to a directory of its own."""
    with tempfile.TemporaryDirectory(prefix="omnigraph-merge-") as spill:
        connection = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "temp_directory": spill, "threads": 2})
        try:
            yield connection
        finally:
            connection.close()


def _digests(connection: duckdb.DuckDBPyConnection, store: GraphStore, name: str, entry: TableEntry | None) -> None:
    """Create the temp table ``name`` of ``(id, d)``: every row's id and digest (none for a missing table)."""
    if entry is None:
        connection.execute(f"CREATE TEMP TABLE {name} (id VARCHAR, d VARCHAR)")
        return
    dataset = open_pinned(store, entry.image)
    connection.register(f"{name}_image", dataset)
    columns = ", ".join(f'"{column}"' for column in dataset.schema.names)
    connection.execute(
        f"CREATE TEMP TABLE {name} AS SELECT id, md5(to_json(struct_pack({columns}))::VARCHAR) AS d FROM {name}_image"
    )
    connection.unregister(f"{name}_image")


def _conflict_kind(base: str | None, source: str | None, target: str | None) -> ConflictKind:
    if base is None:
        return "divergent_insert"
    if source is None or target is None:
        return "delete_vs_update"
    return "divergent_update"


def compare_table(
    store: GraphStore,
    table_key: str,
    base: TableEntry | None,
    source: TableEntry | None,
    target: TableEntry | None,
) -> TableChanges:
    """The three-way result for one table (see the module docstring)."""
    changes = TableChanges(table_key)
    if _pin(source) == _pin(base) or _pin(source) == _pin(target):
        return changes
    with _database() as connection:
        _digests(connection, store, "base", base)
        _digests(connection, store, "source", source)
        target_table = "base" if _pin(target) == _pin(base) else "target"
        if target_table == "target":
            _digests(connection, store, "target", target)
        cursor = connection.execute(_CHANGED.format(target=target_table))
        while batch := cursor.fetchmany(_BATCH_ROWS):
            for row_id, was, theirs, ours in batch:
                _classify(changes, row_id, was, theirs, ours)
    return changes


def _classify(changes: TableChanges, row_id: str, was: str | None, theirs: str | None, ours: str | None) -> None:
    """Add one id whose source digest differs from the base's to ``changes`` (module docstring)."""
    if ours == was:
        if theirs is None:
            changes.deletes.append(row_id)
        elif ours is None:
            changes.inserts.append(row_id)
        else:
            changes.updates.append(row_id)
    elif ours != theirs:
        changes.conflicts.append(Conflict(changes.table_key, row_id, _conflict_kind(was, theirs, ours)))
