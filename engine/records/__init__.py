"""Records: JSONL graph records in and out, validated against the schema, as rows or Arrow tables.

:mod:`~omnigraph.engine.records.parse` is the row-at-a-time reference parser with its typed
rows; it also checks edge endpoints against the file plus committed state, converts rows to
Arrow tables and stored tables back to records. :mod:`~omnigraph.engine.records.read` is the
load's reader: it takes the input in blocks of whole lines
(:mod:`~omnigraph.engine.records.jsonl_blocks`), parses each block columnar
(:mod:`~omnigraph.engine.records.columnar`, the fast path with its column coercions) where it
can and falls back to the reference parser line by line.
:mod:`~omnigraph.engine.records.record_set` holds a load's validated rows (in memory, or spooled
to Arrow files) and checks edge endpoints on columns.

Records import nothing of the engine but :mod:`omnigraph.engine.schema` and
:mod:`omnigraph.engine.errors`. This package exports no names: callers import each name from the
module that defines it.
"""
