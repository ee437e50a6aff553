"""``__manifest``: the graph catalog dataset, its rows, the format stamp and graph branches.

``__manifest`` is a Lance dataset keyed by ``object_id`` (its own unenforced PK in both
formats, never rewritten). Graph branch B is Lance branch B of it. Each branch holds one head row
(``object_id = "head"``: commit id, parents, actor, message, time, and the program and format
that wrote the commit; both null on graphs whose ``__manifest`` predates those columns: unknown)
and one row per live table
(``object_id = "table:<table_key>"``: path, pinned table branch and version, row count, and the
migration marker). One graph commit is one Lance commit on that branch. Every content publish
rewrites the head row, so two publishers from the same base conflict; a publish that touches only
table rows (a migration publish) leaves the head alone.

The format stamp is schema metadata ``omnigraph:format`` on ``__manifest`` main, read before
any branch is opened. Stamp ``5`` also carries ``omnigraph:fenced_heads``: the head commit id of
every branch when the stamp was written (canonical JSON), so a head written later by a format-4
writer can be told from one it wrote before the migration (:mod:`engine.access.writer_audit`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import lance
import pyarrow as pa

from engine.door import table_store
from engine.errors import FormatRefused, NotFound, ReadSetConflict
from engine.storage import (
    MANIFEST_DIR,
    PK_METADATA_KEY,
    GraphStore,
    ImageRef,
    LanceBranch,
    canonical_json,
    list_branches,
    open_dataset,
)

MAIN = "main"
FORMAT_KEY = "omnigraph:format"
MIGRATION_ID_KEY = "omnigraph:migration_id"
FENCED_HEADS_KEY = "omnigraph:fenced_heads"
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
    ]
)


@dataclass(frozen=True)
class TableEntry:
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


@dataclass(frozen=True)
class HeadEntry:
    """The graph commit a branch is at."""

    commit_id: str
    parents: tuple[str, ...]
    actor: str
    message: str
    committed_at: int
    writer_program: str | None = None
    writer_format: str | None = None


@dataclass(frozen=True)
class BranchSnapshot:
    """A folded branch manifest at one ``__manifest`` version."""

    branch: str
    manifest_version: int
    head: HeadEntry
    tables: dict[str, TableEntry]

    def table(self, table_key: str) -> TableEntry:
        try:
            return self.tables[table_key]
        except KeyError:
            raise NotFound(f"branch {self.branch!r} has no table {table_key!r}") from None


@dataclass(frozen=True)
class GraphBranch:
    """A live graph branch: its name, where it was forked from, and its incarnation."""

    name: str
    parent_branch: str | None
    parent_version: int | None
    incarnation: str


def lance_branch_name(graph_branch: str) -> str | None:
    """The Lance branch a graph branch's own data lives on (``None`` = the dataset's main)."""
    return None if graph_branch == MAIN else graph_branch


def now_ms() -> int:
    return int(time.time() * 1000)


def _table_row(entry: TableEntry) -> dict[str, object]:
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


def _head_row(head: HeadEntry) -> dict[str, object]:
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
    }


def _rows_table(rows: list[dict[str, object]], names: list[str] | None = None) -> pa.Table:
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
    return BranchSnapshot(branch, manifest_version, head, dict(sorted(tables.items())))


class Manifest:
    """Reads and publishes ``__manifest`` of one graph root."""

    def __init__(self, store: GraphStore):
        self.store = store

    def exists(self) -> bool:
        return self.store.exists(MANIFEST_DIR)

    def dataset(self, branch: str = MAIN, version: int | None = None) -> lance.LanceDataset:
        """``__manifest`` checked out at ``(branch, version)``; latest when ``version`` is None.

        A branch that does not exist is ``not_found``.
        """
        try:
            return open_dataset(self.store, MANIFEST_DIR, lance_branch_name(branch), version)
        except (ValueError, OSError):
            if branch != MAIN:
                self.require_branch(branch)
            raise

    def create(self, tables: list[TableEntry], head: HeadEntry, stamp: str) -> None:
        """Create ``__manifest`` in one Lance commit that carries the rows and the stamp."""
        schema = MANIFEST_SCHEMA.with_metadata({FORMAT_KEY: stamp})
        rows = [_head_row(head)] + [_table_row(t) for t in sorted(tables, key=lambda t: t.table_key)]
        lance.write_dataset(
            _rows_table(rows).cast(schema),
            self.store.dataset_uri(MANIFEST_DIR),
            schema=schema,
            mode="create",
            enable_stable_row_ids=True,
            storage_options=self.store.storage_options,
        )

    # -- format stamp ------------------------------------------------------------------------

    def read_stamp(self) -> tuple[str | None, str | None]:
        """(``omnigraph:format``, ``omnigraph:migration_id``) from the latest main schema."""
        metadata = self.dataset(MAIN).schema_metadata or {}
        return metadata.get(FORMAT_KEY), metadata.get(MIGRATION_ID_KEY)

    def write_stamp(self, stamp: str, migration_id: str | None, fenced_heads: dict[str, str] | None = None) -> None:
        """Set the stamp on main (and the migration id and fenced heads, or remove each when None)."""
        heads = None if fenced_heads is None else canonical_json(dict(sorted(fenced_heads.items()))).decode("utf-8")
        self.dataset(MAIN).update_schema_metadata(
            {FORMAT_KEY: stamp, MIGRATION_ID_KEY: migration_id, FENCED_HEADS_KEY: heads}
        )

    def read_fenced_heads(self) -> dict[str, str]:
        """``omnigraph:fenced_heads`` of the latest main schema (``{}`` when absent)."""
        raw = (self.dataset(MAIN).schema_metadata or {}).get(FENCED_HEADS_KEY)
        if raw is None:
            return {}
        try:
            heads = json.loads(raw)
        except json.JSONDecodeError as error:
            raise FormatRefused(f"{FENCED_HEADS_KEY} on __manifest main is not JSON: {error}") from error
        if not isinstance(heads, dict) or not all(isinstance(v, str) for v in heads.values()):
            raise FormatRefused(f"{FENCED_HEADS_KEY} on __manifest main is not a branch -> commit map")
        return {str(k): v for k, v in heads.items()}

    # -- reading -----------------------------------------------------------------------------

    def snapshot(self, branch: str, version: int | None = None) -> BranchSnapshot:
        """The folded manifest of ``branch`` (latest, or at ``version``); ``not_found`` if the
        branch does not exist, also when it is deleted while it is read."""
        dataset = self.dataset(branch, version)
        try:
            rows = dataset.to_table()
        except (ValueError, OSError):
            if branch != MAIN:
                self.require_branch(branch)
            raise
        return fold_rows(branch, int(dataset.version), rows)

    def snapshots(self) -> dict[str, BranchSnapshot]:
        """The latest snapshot of every live graph branch, main first, then by name.

        A branch deleted between the listing and its read is left out: it is no longer live, and
        a read of the whole graph must not fail because some branch was deleted meanwhile.
        """
        result: dict[str, BranchSnapshot] = {}
        for name in self.branches():
            try:
                result[name] = self.snapshot(name)
            except NotFound:
                continue
        return result

    def branches(self) -> dict[str, GraphBranch]:
        """Every live graph branch, main first, then by name."""
        result = {MAIN: GraphBranch(MAIN, None, None, MAIN)}
        for name, info in self._branch_listing().items():
            result[name] = _graph_branch(info)
        return result

    def incarnation(self, branch: str) -> str | None:
        """The incarnation of graph branch ``branch`` now (``main`` for main), None if it does not exist.

        A branch deleted and created again under the same name is a new incarnation.
        """
        if branch == MAIN:
            return MAIN
        found = self._branch_listing().get(branch)
        return None if found is None else found.identifier

    def _branch_listing(self) -> dict[str, LanceBranch]:
        """The Lance branches of ``__manifest``: every graph branch but main."""
        return list_branches(self.dataset(MAIN))

    @contextmanager
    def reading(self, branch: str) -> Iterator[None]:
        """Reads of ``branch``'s pinned images inside the block: Lance's "not found" because the
        branch was deleted meanwhile is ``not_found``, or ``read_set_conflict`` if a new branch of
        that name was created meanwhile (retry reads the new one); other errors pass through."""
        before = self.incarnation(branch)
        try:
            yield
        except (ValueError, OSError) as error:
            now = self.incarnation(branch)
            if now is None:
                raise NotFound(f"graph branch {branch!r} was deleted while it was read", {"branch": branch}) from error
            if now != before:
                raise ReadSetConflict(
                    f"graph branch {branch!r} was deleted and created again while it was read; retry",
                    {"member": f"branch {branch}", "expected": f"incarnation {before}", "actual": f"incarnation {now}"},
                ) from error
            raise

    def require_branch(self, branch: str) -> None:
        if branch != MAIN and branch not in self._branch_listing():
            raise NotFound(
                f"graph branch {branch!r} does not exist (see `omnigraph branch list`)",
                {"branch": branch},
            )

    def head_versions(self, branch: str) -> list[int]:
        """The ``__manifest`` versions of ``branch`` itself, oldest first."""
        return sorted(int(ref["version"]) for ref in self.dataset(branch).version_refs())

    # -- writing -----------------------------------------------------------------------------

    def publish(
        self, base: BranchSnapshot, tables: list[TableEntry], head: HeadEntry | None
    ) -> int:
        """One Lance commit on ``base.branch`` from ``base.manifest_version``; returns its version.

        ``head=None`` publishes table rows only (migration and recovery publishes). Raises
        :class:`engine.door.table_store.CommitConflict` if a concurrent publish rewrote the same rows.
        """
        rows = [_table_row(t) for t in sorted(tables, key=lambda t: t.table_key)]
        if head is not None:
            rows.insert(0, _head_row(head))
        dataset = self.dataset(base.branch, base.manifest_version)
        return table_store.upsert(dataset, _rows_table(rows, dataset.schema.names))

    def create_branch(self, name: str, source: BranchSnapshot) -> None:
        """Fork ``__manifest`` branch ``name`` from exactly ``source``'s manifest version."""
        self.dataset(MAIN).create_branch(name, reference=(source.branch, source.manifest_version))

    def delete_branch(self, name: str) -> None:
        self.dataset(MAIN).branches.delete(name)


def _graph_branch(info: LanceBranch) -> GraphBranch:
    return GraphBranch(
        name=info.name,
        parent_branch=info.parent_branch or MAIN,
        parent_version=info.parent_version,
        incarnation=info.identifier,
    )


def with_version(entry: TableEntry, table_branch: str | None, version: int, rows: int) -> TableEntry:
    """``entry`` repointed at a new physical image, with any migration marker cleared."""
    return replace(
        entry,
        table_branch=table_branch,
        table_version=version,
        row_count=rows,
        migration_id=None,
        migration_unit=None,
    )
