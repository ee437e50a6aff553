"""Records: JSONL graph records in and out, validated against the schema, as rows or Arrow tables.

:mod:`~omnigraph.engine.records.parse` is the row-at-a-time reference parser (its typed rows are in
:mod:`~omnigraph.engine.records.parse`), :mod:`~omnigraph.engine.records.read` the load's block reader, which parses
2 MiB blocks columnar (:mod:`~omnigraph.engine.records.columnar`, with the column coercions of
:mod:`~omnigraph.engine.records.columnar`) where it can and falls back to the reference parser line by line,
:mod:`~omnigraph.engine.records.read` splits a file into blocks, :mod:`~omnigraph.engine.records.record_set`
holds a load's validated rows (in memory, or spooled to Arrow files by
:mod:`~omnigraph.engine.records.record_set`), :mod:`~omnigraph.engine.records.record_set` checks edge endpoints and
:mod:`~omnigraph.engine.records.parse` converts rows to Arrow tables and stored tables back to records.
Records import nothing of the engine but :mod:`omnigraph.engine.schema` and :mod:`omnigraph.engine.errors`.
"""
