"""The traversal search over a cached adjacency (:mod:`omnigraph.engine.query.adjacency`).

* Property test (hypothesis): on small random graphs written straight through the commit path
  (cycles, self-loops, parallel edges, edges whose endpoint is missing from its node table, ids
  that collide across node types), variable-length traversals of every kind (directed, undirected,
  across two node types; searched from the sources, backwards from the destinations, or from every
  source) give the same pair table and the same answer over the adjacency as in DuckDB (no cache,
  ``OMNIGRAPH_QUERY_ADJACENCY_MB=0``); an unordered ``limit`` over the adjacency answers ``N``
  rows of the whole answer.
* The cache: a query reuses the adjacency; a new version of the table is a new entry; entries
  are evicted least recently used first under a small bound; an adjacency larger than the bound
  is built once, not kept, and its traversals run in DuckDB with the same answer; two threads
  that ask for one missing entry build it once.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import BadRequest
from omnigraph.engine.graph import Graph, init_graph
from omnigraph.engine.query import adjacency, node_ids, run, session
from omnigraph.engine.query.adjacency import ADJACENCY_ENV, AdjacencyCache, CacheStats, adjacency_of
from omnigraph.engine.query.run import open_answer
from omnigraph.engine.query.session import Traversals
from omnigraph.engine.storage.store import open_store
from tests.support.table_writes import edge_columns, overwrite_tables

SCHEMA = """
node Person { name: String @key }
node City   { name: String @key }
edge Knows:   Person -> Person
edge LivesIn: Person -> City
"""
PEOPLE = ["a", "b", "c", "d", "e"]
CITIES = ["a", "b", "x"]  # "a" and "b" are Person ids too
MISSING = ["zz", "x"]  # in no Person table ("x" is a City); "c" and "zz" are no City


def _write(graph: Graph, people: list[str], cities: list[str], knows: list[tuple[str, str]], lives: list[tuple[str, str]]) -> None:
    """One commit that overwrites every table with these rows (no endpoint check: edges may dangle)."""
    tables = {
        "node:Person": {"id": people, "name": people},
        "node:City": {"id": cities, "name": cities},
        "edge:Knows": edge_columns("k", knows),
        "edge:LivesIn": edge_columns("l", lives),
    }
    overwrite_tables(graph, tables)


def _run(graph: Graph, query: str) -> tuple[list[list[Any]], list[set[tuple[str, str]]], CacheStats]:
    """The answer's rows, every pair table the query built, and the cache's counts after it.

    The statement answers (no direct answer, which reads the adjacency without a pair table):
    these tests compare the statement's two searches.
    """
    tables: list[set[tuple[str, str]]] = []
    relation = Traversals.relation

    def spy(traversals: Traversals, hop: Any) -> str | None:
        fresh = hop not in traversals._built
        name = relation(traversals, hop)
        if name is not None and fresh:
            tables.append(set(traversals._session.execute(f'SELECT a, b FROM "{name}"').fetchall()))
        return name

    with (
        mock.patch.object(Traversals, "relation", spy),
        mock.patch.object(run, "direct_plan", lambda bound: None),
        open_answer(graph, query) as answer,
    ):
        rows = list(answer.rows())
    return rows, tables, adjacency.adjacency_cache().stats()


@pytest.fixture
def fresh_cache() -> Iterator[AdjacencyCache]:
    """A cache of this test's own (counts from zero), holding adjacencies only (no node id index is built)."""
    cache = AdjacencyCache()
    with mock.patch.object(adjacency, "_CACHE", cache), mock.patch.object(node_ids, "BUILD_AFTER", 10**9):
        yield cache


ids = st.sampled_from(PEOPLE + MISSING)


@st.composite
def traversal(draw: Any) -> tuple[str, bool]:
    """One read query with a variable-length traversal, and whether it has an unordered limit."""
    low = draw(st.integers(1, 3))
    high = draw(st.integers(max(low, 2), 4))  # {1,1} is a join with the edges, no search
    edge, far = draw(st.sampled_from([("knows", "Person"), ("<knows>", "Person"), ("livesIn", "City")]))
    start = draw(st.sampled_from(["sources", "destinations", "every source"]))
    clauses = [f"$a: Person  $b: {far}  $a {edge}{{{low},{high}}} $b"]
    if start == "sources":
        clauses.append(f'$a.name {draw(st.sampled_from(["=", "<=", ">"]))} "{draw(st.sampled_from(PEOPLE))}"')
    elif start == "destinations":
        clauses.append(f'$b.name {draw(st.sampled_from(["=", ">=", "!="]))} "{draw(st.sampled_from(PEOPLE + CITIES))}"')
    limited = draw(st.booleans())
    tail = f"limit {draw(st.integers(0, 4))}" if limited else "order { $a.name, $b.name }"
    return f"query q() {{ match {{ {'  '.join(clauses)} }} return {{ $a.name, $b.name }} {tail} }}", limited


def _check(root: str, data: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    people = data.draw(st.lists(st.sampled_from(PEOPLE), min_size=1, unique=True))
    cities = data.draw(st.lists(st.sampled_from(CITIES), unique=True))
    knows = data.draw(st.lists(st.tuples(ids, ids), max_size=14))  # self-loops and parallel edges included
    lives = data.draw(st.lists(st.tuples(ids, st.sampled_from([*CITIES, "c", "zz"])), max_size=6))
    graph = init_graph(open_store(root), SCHEMA, FENCED_PROFILE, "tests")
    _write(graph, people, cities, knows, lives)
    for _ in range(5):
        query, limited = data.draw(traversal())
        monkeypatch.delenv(ADJACENCY_ENV, raising=False)
        before = adjacency.adjacency_cache().stats()
        found, found_pairs, after = _run(graph, query)
        assert after.builds + after.hits > before.builds + before.hits, query  # searched over the adjacency
        monkeypatch.setenv(ADJACENCY_ENV, "0")
        if not limited:
            expected, expected_pairs, _ = _run(graph, query)
            assert (found, found_pairs) == (expected, expected_pairs), (query, knows, lives)
            continue
        whole, _, _ = _run(graph, query.rsplit("limit", 1)[0] + "}")
        limit = int(query.rsplit("limit", 1)[1].strip(" }"))
        assert all(row in whole for row in found), (query, knows, lives)
        # an early stop counts pairs: one whose end is missing from its node table yields no row
        dangling = any(end not in people for edge in knows for end in edge) or any(
            src not in people or dst not in cities for src, dst in lives
        )
        assert len(found) == min(limit, len(whole)) or (dangling and len(found) < limit), (query, knows, lives)


@settings(max_examples=20, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_adjacency_search_answers_as_the_duckdb_search(
    tmp_path: Path, data: Any, monkeypatch: pytest.MonkeyPatch, fresh_cache: AdjacencyCache
) -> None:
    _check(str(tmp_path / uuid.uuid4().hex), data, monkeypatch)


CHAIN = [("a", "b"), ("b", "c"), ("c", "d")]
WALK = 'query q() { match { $a: Person { name: "a" }  $a knows{1,3} $b } return { $b.name } order { $b.name } }'


@pytest.fixture
def chain(tmp_path: Path) -> Graph:
    graph = init_graph(open_store(str(tmp_path / "g")), SCHEMA, FENCED_PROFILE, "tests")
    _write(graph, PEOPLE, CITIES, CHAIN, [("a", "x")])
    return graph


def test_a_query_reuses_the_adjacency_and_a_new_version_is_a_new_entry(chain: Graph, fresh_cache: AdjacencyCache) -> None:
    rows, _, stats = _run(chain, WALK)
    assert rows == [["b"], ["c"], ["d"]]
    assert (stats.entries, stats.builds, stats.hits, stats.evictions) == (1, 1, 0, 0) and stats.bytes > 0
    _, _, stats = _run(chain, WALK)
    assert (stats.entries, stats.builds, stats.hits) == (1, 1, 1)
    _write(chain, PEOPLE, CITIES, [*CHAIN, ("d", "e")], [("a", "x")])  # a new image of the edge table
    rows, _, stats = _run(chain, WALK)
    assert rows == [["b"], ["c"], ["d"]]
    assert (stats.entries, stats.builds, stats.hits) == (2, 2, 1)
    rows, _, stats = _run(chain, WALK.replace("{1,3}", "{1,4}"))
    assert rows == [["b"], ["c"], ["d"], ["e"]] and (stats.builds, stats.hits) == (2, 2)


def _edges(*pairs: tuple[str, str]) -> pa.Table:
    return pa.table({"src": [s for s, _ in pairs], "dst": [d for _, d in pairs]})


def test_the_least_recently_used_entries_are_evicted_under_the_bound() -> None:
    cache = AdjacencyCache()
    built = {name: adjacency_of(_edges(*CHAIN, (name, "a")), True) for name in ("k1", "k2", "k3")}
    size = built["k1"].nbytes
    assert {entry.nbytes for entry in built.values()} == {size}
    limit = 2 * size
    key = {name: ("uri", None, 1, name) for name in built}
    for name in ("k1", "k2", "k1", "k3"):  # k1 used again after k2: k2 is the least recently used
        assert cache.get(key[name], lambda name=name: built[name], limit, 1) is built[name]
    assert cache.stats() == CacheStats(entries=2, bytes=2 * size, hits=1, builds=3, evictions=1)
    assert cache.get(key["k1"], lambda: built["k1"], limit, 1) is built["k1"]  # kept
    assert cache.get(key["k2"], lambda: built["k2"], limit, 1) is built["k2"]  # built again, k3 evicted
    assert cache.stats() == CacheStats(entries=2, bytes=2 * size, hits=2, builds=4, evictions=2)
    assert cache.get(key["k1"], lambda: built["k1"], 0, 1) is None  # a bound of 0 keeps nothing
    assert cache.stats().entries == 0 and cache.stats().bytes == 0


def test_an_adjacency_over_the_bound_is_built_once_and_its_traversals_run_in_duckdb(
    chain: Graph, fresh_cache: AdjacencyCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ADJACENCY_ENV, "0")
    expected, expected_pairs, stats = _run(chain, WALK)
    assert stats == CacheStats(entries=0, bytes=0, hits=0, builds=0, evictions=0)
    monkeypatch.delenv(ADJACENCY_ENV)
    monkeypatch.setattr(session, "cache_limit_bytes", lambda memory_mb: 64)  # smaller than any adjacency
    searched = mock.Mock(wraps=adjacency.search)
    monkeypatch.setattr(session, "search", searched)
    for _ in range(2):  # its size is remembered: not built again
        rows, pairs, stats = _run(chain, WALK)
        assert (rows, pairs) == (expected, expected_pairs)
        assert stats == CacheStats(entries=0, bytes=0, hits=0, builds=1, evictions=0)
    assert not searched.called
    built = mock.Mock(wraps=adjacency.build_adjacency)
    monkeypatch.setattr(session, "build_adjacency", built)
    monkeypatch.setattr(session, "cache_limit_bytes", lambda memory_mb: 8 * len(CHAIN) - 1)  # fewer bytes than its rows need
    assert _run(chain, WALK)[0] == expected and not built.called  # not even read


def test_two_threads_that_ask_for_one_missing_entry_build_it_once() -> None:
    cache = AdjacencyCache()
    calls = []

    def build() -> adjacency.Adjacency:
        calls.append(threading.get_ident())
        time.sleep(0.2)
        return adjacency_of(_edges(*CHAIN), True)

    found: list[Any] = []
    threads = [threading.Thread(target=lambda: found.append(cache.get(("uri", None, 1, "f"), build, 10**6, 1))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(found) == 2 and found[0] is found[1] is not None
    assert (cache.stats().builds, cache.stats().hits) == (1, 1)


def test_a_failed_build_is_built_again_by_the_next_query() -> None:
    cache = AdjacencyCache()

    def failing() -> adjacency.Adjacency:
        raise OSError("storage gone")

    with pytest.raises(OSError, match="storage gone"):
        cache.get(("uri", None, 1, "g"), failing, 10**6, 1)
    assert cache.get(("uri", None, 1, "g"), lambda: adjacency_of(_edges(*CHAIN), True), 10**6, 1) is not None
    assert cache.stats().builds == 1 and cache.stats().entries == 1


@pytest.mark.parametrize("adjacency_mb", [None, "0"], ids=["adjacency", "duckdb"])
def test_a_destination_of_another_type_with_its_sources_id_is_reported(
    chain: Graph, adjacency_mb: str | None, monkeypatch: pytest.MonkeyPatch, fresh_cache: AdjacencyCache
) -> None:
    """Person ``a`` lives in City ``a``: two nodes, so the pair is reported (the search in DuckDB
    once took the city for the person, already visited, and dropped it)."""
    if adjacency_mb is not None:
        monkeypatch.setenv(ADJACENCY_ENV, adjacency_mb)
    _write(chain, PEOPLE, CITIES, CHAIN, [("a", "a"), ("b", "x")])
    query = "query q() { match { $p: Person  $p livesIn{1,2} $c } return { $p.name, $c.name } order { $p.name } }"
    assert _run(chain, query)[0] == [["a", "a"], ["b", "x"]]


def test_the_bound_is_a_whole_number_of_mib(chain: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ADJACENCY_ENV, "lots")
    with pytest.raises(BadRequest, match="OMNIGRAPH_QUERY_ADJACENCY_MB='lots': expected a whole number of MiB, 0 for none"):
        _run(chain, WALK)
    monkeypatch.setenv(ADJACENCY_ENV, "1")
    assert _run(chain, WALK)[0] == [["b"], ["c"], ["d"]]


@given(
    st.lists(st.tuples(st.sampled_from("abcdefgh"), st.sampled_from("abcdefgh")), min_size=1, max_size=30),
    st.lists(st.sampled_from("abcdefghxyz"), max_size=12),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_few_ids_are_found_by_binary_search_as_by_hashing(edges: list[tuple[str, str]], wanted: list[str]) -> None:
    """Positions of up to BISECT_IDS ids come from the sorted ids; more, from one hash lookup: the same positions."""
    table = pa.table({"src": [a for a, _ in edges], "dst": [b for _, b in edges]})
    for one_space in (True, False):
        built = adjacency_of(table, one_space)
        for side in ("sources", "targets"):
            searched = built.positions(pa.array(wanted, pa.string()), side)
            with mock.patch.object(adjacency, "BISECT_IDS", -1):
                hashed = built.positions(pa.array(wanted, pa.string()), side)
            assert searched.tolist() == hashed.tolist()
            space = built.sources if side == "sources" else built.targets
            assert sorted(space.to_pylist()[p] for p in searched.tolist()) == sorted({w for w in wanted if w in space.to_pylist()})


HOP = 'query q() { match { $a: Person { name: "b" }  $a knows $b } return { $b.name } order { $b.name } }'


@pytest.mark.parametrize("seconds_per_edge", [1e9, 0.0], ids=["lookups cheaper than a build", "lookups that paid for it"])
def test_lookups_of_edges_build_the_adjacency_once_they_have_spent_what_it_costs(
    chain: Graph, fresh_cache: AdjacencyCache, monkeypatch: pytest.MonkeyPatch, seconds_per_edge: float
) -> None:
    """A direct one-hop answer reads its edges through the BTREE and counts the time; once that time
    reaches the adjacency's estimated build cost the adjacency is built, and the next answers read it."""
    monkeypatch.setattr(adjacency, "BUILD_SECONDS_PER_EDGE", seconds_per_edge)
    answers, stats = [], []
    for _ in range(3):
        with open_answer(chain, HOP) as answer:
            answers.append(list(answer.rows()))
        stats.append(adjacency.adjacency_cache().stats())
    assert answers == [[["c"]]] * 3
    if seconds_per_edge:
        assert [(s.builds, s.hits, s.entries) for s in stats] == [(0, 0, 0)] * 3  # every answer looked its edges up
    else:
        assert [(s.builds, s.hits, s.entries) for s in stats] == [(1, 0, 1), (1, 1, 1), (1, 2, 1)]  # built once, then read
