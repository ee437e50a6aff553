"""The format-5 profile: every keyed write (insert, upsert, overwrite, merge, repair) goes through
the fenced door, :mod:`omnigraph.engine.door.table_store`."""

from __future__ import annotations

import lance

from omnigraph.engine.door import table_store
from omnigraph.engine.door.routing import EngineProfile, TableRouter
from omnigraph.engine.storage.stamps import FORMAT_4, FORMAT_5, FORMAT_MIGRATING


def _check_writable(dataset: lance.LanceDataset, where: str) -> None:
    table_store.require_primary_key(dataset, [table_store.KEY_COLUMN], where)


FENCED_ROUTER = TableRouter(
    with_pk=True,
    create_table=table_store.create_keyed_table,
    check_writable=_check_writable,
    strict_insert=table_store.strict_insert,
    upsert=table_store.upsert,
    overwrite=table_store.overwrite,
    merge=table_store.merge_rows,
    repair=table_store.repair_rows,
)

FENCED_PROFILE = EngineProfile(
    program="omnigraph",
    init_stamp=FORMAT_5,
    read_write_stamps=frozenset({FORMAT_5}),
    read_only_stamps=frozenset({FORMAT_4, FORMAT_MIGRATING, FORMAT_5}),
    router=FENCED_ROUTER,
    refusal_hint=(
        "this graph is not fenced yet: upgrade it with `omnigraph-migrate preflight {uri}` then "
        "`omnigraph-migrate run {uri}` (reads still work)"
    ),
)
