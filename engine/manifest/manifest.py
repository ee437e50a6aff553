"""``__manifest``: the graph catalog dataset, read and published; the format stamp; graph branches.

``__manifest`` is a Lance dataset keyed by ``object_id``; its rows are
:mod:`omnigraph.engine.manifest.rows`. Graph branch B is Lance branch B of it. One graph commit is one
Lance commit on that branch. Every content publish rewrites the head row, so two publishers from
the same base conflict; a publish that touches only table rows (a migration publish) leaves the
head alone.

The format stamp is schema metadata ``omnigraph:format`` on ``__manifest`` main, read before
any branch is opened. Stamp ``5`` also carries ``omnigraph:fenced_heads``: the head commit id of
every branch when the stamp was written (canonical JSON), so a head written later by a format-4
writer can be told from one it wrote before the migration (:mod:`omnigraph.engine.access.writer_audit`).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import lance

from omnigraph.engine.door import table_store
from omnigraph.engine.errors import FormatRefused, Internal, NotFound, ReadSetConflict
from omnigraph.engine.manifest.rows import (
    MAIN,
    MANIFEST_SCHEMA,
    SCHEMA_ID_COLUMN,
    BranchSnapshot,
    GraphBranch,
    HeadEntry,
    TableEntry,
    fold_rows,
    head_row,
    lance_branch_name,
    retired_row,
    rows_table,
    table_row,
)
from omnigraph.engine.storage.lance_io import LanceBranch, content_digest, list_branches, open_dataset, read_branch
from omnigraph.engine.storage.names import MANIFEST_DIR
from omnigraph.engine.storage.store import GraphStore, canonical_json

FORMAT_KEY = "omnigraph:format"
MIGRATION_ID_KEY = "omnigraph:migration_id"
FENCED_HEADS_KEY = "omnigraph:fenced_heads"
MAIN_BRANCH = GraphBranch(MAIN, None, None, MAIN)
"""The main graph branch: never forked, its incarnation is its name."""
SNAPSHOTS_KEPT = 256
"""How many folded snapshots one process keeps (:class:`SnapshotCache`)."""

SnapshotKey = tuple[str, str, int, str]


class SnapshotCache:
    """The process's folded snapshots, keyed by what the ``__manifest`` checkout holds; least recently used dropped first.

    Key: the dataset's URI, the graph branch, the Lance version and the checkout's content
    digest (:func:`omnigraph.engine.storage.lance_io.content_digest`). A version of a branch
    deleted and created again reuses its number but not its files, so it is a different key:
    an entry is never stale. A cached :class:`BranchSnapshot` is shared by every reader and must
    not be mutated (it is frozen; its ``tables`` mapping is read-only by contract).
    """

    def __init__(self, kept: int = SNAPSHOTS_KEPT) -> None:
        self._kept = kept
        self._entries: OrderedDict[SnapshotKey, BranchSnapshot] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: SnapshotKey) -> BranchSnapshot | None:
        """The snapshot stored under ``key``, None when there is none."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: SnapshotKey, snapshot: BranchSnapshot) -> None:
        """Keep ``snapshot`` under ``key``, dropping the least recently used past the bound."""
        with self._lock:
            self._entries[key] = snapshot
            self._entries.move_to_end(key)
            while len(self._entries) > self._kept:
                self._entries.popitem(last=False)


_SNAPSHOTS = SnapshotCache()


class Manifest:
    """Reads and publishes ``__manifest`` of one graph root."""

    def __init__(self, store: GraphStore):
        self.store = store

    def exists(self) -> bool:
        """Whether the root holds a ``__manifest`` (a graph, at any stamp)."""
        return self.store.exists(MANIFEST_DIR)

    @classmethod
    def of_graph(cls, store: GraphStore) -> Manifest:
        """The manifest of the graph at ``store``.

        Raises:
            NotFound: the root holds no ``__manifest`` (no graph, or a half-made one).
        """
        manifest = cls(store)
        if not manifest.exists():
            raise NotFound(f"no graph at {store.uri}", {"uri": store.uri})
        return manifest

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
        rows = [head_row(head)] + [table_row(t) for t in sorted(tables, key=lambda t: t.table_key)]
        lance.write_dataset(
            rows_table(rows).cast(schema),
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
        self.dataset(MAIN).update_schema_metadata({FORMAT_KEY: stamp, MIGRATION_ID_KEY: migration_id, FENCED_HEADS_KEY: heads})

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
        """The folded manifest of ``branch`` (latest, or at ``version``).

        Folded once per checkout content in a process (:class:`SnapshotCache`): the result is shared, never mutate it.
        ``not_found`` if the branch does not exist, also when it is deleted while it is read. A
        read that fails while the branch exists is made once more: the branch may have been
        deleted and created again meanwhile, and the second read is of the branch as it is now (a
        reader that must not mix two incarnations compares them, :meth:`confirm`); a second
        failure passes through.
        """
        try:
            return self._snapshot(branch, version)
        except (ValueError, OSError):
            if branch == MAIN:
                raise
            self.require_branch(branch)
        return self._snapshot(branch, version)

    def _snapshot(self, branch: str, version: int | None) -> BranchSnapshot:
        """One read of :meth:`snapshot`, Lance's errors unchanged."""
        dataset = open_dataset(self.store, MANIFEST_DIR, lance_branch_name(branch), version)
        key = (dataset.uri, branch, int(dataset.version), content_digest(dataset))
        cached = _SNAPSHOTS.get(key)
        if cached is not None:
            return cached
        snapshot = fold_rows(branch, int(dataset.version), dataset.to_table())
        _SNAPSHOTS.put(key, snapshot)
        return snapshot

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
        result = {MAIN: MAIN_BRANCH}
        for name, info in self._branch_listing().items():
            result[name] = _graph_branch(info)
        return result

    def incarnation(self, branch: str) -> str | None:
        """The incarnation of graph branch ``branch`` now (``main`` for main), None if it does not exist.

        A branch deleted and created again under the same name is a new incarnation.
        """
        found = self.branch(branch)
        return None if found is None else found.incarnation

    def branch(self, name: str) -> GraphBranch | None:
        """Graph branch ``name`` now, None if it does not exist.

        One read of its ref, not a listing of every branch.
        """
        if name == MAIN:
            return MAIN_BRANCH
        found = read_branch(self.store, MANIFEST_DIR, name)
        return None if found is None else _graph_branch(found)

    def _branch_listing(self) -> dict[str, LanceBranch]:
        """The Lance branches of ``__manifest``: every graph branch but main."""
        return list_branches(self.dataset(MAIN))

    @contextmanager
    def reading(self, branch: str, incarnation: str | None = None) -> Iterator[None]:
        """Guard reads of ``branch``'s pinned images inside the block against a concurrent delete.

        ``incarnation``: the branch's incarnation when the reader read its snapshot (read it
        before the snapshot; None: read it now). Lance's "not found" because the branch was
        deleted meanwhile is ``not_found``, or ``read_set_conflict`` if a new branch of that name
        was created meanwhile (retry reads the new one); other errors pass through.
        """
        before = incarnation if incarnation is not None else self.incarnation(branch)
        try:
            yield
        except (ValueError, OSError) as error:
            self.confirm(branch, before, error)
            raise

    def confirm(self, branch: str, incarnation: str | None, error: BaseException | None = None) -> None:
        """Refuse unless graph branch ``branch`` is still the incarnation ``incarnation``.

        A reader calls it once it has opened every image its snapshot pins: a branch deleted and
        created again numbers its versions again from its fork point, so the same branch and
        version can name another incarnation's rows, and only an unchanged incarnation proves that
        the images opened are the snapshot's. ``not_found`` if the branch is gone,
        ``read_set_conflict`` (retry) if it is another incarnation. Main is never replaced: no read.
        """
        if branch == MAIN:
            return
        now = self.incarnation(branch)
        if now is None:
            raise NotFound(f"graph branch {branch!r} was deleted while it was read", {"branch": branch}) from error
        if now != incarnation:
            raise ReadSetConflict(
                f"graph branch {branch!r} was deleted and created again while it was read; retry",
                {"member": f"branch {branch}", "expected": f"incarnation {incarnation}", "actual": f"incarnation {now}"},
            ) from error

    def require_branch(self, branch: str) -> None:
        """Refuse with ``not_found`` unless graph branch ``branch`` exists now."""
        self.require_incarnation(branch)

    def require_incarnation(self, branch: str) -> str:
        """The incarnation of graph branch ``branch`` now; ``not_found``, naming the command that lists the branches, if none."""
        incarnation = self.incarnation(branch)
        if incarnation is None:
            raise NotFound(f"graph branch {branch!r} does not exist (see `omnigraph branch list {self.store.uri}`)", {"branch": branch})
        return incarnation

    def head_versions(self, branch: str) -> list[int]:
        """The ``__manifest`` versions of ``branch`` itself, oldest first."""
        return sorted(int(ref["version"]) for ref in self.dataset(branch).version_refs())

    # -- writing -----------------------------------------------------------------------------

    def publish(self, base: BranchSnapshot, tables: list[TableEntry], head: HeadEntry | None, retired: tuple[str, ...] = ()) -> int:
        """One Lance commit on ``base.branch`` from ``base.manifest_version``; returns its version.

        ``head=None`` publishes table rows only (migration and recovery publishes); ``retired``
        table keys get retired rows (a schema change's dropped and renamed types). A head with a
        ``schema_id`` needs the column (:meth:`ensure_schema_column`). Raises
        :class:`omnigraph.engine.door.table_store.CommitConflict` if a concurrent publish rewrote the same rows.
        """
        rows = [table_row(t) for t in sorted(tables, key=lambda t: t.table_key)]
        rows += [retired_row(key) for key in sorted(retired)]
        if head is not None:
            rows.insert(0, head_row(head))
        dataset = self.dataset(base.branch, base.manifest_version)
        if head is not None and head.schema_id is not None and SCHEMA_ID_COLUMN not in dataset.schema.names:
            raise Internal(f"__manifest branch {base.branch!r} has no {SCHEMA_ID_COLUMN} column for a head with a schema version")
        return table_store.upsert(dataset, rows_table(rows, dataset.schema.names))

    def ensure_schema_column(self, branch: str) -> None:
        """Give ``branch``'s ``__manifest`` the ``schema_id`` column if it predates it (null: the first schema).

        A metadata-only Lance commit that changes no row; the caller holds the branch's lease.
        """
        dataset = self.dataset(branch)
        if SCHEMA_ID_COLUMN not in dataset.schema.names:
            dataset.add_columns(MANIFEST_SCHEMA.field(SCHEMA_ID_COLUMN))

    def create_branch(self, name: str, source: BranchSnapshot) -> None:
        """Fork ``__manifest`` branch ``name`` from exactly ``source``'s manifest version."""
        self.dataset(MAIN).create_branch(name, reference=(source.branch, source.manifest_version))

    def delete_branch(self, name: str) -> None:
        """Delete the ``__manifest`` branch ``name``: the graph branch of that name."""
        self.dataset(MAIN).branches.delete(name)


def _graph_branch(info: LanceBranch) -> GraphBranch:
    return GraphBranch(
        name=info.name,
        parent_branch=info.parent_branch or MAIN,
        parent_version=info.parent_version,
        incarnation=info.identifier,
    )
