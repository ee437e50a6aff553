"""Type-checking a ``.gq`` source against a ``.pg`` schema without any graph (``omnigraph lint``).

:func:`lint` reads no graph and writes nothing; the report's fields and rules are those of
:mod:`omnigraph.engine.gq.lint` (``docs/queries.md``, "Linting").
"""

from __future__ import annotations

from typing import Any

from omnigraph.engine.gq.lint import lint as _lint

__all__ = ["lint"]


def lint(schema_source: str, query_source: str, *, schema_path: str = "<schema>", query_path: str = "<query>") -> dict[str, Any]:
    """The lint report of every query of ``query_source`` against the schema ``schema_source``.

    ``schema_path`` and ``query_path`` only name the sources in the report. A query source that
    does not parse, or a query that does not check, is reported (``status`` ``error``), not raised.

    Raises:
        BadRequest: the schema is refused (``schema error at LINE:COLUMN``).
    """
    return _lint(schema_source, query_source, schema_path=schema_path, query_path=query_path)
