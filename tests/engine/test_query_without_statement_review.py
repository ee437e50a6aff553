"""Answers made without DuckDB keep the statement's budgets: one time limit, no extra builds, no wasted reads.

- The time limit spans a direct answer's adjacency build and the statement it gives up to (one
  clock for the query, not one each).
- Two variable-length hops over two edge tables whose adjacencies each fit the cache but not
  together: the direct answer leaves them to the statement, which builds each once (building both
  first would evict one with the other, and the statement would build them again).
- A degree aggregate grouped by a float column is never one: it reads no column and builds no
  adjacency before the statement answers.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.graph import init_graph
from omnigraph.engine.query import adjacency, degrees, direct, node_ids, run, session
from omnigraph.engine.query.adjacency import AdjacencyCache
from omnigraph.engine.query.limits import TIMEOUT_ENV, QueryTimeout
from omnigraph.engine.query.run import run_query
from omnigraph.engine.storage.store import open_store
from tests.engine.test_query_direct import ACTOR, SCHEMA, _write
from tests.engine.test_query_direct_traversals_review import CITIES, KNOWS, LIVES, PERSONS
from tests.support.call_spy import returns_of
from tests.support.table_writes import edge_columns, overwrite_tables

TRAVERSAL = 'query q() { match { $p: Person { name: "a" }  $p knows{1,3} $f } return { $f.name } order { $f.name } }'
SLOW = 0.7


def _slow(real: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        time.sleep(SLOW)
        return real(*args, **kwargs)

    return call


def test_the_time_limit_spans_the_direct_build_and_the_statement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = init_graph(open_store(str(tmp_path / uuid.uuid4().hex)), SCHEMA, FENCED_PROFILE, ACTOR)
    _write(graph, PERSONS, CITIES, KNOWS, LIVES)
    monkeypatch.setenv(TIMEOUT_ENV, "1")
    with (
        mock.patch.object(adjacency, "_CACHE", AdjacencyCache()),
        mock.patch.object(direct, "build_adjacency", _slow(adjacency.build_adjacency), create=True),
        mock.patch.object(session, "build_adjacency", _slow(adjacency.build_adjacency)),
        mock.patch.object(session, "search", _slow(adjacency.search)),  # the statement's search: 0.7 s
        mock.patch.object(direct, "MOST_BINDINGS", 0),  # the direct answer gives up after its hops
    ):
        started = time.monotonic()
        # With a clock per part the statement's search (0.7 s, from about 0.7 s) would end inside
        # its own second and the query would answer; with one clock it stops once the search is
        # over, at about 1.4 s (the bound leaves room for a loaded machine).
        with pytest.raises(QueryTimeout):
            run_query(graph, TRAVERSAL)
        assert time.monotonic() - started < 2.5


TWO_TRAVERSALS = (
    'query q() { match { $p: Person { name: "a" }  $p knows{1,3} $f  $f livesIn{1,2} $c } return { $c.name } order { $c.name } }'
)


def _builds(graph: Any, limit: int, direct_on: bool) -> tuple[int, list[Any]]:
    cache = AdjacencyCache()
    patches = [
        mock.patch.object(adjacency, "_CACHE", cache),
        mock.patch.object(adjacency, "BUILD_SECONDS_PER_EDGE", 1e9),
        mock.patch.object(run, "cache_limit_bytes", lambda mb: limit),
        mock.patch.object(session, "cache_limit_bytes", lambda mb: limit),
        mock.patch.object(direct, "MOST_BINDINGS", 0),  # the direct answer gives up after its hops
    ]
    if not direct_on:
        patches.append(mock.patch.object(run, "direct_plan", lambda bound: None))
    for patch in patches:
        patch.start()
    try:
        with returns_of(direct, "build_adjacency") as by_direct, returns_of(session, "build_adjacency") as by_statement:
            rows = run_query(graph, TWO_TRAVERSALS)["rows"]
        return len(by_direct) + len(by_statement), rows
    finally:
        for patch in reversed(patches):
            patch.stop()


def test_direct_build_doubles_the_statement_builds(tmp_path: Path) -> None:
    graph = init_graph(open_store(str(tmp_path / uuid.uuid4().hex)), SCHEMA, FENCED_PROFILE, ACTOR)
    _write(graph, PERSONS, CITIES, KNOWS, LIVES)
    cache = AdjacencyCache()
    with mock.patch.object(adjacency, "_CACHE", cache):
        run_query(graph, TWO_TRAVERSALS)
    sizes = [e.nbytes for e in cache._entries.values() if isinstance(e, adjacency.Adjacency)]
    assert len(sizes) == 2, sizes
    limit = max(sizes) + min(sizes) // 2  # each fits, both do not
    statement_builds, expected = _builds(graph, limit, direct_on=False)
    builds, rows = _builds(graph, limit, direct_on=True)
    assert rows == expected
    assert statement_builds == 2
    assert builds == statement_builds, (builds, statement_builds, sizes, limit)


FLOAT_SCHEMA = """
node Person { name: String @key  score: F64? }
edge Knows:   Person -> Person
"""


def test_a_float_grouped_degree_aggregate_reads_and_builds_nothing_before_the_statement(tmp_path: Path) -> None:
    cache = AdjacencyCache()
    with mock.patch.object(adjacency, "_CACHE", cache), mock.patch.object(node_ids, "BUILD_AFTER", 1):
        graph = init_graph(open_store(str(tmp_path / "g")), FLOAT_SCHEMA, FENCED_PROFILE, "tests")
        names = ["a", "b", "c"]
        overwrite_tables(
            graph,
            {
                "node:Person": {"id": names, "name": names, "score": [1.5, None, 1.5]},
                "edge:Knows": edge_columns("k", [("a", "b"), ("b", "c"), ("c", "a")]),
            },
        )
        source = "query q() { match { $p knows $f } return { $p.score, count($f) as n } order { n desc } }"
        with returns_of(run, "degree_rows") as answered, returns_of(degrees, "_column_degrees") as counted:
            for _ in range(3):
                run_query(graph, source)
        assert answered == []  # never a degree aggregate: the statement answered every time (a float key)
        built = [entry for entry in cache._entries.values() if isinstance(entry, adjacency.Adjacency)]
        assert counted == [] and built == [], (counted, built, cache.stats())
