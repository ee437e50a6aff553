"""Read queries: a checked ``.gq`` read query executed by DuckDB over a branch's pinned Lance images.

:func:`~omnigraph.engine.query.run.run_query` returns the output document;
:func:`~omnigraph.engine.query.run.open_answer` streams the rows.
:mod:`~omnigraph.engine.query.run` picks the commit read (a head or ``--at``), runs the query and
turns values into JSON; :mod:`~omnigraph.engine.query.plan` compiles the query to one SQL
statement (key-implied ids, SQL operands and comparisons); :mod:`~omnigraph.engine.query.session`
bounds DuckDB's memory and builds variable-length traversals. This package exports no names:
callers import each name from the module that defines it.
"""
