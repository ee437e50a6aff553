"""What one load commit changes in one table: id-less edges matched, every row classified.

A merge (upsert by id) of one chunk of one table, prepared on a branch snapshot
(:func:`merge_changes`):

1. **Id-less edges** (the record named no ``data.id``, so the reader generated a ULID) are matched
   to committed edges, so that loading the same file again does not add them a second time:

   * an edge type with a ``@unique`` whose members include both ``src`` and ``dst`` (the first
     such ``@unique`` in declaration order) upserts on those members: an id-less edge whose
     member values equal a committed edge's takes that edge's id, and its properties replace the
     committed ones (a row with a null member is not matched);
   * any other edge type: an id-less edge takes the id of a committed edge with the same
     ``src``, ``dst`` and property values, each committed edge taken at most once. A file that
     holds the same edge twice is matched against two committed copies, and whatever copies the
     branch lacks are inserted, so a second run of a file inserts nothing and a first run inserts
     every line.

   Committed edges that the same load already wrote or matched (an earlier chunk), or that the
   chunk names by an explicit id, are not matched. Not matched: edge types with a Blob property
   (payloads are not compared), NaN values, and an id-less edge whose properties differ from
   every committed edge between its endpoints (without a key an edge cannot be told from a
   second edge, so it is inserted: two edges). Unkeyed nodes without ``data.id`` are never
   matched: a node has no endpoints, and upstream OmniGraph inserts them with generated ids.
2. **Classification** of every row by its id: ``inserted`` (no committed row has the id),
   ``unchanged`` (the committed row holds equal values) or ``updated``. Every row is written
   all the same (a merge is one fenced upsert commit, so a re-run still publishes a commit, whose
   rows equal the committed ones). Rows of a type with a Blob property are ``updated`` when their id exists (the
   payloads are not compared).

An append (strict insert) inserts every row; an overwrite rewrites the tables of the file
(:func:`overwrite_counts`): a row whose id was committed counts as ``updated`` (values are not
compared, every row is rewritten) and committed rows the file does not hold as ``deleted``.
Counts are :class:`TableCounts`, per table key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import TableEntry
from omnigraph.engine.ops.constraints import present_ids
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import BlobType
from omnigraph.engine.storage.lance_io import open_pinned


class TableCounts(msgspec.Struct, frozen=True):
    """Rows of one table a load inserted, updated, left unchanged and (overwrite) deleted."""

    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0

    def plus(self, other: TableCounts) -> TableCounts:
        """The sum of two counts (the chunks of one load)."""
        return TableCounts(
            self.inserted + other.inserted,
            self.updated + other.updated,
            self.unchanged + other.unchanged,
            self.deleted + other.deleted,
        )

    def as_dict(self) -> dict[str, int]:
        """``{inserted, updated, unchanged, deleted}``."""
        return {"inserted": self.inserted, "updated": self.updated, "unchanged": self.unchanged, "deleted": self.deleted}


class MergeChanges(msgspec.Struct, frozen=True):
    """A merge chunk of one table against the snapshot.

    ``rows`` are the chunk's rows to write, matched id-less edges carrying their committed ids;
    ``ids`` every id the chunk writes.
    """

    rows: pa.Table
    counts: TableCounts
    ids: frozenset[str] = frozenset()


def _has_blob(table: TableDef) -> bool:
    return any(isinstance(prop.type, BlobType) for prop in table.properties)


def _hashable(value: Any) -> Any:
    """A list value (a list or vector property) as a tuple, so that it can key a dict."""
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    return value


def _upsert_members(table: TableDef) -> tuple[str, ...] | None:
    """The members of the first ``@unique`` naming both ``src`` and ``dst`` (None without one)."""
    for members in table.composite_unique:
        if "src" in members and "dst" in members:
            return members
    return None


def _committed_between(graph: Graph, entry: TableEntry, rows: pa.Table, columns: list[str]) -> pa.Table:
    """The committed edges whose ``src`` and ``dst`` are among those of ``rows``."""
    srcs, dsts = pc.unique(rows.column("src")), pc.unique(rows.column("dst"))
    dataset = open_pinned(graph.store, entry.image)
    return dataset.to_table(columns=columns, filter=pc.field("src").isin(srcs) & pc.field("dst").isin(dsts))


def _match_idless_edges(
    graph: Graph, table: TableDef, entry: TableEntry, rows: pa.Table, generated: pa.Array, claimed: frozenset[str]
) -> pa.Table:
    """``rows`` with each matched id-less edge carrying the id of its committed edge (module docstring)."""
    if not pc.any(generated).as_py() or _has_blob(table) or entry.row_count == 0:
        return rows
    members = _upsert_members(table)
    compared = list(members) if members is not None else ["src", "dst", *(prop.name for prop in table.properties)]
    idless = rows.filter(generated)
    committed = _committed_between(graph, entry, idless, ["id", *dict.fromkeys(compared)])
    if not committed.num_rows:
        return rows
    taken = set(claimed) | set(rows.column("id").filter(pc.invert(generated)).to_pylist())
    available: dict[tuple[Any, ...], list[str]] = {}
    order = committed.sort_by([("id", "ascending")])
    exempt_nulls = members is not None
    for committed_id, key in zip(order.column("id").to_pylist(), _keys(order, compared, exempt_nulls), strict=True):
        if committed_id not in taken and key is not None:
            available.setdefault(key, []).append(committed_id)
    ids = rows.column("id").to_pylist()
    flags = generated.to_pylist()
    for index, key in enumerate(_keys(rows, compared, exempt_nulls)):
        if flags[index] and key is not None and available.get(key):
            ids[index] = available[key].pop(0)
    return rows.set_column(rows.schema.get_field_index("id"), rows.schema.field("id"), pa.array(ids, pa.utf8()))


def _keys(rows: pa.Table, columns: list[str], exempt_nulls: bool) -> Iterable[tuple[Any, ...] | None]:
    """Each row's values of ``columns`` as a hashable key (None: never matched).

    None when a value is NaN, or null with ``exempt_nulls`` (a ``@unique`` member: nulls are exempt).
    """
    values = [rows.column(name).to_pylist() for name in columns]
    for row in zip(*values, strict=True):
        if any((value is None and exempt_nulls) or (isinstance(value, float) and value != value) for value in row):
            yield None
        else:
            yield tuple(_hashable(value) for value in row)


def _compared_columns(table: TableDef) -> list[str]:
    return [*table.system_columns, *(prop.name for prop in table.properties)]


def merge_changes(
    graph: Graph, table: TableDef, entry: TableEntry, rows: pa.Table, generated: pa.Array | None, claimed: frozenset[str]
) -> MergeChanges:
    """Match the chunk's id-less edges and classify its rows (module docstring).

    ``generated`` marks the rows of ``rows`` whose id was generated (edge tables; None: none);
    ``claimed`` holds the ids an earlier chunk of the same load wrote or matched in this table.
    """
    if table.kind == "edge" and generated is not None:
        rows = _match_idless_edges(graph, table, entry, rows, generated, claimed)
    ids = rows.column("id")
    if entry.row_count == 0 or not rows.num_rows:
        return MergeChanges(rows, TableCounts(inserted=rows.num_rows), frozenset(ids.to_pylist()))
    dataset = open_pinned(graph.store, entry.image)
    if _has_blob(table):
        return MergeChanges(rows, upsert_counts(graph, entry, ids), frozenset(ids.to_pylist()))
    columns = _compared_columns(table)
    committed = dataset.to_table(columns=columns, filter=pc.field("id").isin(ids))
    before: Mapping[str, tuple[Any, ...]] = dict(
        zip(committed.column("id").to_pylist(), zip(*(committed.column(c).to_pylist() for c in columns), strict=True), strict=True)
    )
    inserted = updated = 0
    for row in zip(*(rows.column(c).to_pylist() for c in columns), strict=True):
        old = before.get(row[0])
        if old is None:
            inserted += 1
        elif old != row:
            updated += 1
    counts = TableCounts(inserted=inserted, updated=updated, unchanged=rows.num_rows - inserted - updated)
    return MergeChanges(rows, counts, frozenset(ids.to_pylist()))


def overwrite_counts(graph: Graph, entry: TableEntry, ids: pa.Array) -> TableCounts:
    """An overwrite of the table with rows ``ids``: inserted and updated by id, committed rows gone as deleted."""
    existing = len(present_ids(graph, entry, ids)) if entry.row_count else 0
    return TableCounts(inserted=len(ids) - existing, updated=existing, deleted=entry.row_count - existing)


def upsert_counts(graph: Graph, entry: TableEntry, ids: pa.Array | pa.ChunkedArray) -> TableCounts:
    """Rows ``ids`` upserted without comparing values (a type with a Blob property): inserted when absent, else updated."""
    if not len(ids):
        return TableCounts()
    existing = present_ids(graph, entry, ids) if entry.row_count else set()
    inserted = sum(1 for row_id in ids.to_pylist() if row_id not in existing)
    return TableCounts(inserted=inserted, updated=len(ids) - inserted)


def append_counts(rows: int) -> TableCounts:
    """A strict insert: every row is new (an existing id is refused before anything is written)."""
    return TableCounts(inserted=rows)
