"""Write routing profiles: which stamps a binary accepts and how it writes keyed tables.

The format-5 engine (``omnigraph``) and the format-4 writer (``omnigraph-v4``) share the
schema, catalog, manifest, branch and write-protocol code; a :class:`EngineProfile` is the only
thing that differs: the stamps each accepts and the :class:`TableRouter` that performs row writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import lance
import pyarrow as pa

from engine.storage import GraphStore


@dataclass(frozen=True)
class TableRouter:
    """How one binary creates and writes node/edge tables (rows are already validated).

    ``check_writable`` runs on every table opened for a write, before any effect; ``None`` means
    the binary checks nothing (the format-4 writer predates PK metadata and ignores it).
    """

    with_pk: bool
    create_table: Callable[[GraphStore, str, pa.Schema], int]
    check_writable: Callable[[lance.LanceDataset, str], None] | None
    strict_insert: Callable[[lance.LanceDataset, pa.Table], int]
    upsert: Callable[[lance.LanceDataset, pa.Table], int]
    overwrite: Callable[[lance.LanceDataset, pa.Table | pa.RecordBatchReader, pa.Schema], int]


@dataclass(frozen=True)
class EngineProfile:
    """A binary's identity, the stamps it opens read-write / read-only, and its router."""

    program: str
    init_stamp: str
    read_write_stamps: frozenset[str]
    read_only_stamps: frozenset[str]
    router: TableRouter
    refusal_hint: str
