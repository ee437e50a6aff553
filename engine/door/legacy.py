"""``omnigraph-v4``'s row writer: a faithful emulation of the previous release's (format 4) writer.

It exists so that rehearsals and tests have real format-4 graphs to migrate. It is the only
place in the project allowed to Append to, or run an unfiltered merge on, a keyed table. No PK
metadata, a BTREE on ``id``, unfenced writes:

* tables are created without PK metadata and with a BTREE index on ``id``;
* strict insert (``load --mode append``) checks that the ids are absent at its read version,
  then commits a bare Lance Append, which never conflicts: two writers racing on the same id
  both land (the bug the fencing migration exists to fix);
* upsert is the default ``merge_insert("id")``, which takes the indexed route and attaches no
  key-conflict filter;
* overwrite replaces the table with the catalog schema (no PK) and re-creates the BTREE;
* PK metadata on a table (left by an aborted migration) is ignored, as the old binary did;
* branch merge and ``.gq`` mutations (which the format-4 release did not have) and duplicate
  repair (which runs only behind the migration barrier) are refused, ``format_refused``, before
  any Lance commit.

:data:`LEGACY_ROUTER` routes the write protocol's row writes through this emulation, and
:data:`LEGACY_PROFILE` is ``omnigraph-v4``'s profile (reads and writes stamp ``4`` only).
"""

from __future__ import annotations

from collections.abc import Callable

import lance
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.door.routing import EngineProfile, MergeRows, TableRouter
from omnigraph.engine.door.table_store import ExistingKeys
from omnigraph.engine.errors import FormatRefused
from omnigraph.engine.storage.lance_io import create_empty_dataset
from omnigraph.engine.storage.names import FORMAT_4
from omnigraph.engine.storage.store import GraphStore


def create_table(store: GraphStore, rel: str, schema: pa.Schema) -> int:
    """Create an empty table without PK metadata and index ``id`` with a BTREE."""
    dataset = create_empty_dataset(store, rel, schema)
    dataset.create_scalar_index("id", "BTREE")
    return int(dataset.version)


def strict_insert(dataset: lance.LanceDataset, rows: pa.Table) -> int:
    """Existence check at the read version, then a bare Append."""
    ids = rows.column("id").combine_chunks()
    present = dataset.to_table(columns=["id"], filter=pc.field("id").isin(ids))
    if present.num_rows:
        raise ExistingKeys(f"ids present: {sorted(present.column('id').to_pylist())}")
    result = lance.write_dataset(rows, dataset, mode="append")
    return int(result.version)


def upsert(dataset: lance.LanceDataset, rows: pa.Table) -> int:
    """The default (indexed, unfiltered) merge_insert."""
    dataset.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(rows)
    return int(dataset.version)


def overwrite(dataset: lance.LanceDataset, rows: pa.Table | pa.RecordBatchReader, schema: pa.Schema) -> int:
    """Replace the table's rows, then re-create the BTREE on ``id`` (format 4 keeps one).

    External Blob URIs are kept as references, as the fenced overwrite keeps them.
    """
    result = lance.write_dataset(rows.cast(schema), dataset, schema=schema, mode="overwrite", allow_external_blob_outside_bases=True)
    result.create_scalar_index("id", "BTREE", replace=True)
    return int(result.version)


def merge(dataset: lance.LanceDataset, changes: MergeRows, after_step: Callable[[], None]) -> int:
    """Refused: the format-4 release had neither branch merge nor ``.gq`` mutations."""
    raise FormatRefused(
        f"{changes.where}: the format-4 writer (omnigraph-v4) has no branch merge or mutations; nothing was "
        "written (upgrade the graph with `omnigraph-migrate`, then use `omnigraph`)",
        {"table": changes.where},
    )


def repair(dataset: lance.LanceDataset, ids: list[str], null_ids: bool, rows: pa.Table) -> int:
    """Refused: duplicate repair runs only behind the migration barrier (``omnigraph-migrate``)."""
    raise FormatRefused(
        f"{dataset.uri}: duplicate repair runs only behind the migration barrier (`omnigraph-migrate "
        "duplicates`), never through the format-4 writer; nothing was written",
        {"table": dataset.uri},
    )


LEGACY_ROUTER = TableRouter(
    with_pk=False,
    create_table=create_table,
    check_writable=None,
    strict_insert=strict_insert,
    upsert=upsert,
    overwrite=overwrite,
    merge=merge,
    repair=repair,
)

LEGACY_PROFILE = EngineProfile(
    program="omnigraph-v4",
    init_stamp=FORMAT_4,
    read_write_stamps=frozenset({FORMAT_4}),
    read_only_stamps=frozenset({FORMAT_4}),
    router=LEGACY_ROUTER,
    refusal_hint="this graph was upgraded past format 4: upgrade omnigraph first (use `omnigraph`)",
    leased_writes=False,
)
