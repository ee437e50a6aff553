"""The door: the only code that writes rows of keyed tables.

:mod:`~omnigraph.engine.door.routing` is the vocabulary every writer shares: the
:class:`~omnigraph.engine.door.routing.EngineProfile` of a binary (the stamps it accepts) and the
:class:`~omnigraph.engine.door.routing.TableRouter` it carries, whose typed operations are every row
write of the write protocol (strict insert, upsert, overwrite, merge, repair).
:mod:`~omnigraph.engine.door.table_store` is the fenced door (format 5: every insert and upsert merges
ON exactly the table's primary key) with the format-5 profile ``FENCED_PROFILE``;
:mod:`~omnigraph.engine.door.legacy` is the format-4 writer emulation (``omnigraph-v4``) with its
profile ``LEGACY_PROFILE``.

``tests/guards/test_write_door_guard.py`` fails if code outside ``table_store.py`` and
``legacy.py`` appends to, or merges into, a keyed table. The door imports only
:mod:`omnigraph.engine.storage`, :mod:`omnigraph.engine.errors` and :mod:`omnigraph.engine.schema`.
The package itself defines no names: callers import them from the module that defines them.
"""
