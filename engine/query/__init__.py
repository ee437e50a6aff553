"""Read queries: a checked ``.gq`` read query executed by DuckDB over a branch's pinned Lance images.

:func:`~engine.query.run.run_query` returns the output document; :func:`~engine.query.run.open_answer`
streams the rows. :mod:`~engine.query.at` picks the commit read (a head or ``--at``),
:mod:`~engine.query.plan` and :mod:`~engine.query.sql` compile the query to SQL,
:mod:`~engine.query.traverse` builds variable-length traversals, :mod:`~engine.query.session`
bounds DuckDB's memory and :mod:`~engine.query.render` turns values into JSON.
"""

from engine.query.run import Answer, open_answer, run_query

__all__ = ["Answer", "open_answer", "run_query"]
