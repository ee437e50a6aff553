"""Choosing one query of a ``.gq`` source by name, for the command that runs its kind.

A source may hold mutations and read queries side by side. ``omnigraph mutate`` runs mutations
and ``omnigraph query`` runs read queries; each refuses the other kind with a message that names
the command to use (``bad_request`` with the query's line:column).
"""

from __future__ import annotations

from typing import Literal

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.gq.errors import GqError
from omnigraph.engine.gq.parser import parse
from omnigraph.engine.gq.syntax import Query

Kind = Literal["read", "mutation"]
_RUN_WITH = {
    "read": "is a read query (match ... return); run it with `omnigraph query` (HTTP: POST /branches/{branch}/query)",
    "mutation": "is a mutation; run it with `omnigraph mutate` (HTTP: POST /branches/{branch}/mutate)",
}


def choose_query(source: str, name: str | None, kind: Kind) -> Query:
    """Parse ``source`` and pick the query ``name`` (optional when the source holds one query),
    which must be of ``kind``."""
    queries = parse(source)
    names = [query.name for query in queries]
    if name is None:
        if len(queries) > 1:
            raise BadRequest(
                f"the source declares {len(queries)} queries; choose one with --name ({', '.join(names)})",
                {"queries": names},
            )
        query = queries[0]
    else:
        matching = [query for query in queries if query.name == name]
        if not matching:
            raise BadRequest(f"no query named {name!r} (the source declares: {', '.join(names)})", {"queries": names})
        query = matching[0]
    found: Kind = "read" if query.is_read else "mutation"
    if found != kind:
        token = query.token
        raise GqError(f"query {query.name!r} {_RUN_WITH[found]}", token.line, token.column, token.text)
    return query
