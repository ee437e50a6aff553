"""The door: the only code that writes rows of keyed tables.

:mod:`~omnigraph.engine.door.table_store` is the fenced door (format 5: every insert and upsert merges ON
exactly the table's primary key), :mod:`~omnigraph.engine.door.legacy` the format-4 writer emulation
(``omnigraph-v4``), :mod:`~omnigraph.engine.door.routing` the router contract an :class:`EngineProfile`
carries (every row write of the write protocol is one of its typed operations: strict insert,
upsert, overwrite, merge, repair) and :mod:`~omnigraph.engine.door.routing` the format-5 profile. ``tests/test_write_door_guard.py``
fails if code outside ``table_store.py`` and ``legacy.py`` appends to, or merges into, a keyed
table. The door imports only :mod:`omnigraph.engine.storage`, :mod:`omnigraph.engine.errors` and :mod:`omnigraph.engine.schema`.
"""
