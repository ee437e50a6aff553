"""The server's Prometheus metrics (``prometheus-client``), served at ``GET /metrics``.

With several worker processes each keeps its own counts; ``omnigraph serve`` points
``PROMETHEUS_MULTIPROC_DIR`` at a directory of its own for the workers' files, and a scrape of any
worker sums them all (the client's multiprocess mode). Without that variable (an app embedded in
another process) the process's own registry is served.

Counted by :mod:`omnigraph.server.observe` per answered request: requests by method, route template and
status; their latency; error responses by code; conflicts by code; reads answered (routes of the
``read`` and ``export`` grants); commits published (routes of the other grants only). Counted by
the service: interrupted commits resolved when the server opened the graph read-write. Counted by
the query engine's adjacency cache (:mod:`omnigraph.adjacency`, told of each change
through :func:`count_adjacency`): the adjacencies held and their bytes (summed over live workers,
each of which has a cache of its own), hits, builds and evictions. Computed at each scrape: the
format stamp of the graph and the program's build.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import REGISTRY, Collector

import omnigraph
from omnigraph import __version__
from omnigraph.adjacency import CacheStats, Event

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
CONFLICT_CODES = frozenset({"key_conflict", "read_set_conflict", "merge_conflict", "precondition_failed"})
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

REQUESTS = Counter(
    "omnigraph_http_requests", "HTTP requests answered, by method, route template and status.", ["method", "route", "status"]
)
LATENCY = Histogram(
    "omnigraph_http_request_duration_seconds",
    "Time from the request's arrival to its last response byte.",
    ["method", "route"],
    buckets=LATENCY_BUCKETS,
)
IN_FLIGHT = Gauge("omnigraph_http_requests_in_flight", "Requests being answered now.", multiprocess_mode="livesum")
ERRORS = Counter("omnigraph_http_errors", "Error responses, by error code.", ["code"])
CONFLICTS = Counter("omnigraph_conflicts", "Writes refused by a conflict, by error code.", ["code"])
COMMITS = Counter("omnigraph_commits", "Graph commits published through this server, by route template.", ["route"])
READS = Counter("omnigraph_reads", "Reads answered (2xx on a route of the read or export grant), by route template.", ["route"])
RECOVERIES = Counter(
    "omnigraph_recoveries", "Interrupted commits resolved when the server opened the graph read-write, by outcome.", ["outcome"]
)

ADJACENCY_ENTRIES = Gauge(
    "omnigraph_query_adjacency_entries", "Edge table adjacencies held by the query engine's caches.", multiprocess_mode="livesum"
)
ADJACENCY_BYTES = Gauge(
    "omnigraph_query_adjacency_bytes", "Bytes held by the query engine's adjacency caches.", multiprocess_mode="livesum"
)
ADJACENCY_HITS = Counter("omnigraph_query_adjacency_hits", "Traversals that found their edge table's adjacency in the cache.")
ADJACENCY_BUILDS = Counter("omnigraph_query_adjacency_builds", "Adjacencies built from an edge table image (kept or, too large, not).")
ADJACENCY_EVICTIONS = Counter("omnigraph_query_adjacency_evictions", "Adjacencies evicted from a cache to stay within its bound.")
_ADJACENCY_EVENTS = {"hit": ADJACENCY_HITS, "build": ADJACENCY_BUILDS, "eviction": ADJACENCY_EVICTIONS}


def count_adjacency(event: Event, stats: CacheStats) -> None:
    """The adjacency cache's listener: count ``event`` and set the held entries and bytes to ``stats``'."""
    _ADJACENCY_EVENTS[event].inc()
    ADJACENCY_ENTRIES.set(stats.entries)
    ADJACENCY_BYTES.set(stats.bytes)


def count_recoveries(records: Sequence[omnigraph.Recovery]) -> None:
    """The service's ``on_recovery`` hook."""
    for record in records:
        RECOVERIES.labels(record.outcome).inc()


class _ScrapeTime(Collector):
    """The graph's format stamp (one ``omnigraph_format_stamp{stamp}`` series at 1) and the build."""

    def __init__(self, stamp: Callable[[], str], program: str) -> None:
        self.stamp = stamp
        self.program = program

    def collect(self) -> Iterator[GaugeMetricFamily]:
        stamp = self.stamp()
        stamp_family = GaugeMetricFamily("omnigraph_format_stamp", "The graph's format stamp, read at this scrape.", labels=["stamp"])
        stamp_family.add_metric([str(stamp)], 1.0)
        yield stamp_family
        build = GaugeMetricFamily("omnigraph_build_info", "The serving program and its version.", labels=["program", "version"])
        build.add_metric([self.program, __version__], 1.0)
        yield build


def exposition(stamp: Callable[[], str], program: str) -> bytes:
    """The text exposition of every metric (all workers' when in multiprocess mode).

    ``stamp`` reads the graph's stamp at this scrape.
    """
    if os.environ.get(MULTIPROC_ENV):
        counted = CollectorRegistry()
        MultiProcessCollector(counted)  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
    else:
        counted = REGISTRY
    scraped = CollectorRegistry()
    scraped.register(_ScrapeTime(stamp, program))
    return generate_latest(counted) + generate_latest(scraped)


def forget_process(pid: int) -> None:
    """Drop a stopped worker's live gauges (its counters stay in the sums)."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
