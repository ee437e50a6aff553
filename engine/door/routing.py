"""Write routing profiles: which stamps a binary accepts and how it writes keyed tables.

The format-5 engine (``omnigraph``) and the format-4 writer (``omnigraph-v4``) share the
schema, catalog, manifest, branch and write-protocol code; a :class:`EngineProfile` is the only
thing that differs: the stamps each accepts and the :class:`TableRouter` that performs row writes.
The format-5 profile (``FENCED_PROFILE``) is defined with the fenced door
(:mod:`omnigraph.engine.door.table_store`), the format-4 one (``LEGACY_PROFILE``) with its emulation
(:mod:`omnigraph.engine.door.legacy`).
"""

from __future__ import annotations

from collections.abc import Callable

import lance
import msgspec
import pyarrow as pa

from omnigraph.engine.storage.store import GraphStore


class MergeRows(msgspec.Struct, frozen=True):
    """One table's share of a branch merge or a ``.gq`` mutation (rows already validated).

    Applied as up to three Lance commits on the table, in this order, each skipped when empty:
    strict-insert ``inserts``, upsert ``upserts``, delete the rows whose id is in ``delete_ids``.
    ``where`` names the table in errors.
    """

    where: str
    inserts: pa.Table
    upserts: pa.Table | None
    delete_ids: tuple[str, ...]


class TableRouter(msgspec.Struct, frozen=True):
    """How one binary creates and writes node/edge tables (rows are already validated).

    Every row write of the write protocol is one of these operations; each returns the table
    version it committed. ``check_writable`` runs on every table opened for a write, before any
    effect; ``None`` means the binary checks nothing (the format-4 writer predates PK metadata
    and ignores it).

    * ``strict_insert``, ``upsert``, ``overwrite``: one Lance commit each;
    * ``merge``: a :class:`MergeRows` as a chain of commits; ``after_step`` is called after each
      one. A conflict on the first commit landed nothing (``CommitConflict``/``ExistingKeys``); on
      a later one it is ``EffectLanded``;
    * ``repair`` (duplicate repair behind the migration barrier): delete the rows whose id is in
      ``ids`` (and the null-id rows if ``null_ids``), then insert ``rows``; a failure of the
      insert is ``EffectLanded``.

    Outcomes are the typed exceptions of :mod:`omnigraph.engine.door.table_store`.
    """

    with_pk: bool
    create_table: Callable[[GraphStore, str, pa.Schema], int]
    check_writable: Callable[[lance.LanceDataset, str], None] | None
    strict_insert: Callable[[lance.LanceDataset, pa.Table], int]
    upsert: Callable[[lance.LanceDataset, pa.Table], int]
    overwrite: Callable[[lance.LanceDataset, pa.Table | pa.RecordBatchReader, pa.Schema], int]
    merge: Callable[[lance.LanceDataset, MergeRows, Callable[[], None]], int]
    repair: Callable[[lance.LanceDataset, list[str], bool, pa.Table], int]


class EngineProfile(msgspec.Struct, frozen=True):
    """A binary's identity, the stamps it opens read-write / read-only, and its router.

    ``refusal_hint`` says what to do about a stamp the program does not write; ``{uri}`` in it
    stands for the graph's root. ``leased_writes``: every commit holds its branch's lease
    (:mod:`omnigraph.engine.reconcile.branch_lease`); the format-4 writer predates leases.
    """

    program: str
    init_stamp: str
    read_write_stamps: frozenset[str]
    read_only_stamps: frozenset[str]
    router: TableRouter
    refusal_hint: str
    leased_writes: bool = True
