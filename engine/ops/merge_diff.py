"""Three-way comparison of one table across a merge: base, source and target images.

The comparison runs in DuckDB over Arrow scans of the three pinned Lance images: each row is
summarised as the md5 of its JSON text (every column, by column name; a Blob column as the
SHA-256 of each cell's payload, read one cell at a time, or its reference's URI:
:func:`omnigraph.engine.storage.blobs.digests`) in a DuckDB table on disk, the three
``id -> digest`` relations are joined on ``id`` one hash partition of
at most :data:`PARTITION_ROWS` ids at a time, and only the ids whose source digest differs from
the base's come back to Python, 8,192 at a time (then sorted). DuckDB works under a memory limit
(:data:`MEMORY_LIMIT`) and spills beyond it, and each partition's join fits in it, so a table
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import lance
import msgspec
import pyarrow as pa

from omnigraph.engine.manifest.rows import TableEntry
from omnigraph.engine.storage.blobs import blob_names, digests
from omnigraph.engine.storage.lance_io import open_pinned
from omnigraph.engine.storage.store import GraphStore

if TYPE_CHECKING:
    import duckdb

ConflictKind = Literal["divergent_insert", "delete_vs_update", "divergent_update"]
_BATCH_ROWS = 8192
_BLOB_BATCH_ROWS = 256
"""Rows of an image with Blob columns digested at a time."""
MEMORY_LIMIT = "256MB"
PARTITION_ROWS = 262_144
_CHANGED = """
WITH b AS (SELECT id, d FROM base WHERE hash(id) % {parts} = {part}),
     s AS (SELECT id, d FROM source WHERE hash(id) % {parts} = {part}),
     o AS (SELECT id, d FROM {target} WHERE hash(id) % {parts} = {part})
SELECT coalesce(b.id, s.id) AS id, b.d, s.d, o.d
FROM b FULL OUTER JOIN s ON b.id = s.id
LEFT JOIN o ON o.id = coalesce(b.id, s.id)
WHERE b.d IS DISTINCT FROM s.d
"""


class Conflict(msgspec.Struct, frozen=True):
    """One id both sides changed differently."""

    table_key: str
    id: str
    kind: ConflictKind

    def document(self) -> dict[str, str]:
        """The conflict as listed in a ``merge_conflict``: ``{table_key, id, kind}``."""
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
        """How many ids the merge inserts, updates or deletes (conflicts not counted)."""
        return len(self.inserts) + len(self.updates) + len(self.deletes)


def _pin(entry: TableEntry | None) -> tuple[str, str | None, int] | None:
    return None if entry is None else (entry.table_path, entry.table_branch, entry.table_version)


@contextmanager
def _database() -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB database limited to :data:`MEMORY_LIMIT`, in a file of a directory of its own.

    The directory also takes its spills (removed afterwards): tables beyond the limit live on
    disk. DuckDB is imported here, by the first merge, not by every command that imports the
    engine.
    """
    import duckdb

    with tempfile.TemporaryDirectory(prefix="omnigraph-merge-") as spill:
        connection = duckdb.connect(
            f"{spill}/merge.duckdb",
            config={"memory_limit": MEMORY_LIMIT, "temp_directory": spill, "threads": 2, "preserve_insertion_order": False},
        )
        try:
            yield connection
        finally:
            connection.close()


Adapt = Callable[[pa.Table], pa.Table]
"""Rows of an image written under an older schema, as the merged branches' schema holds them."""


def _digests(
    connection: duckdb.DuckDBPyConnection, store: GraphStore, name: str, entry: TableEntry | None, adapt: Adapt | None = None
) -> None:
    """Create the table ``name`` of ``(id, d)``: every row's id and digest (none for a missing table)."""
    if entry is None:
        connection.execute(f"CREATE TABLE {name} (id VARCHAR, d VARCHAR)")
        return
    dataset = open_pinned(store, entry.image)
    image: lance.LanceDataset | pa.RecordBatchReader = _summarised(dataset) if blob_names(dataset.schema) else dataset
    if adapt is not None:
        image = _adapted(image if isinstance(image, pa.RecordBatchReader) else dataset.scanner(batch_size=_BATCH_ROWS).to_reader(), adapt)
    connection.register(f"{name}_image", image)
    names = image.schema.names
    columns = ", ".join(f'"{column}"' for column in sorted(names))  # images may order them differently
    connection.execute(f"CREATE TABLE {name} AS SELECT id, md5(to_json(struct_pack({columns}))::VARCHAR) AS d FROM {name}_image")
    connection.unregister(f"{name}_image")


def _summarised(dataset: lance.LanceDataset) -> pa.RecordBatchReader:
    """The image's rows as a stream, each Blob column replaced by its cells' digests (Utf8)."""
    names = blob_names(dataset.schema)
    schema = dataset.schema
    for column in names:
        schema = schema.set(schema.get_field_index(column), pa.field(column, pa.utf8()))

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in dataset.scanner(with_row_id=True, batch_size=_BLOB_BATCH_ROWS).to_batches():
            summarised = {column: digests(dataset, batch, column) for column in names}
            yield pa.RecordBatch.from_arrays([summarised.get(f.name, batch.column(f.name)) for f in schema], schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def _adapted(reader: pa.RecordBatchReader, adapt: Adapt) -> pa.RecordBatchReader:
    """``reader``'s rows passed through ``adapt``, as a stream."""
    schema = adapt(reader.schema.empty_table()).schema

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            yield from adapt(pa.Table.from_batches([batch])).cast(schema).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


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
    adapt_base: Adapt | None = None,
) -> TableChanges:
    """The three-way result for one table (see the module docstring).

    ``adapt_base`` makes the base image's rows read as the branches' schema when the merge base
    was written under an older one; the base then never counts as the same image as either side.
    """
    changes = TableChanges(table_key)
    if adapt_base is None and (_pin(source) == _pin(base) or _pin(source) == _pin(target)):
        return changes
    with _database() as connection:
        _digests(connection, store, "base", base, adapt_base)
        _digests(connection, store, "source", source)
        target_table = "base" if adapt_base is None and _pin(target) == _pin(base) else "target"
        if target_table == "target":
            _digests(connection, store, "target", target)
        rows = max(_count(connection, name) for name in ("base", "source", target_table))
        parts = max(1, -(-rows // PARTITION_ROWS))
        for part in range(parts):
            cursor = connection.execute(_CHANGED.format(target=target_table, parts=parts, part=part))
            while batch := cursor.fetchmany(_BATCH_ROWS):
                for row_id, was, theirs, ours in batch:
                    _classify(changes, row_id, was, theirs, ours)
    for ids in (changes.inserts, changes.updates, changes.deletes):
        ids.sort()
    changes.conflicts.sort(key=lambda conflict: conflict.id)
    return changes


def _count(connection: duckdb.DuckDBPyConnection, table: str) -> int:
    row = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


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
