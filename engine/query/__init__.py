"""Read queries: a checked ``.gq`` read query executed by DuckDB over a branch's pinned Lance images.

:func:`~omnigraph.engine.query.run.run_query` returns the output document; :func:`~omnigraph.engine.query.run.open_answer`
streams the rows. :mod:`~omnigraph.engine.query.run` picks the commit read (a head or ``--at``),
:mod:`~omnigraph.engine.query.plan` and :mod:`~omnigraph.engine.query.plan` compile the query to SQL,
:mod:`~omnigraph.engine.query.session` builds variable-length traversals, :mod:`~omnigraph.engine.query.session`
bounds DuckDB's memory and :mod:`~omnigraph.engine.query.run` turns values into JSON.
"""
