"""Checking a ``.gq`` source before any graph is opened, for callers that want the refusal before any I/O.

These are the checks :meth:`omnigraph.Graph.mutate` and :meth:`omnigraph.Graph.query` make first.

Neither function reads a graph: they parse the source, pick the query (``name`` may be left out
when the source declares one) and check its kind, so a typo is refused with its line and column
even when the graph is unreachable. Type checks against a schema happen when the query runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from omnigraph.engine.gq.parser import choose_query
from omnigraph.engine.ops.mutate import select_query
from omnigraph.engine.ops.write import MAX_ROWS

__all__ = ["MAX_ROWS", "MutationSource", "check_mutation", "check_read_query"]


@dataclass(frozen=True)
class MutationSource:
    """A mutation query picked from a source: its name and the verb of each statement, in order.

    Each verb is ``insert``, ``update`` or ``delete``.
    """

    name: str
    verbs: tuple[str, ...]


def check_mutation(source: str, name: str | None = None) -> MutationSource:
    """Parse ``source`` and pick the mutation ``name``.

    Raises:
        BadRequest: a syntax error (line:column), no such query or several without ``name``, a
            read query (it names ``omnigraph query``), or inserts/updates mixed with deletes.
    """
    query = select_query(source, name)
    return MutationSource(query.name, tuple(statement.verb for statement in query.statements))


def check_read_query(source: str, name: str | None = None) -> str:
    """Parse ``source`` and pick the read query ``name``; its name.

    Raises:
        BadRequest: a syntax error (line:column), no such query or several without ``name``, or a
            mutation (it names ``omnigraph mutate``).
    """
    return choose_query(source, name, "read").name
