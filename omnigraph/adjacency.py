"""The adjacency cache of this process's read queries, for a program that reports on it (a server's ``/metrics``).

Variable-length traversals search an in-memory adjacency of their edge table, and lookups by key
read node rows through an in-memory id index of their node table, which each process builds
once per table version and keeps within ``OMNIGRAPH_QUERY_ADJACENCY_MB`` (``docs/queries.md``,
"How a query runs, and what it costs"). :func:`adjacency_stats` gives its
counts now; :func:`listen` has a function told of each hit, build and eviction. Importing this
module loads Arrow and numpy.
"""

from __future__ import annotations

from omnigraph.engine.query.adjacency import CacheStats, Event, Listener, adjacency_cache

__all__ = ["CacheStats", "Event", "Listener", "adjacency_stats", "listen"]


def adjacency_stats() -> CacheStats:
    """The cache's counts now: ``entries`` and ``bytes`` held, ``hits``, ``builds`` and ``evictions`` so far."""
    return adjacency_cache().stats()


def listen(listener: Listener | None) -> None:
    """Have ``listener(event, stats)`` called on each ``"hit"``, ``"build"`` and ``"eviction"``, with the counts after it.

    It replaces the previous listener (None: no listener). It is called while the cache is
    locked, from the thread of the query: it must be quick and must not run a query.
    """
    adjacency_cache().listen(listener)
