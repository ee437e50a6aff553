"""The ``__manifest`` rows: their schema, what they hold, and how a branch's rows fold into a snapshot.

``__manifest`` is keyed by ``object_id`` (its own unenforced PK in both formats, never
rewritten). Each graph branch holds one head row (``object_id = "head"``: commit id, parents,
actor, message, time, the program and format that wrote the commit (both null on graphs
whose ``__manifest`` predates those columns: unknown), and the commit's schema version
(``schema_id``; null: the graph's first schema, see :mod:`omnigraph.engine.manifest.schema_history`)) and one row per live table
(``object_id = "table:<table_key>"``: path, pinned table branch and version, row count, and the
migration marker). A table a schema change dropped or renamed keeps its row with ``kind =
"retired"``, which folds to nothing. :func:`table_row`/:func:`head_row`/:func:`rows_table` build rows,
:func:`fold_rows` folds them into a :class:`BranchSnapshot`; reading and publishing them is
:class:`omnigraph.engine.manifest.manifest.Manifest`. Nothing here does I/O.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import MappingProxyType

import msgspec
import pyarrow as pa

from omnigraph.engine.errors import FormatRefused, NotFound
from omnigraph.engine.storage.lance_io import ImageRef
from omnigraph.engine.storage.names import PK_METADATA_KEY

MAIN = "main"
HEAD_OBJECT_ID = "head"
TABLE_PREFIX = "table:"

MANIFEST_SCHEMA = pa.schema(
    [
        pa.field("object_id", pa.utf8(), nullable=False, metadata={PK_METADATA_KEY: "true"}),
        pa.field("kind", pa.utf8(), nullable=False),
        pa.field("table_key", pa.utf8()),
        pa.field("table_path", pa.utf8()),
        pa.field("table_branch", pa.utf8()),
        pa.field("table_version", pa.int64()),
        pa.field("row_count", pa.int64()),
        pa.field("commit_id", pa.utf8()),
        pa.field("parents", pa.list_(pa.utf8())),
        pa.field("actor", pa.utf8()),
        pa.field("message", pa.utf8()),
        pa.field("committed_at", pa.int64()),
        pa.field("migration_id", pa.utf8()),
        pa.field("migration_unit", pa.utf8()),
        pa.field("writer_program", pa.utf8()),
        pa.field("writer_format", pa.utf8()),
        pa.field("schema_id", pa.utf8()),
    ]
)
SCHEMA_ID_COLUMN = "schema_id"
RETIRED_KIND = "retired"


class TableEntry(msgspec.Struct, frozen=True):
    """One live table as a graph branch sees it: which physical image it pins."""

    table_key: str
    table_path: str
    table_branch: str | None
    table_version: int
    row_count: int
    migration_id: str | None = None
    migration_unit: str | None = None

    @property
    def image(self) -> ImageRef:
        """The image this entry pins."""
        return ImageRef(self.table_path, self.table_branch, self.table_version)


class HeadEntry(msgspec.Struct, frozen=True):
    """The graph commit a branch is at."""

    commit_id: str
    parents: tuple[str, ...]
    actor: str
    message: str
    committed_at: int
    writer_program: str | None = None
    writer_format: str | None = None
    schema_id: str | None = None


class BranchSnapshot(msgspec.Struct, frozen=True):
    """A folded branch manifest at one ``__manifest`` version."""

    branch: str
    manifest_version: int
    head: HeadEntry
    tables: Mapping[str, TableEntry]
    """By table key, ordered; read-only (a snapshot is shared by every reader in the process)."""

    def table(self, table_key: str) -> TableEntry:
        """The entry of ``table_key``; ``not_found`` if the branch has no such table."""
        try:
            return self.tables[table_key]
        except KeyError:
            raise NotFound(f"branch {self.branch!r} has no table {table_key!r}") from None


class GraphBranch(msgspec.Struct, frozen=True):
    """A live graph branch: its name, where it was forked from, and its incarnation."""

    name: str
    parent_branch: str | None
    parent_version: int | None
    incarnation: str


def lance_branch_name(graph_branch: str) -> str | None:
    """The Lance branch a graph branch's own data lives on (``None`` = the dataset's main)."""
    return None if graph_branch == MAIN else graph_branch


def now_ms() -> int:
    """The current time in epoch milliseconds (the unit of ``committed_at``)."""
    return int(time.time() * 1000)


def table_row(entry: TableEntry) -> dict[str, object]:
    """The ``__manifest`` row that pins ``entry``."""
    return {
        "object_id": TABLE_PREFIX + entry.table_key,
        "kind": "table",
        "table_key": entry.table_key,
        "table_path": entry.table_path,
        "table_branch": entry.table_branch,
        "table_version": entry.table_version,
        "row_count": entry.row_count,
        "migration_id": entry.migration_id,
        "migration_unit": entry.migration_unit,
    }


def head_row(head: HeadEntry) -> dict[str, object]:
    """The ``__manifest`` head row of ``head``."""
    return {
        "object_id": HEAD_OBJECT_ID,
        "kind": "head",
        "commit_id": head.commit_id,
        "parents": list(head.parents),
        "actor": head.actor,
        "message": head.message,
        "committed_at": head.committed_at,
        "writer_program": head.writer_program,
        "writer_format": head.writer_format,
        "schema_id": head.schema_id,
    }


def retired_row(table_key: str) -> dict[str, object]:
    """The ``__manifest`` row that retires ``table_key`` (dropped or renamed by a schema change)."""
    return {"object_id": TABLE_PREFIX + table_key, "kind": RETIRED_KIND, "table_key": table_key}


def rows_table(rows: list[dict[str, object]], names: list[str] | None = None) -> pa.Table:
    """``rows`` as a manifest table; ``names`` keeps only the columns a (older) dataset has."""
    schema = MANIFEST_SCHEMA if names is None else pa.schema([f for f in MANIFEST_SCHEMA if f.name in names])
    columns = {f.name: [row.get(f.name) for row in rows] for f in schema}
    return pa.table(columns, schema=schema)


def fold_rows(branch: str, manifest_version: int, table: pa.Table) -> BranchSnapshot:
    """Fold manifest rows into a :class:`BranchSnapshot` (tables ordered by key)."""
    head: HeadEntry | None = None
    tables: dict[str, TableEntry] = {}
    for row in table.to_pylist():
        if row["kind"] == "head":
            head = HeadEntry(
                commit_id=row["commit_id"],
                parents=tuple(row["parents"] or ()),
                actor=row["actor"],
                message=row["message"],
                committed_at=int(row["committed_at"]),
                writer_program=row.get("writer_program"),
                writer_format=row.get("writer_format"),
                schema_id=row.get("schema_id"),
            )
        elif row["kind"] == "table":
            tables[row["table_key"]] = TableEntry(
                table_key=row["table_key"],
                table_path=row["table_path"],
                table_branch=row["table_branch"],
                table_version=int(row["table_version"]),
                row_count=int(row["row_count"]),
                migration_id=row["migration_id"],
                migration_unit=row["migration_unit"],
            )
    if head is None:
        raise FormatRefused(f"__manifest branch {branch!r} v{manifest_version} has no head row")
    return BranchSnapshot(branch, manifest_version, head, MappingProxyType(dict(sorted(tables.items()))))


def with_version(entry: TableEntry, table_branch: str | None, version: int, rows: int) -> TableEntry:
    """``entry`` repointed at a new physical image, with any migration marker cleared."""
    return msgspec.structs.replace(
        entry,
        table_branch=table_branch,
        table_version=version,
        row_count=rows,
        migration_id=None,
        migration_unit=None,
    )
