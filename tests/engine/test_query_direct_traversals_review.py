"""Direct answers of variable-length traversals and counts (:mod:`omnigraph.engine.query.direct`) equal the statement's.

A fixed graph with a cycle back to the source, self-loops at the source and at distance min - 1,
parallel edges, a dangling id in the middle and at the end of a path, and a City id that is a
Person id: traversals from a known source, backwards from a known destination, between two keyed
variables and to the variable itself, across two node types, each returned as names, one count,
two counts ordered and limited, and ``limit 0``. Then the cache: a new version of the edge table,
a branch whose edge table differs, a node deleted after the adjacency was built; a query whose
statement stops its search early is left to DuckDB; a deep search stops at the time limit.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.graph import Graph, init_graph
from omnigraph.engine.query import adjacency
from omnigraph.engine.query.adjacency import AdjacencyCache
from omnigraph.engine.query.limits import TIMEOUT_ENV, QueryTimeout
from omnigraph.engine.query.run import run_query
from omnigraph.engine.storage.store import open_store
from tests.engine.test_query_direct import (
    ACTOR,
    SCHEMA,
    WARM,
    _records,
    _rows,
    _run,
    _same_as_duckdb_and_model,
    _stops_early,
    _write,
)
from tests.support.query_model import ModelGraph
from tests.support.table_writes import edge_columns, overwrite_tables

PERSONS: list[tuple[Any, ...]] = [
    ("a", 1, 0.5, None, 0),
    ("b", 2, None, None, 1),
    ("c", 3, None, None, 2),
    ("d", None, None, None, 3),
    ("e", 0, None, None, None),
    ("f", 4, None, None, None),
]
CITIES = ["a", "x"]
KNOWS: list[tuple[str, str, Any]] = [
    ("a", "b", 1),
    ("a", "b", 2),  # parallel
    ("b", "c", None),
    ("c", "d", None),
    ("d", "a", None),  # a cycle back to a
    ("a", "a", None),  # a self-loop at the source
    ("c", "c", None),  # a self-loop two hops from a
    ("b", "zz", None),  # a dangling end in the middle of a path
    ("zz", "e", None),
    ("e", "ghost", None),  # a dangling end at the end of a path
    ("f", "f", None),  # a node whose only edge is its self-loop
]
LIVES = [("a", "x"), ("b", "a"), ("zz", "x"), ("a", "a")]


@pytest.fixture
def fresh_cache() -> Iterator[AdjacencyCache]:
    """A cache of this test's own, where lookups of edges never pay for an adjacency (only a traversal's statement builds one)."""
    cache = AdjacencyCache()
    with mock.patch.object(adjacency, "_CACHE", cache), mock.patch.object(adjacency, "BUILD_SECONDS_PER_EDGE", 1e9):
        yield cache


@pytest.fixture
def graph(tmp_path: Path) -> tuple[Graph, ModelGraph]:
    graph = init_graph(open_store(str(tmp_path / uuid.uuid4().hex)), SCHEMA, FENCED_PROFILE, ACTOR)
    _write(graph, PERSONS, CITIES, KNOWS, LIVES)
    return graph, ModelGraph.of_records(graph.catalog, _records(PERSONS, CITIES, KNOWS, LIVES))


MATCHES = {
    "cycle to itself": '$p: Person { name: "a" }  $p knows{1,2} $p',
    "cycle to itself 2-4": '$p: Person { name: "a" }  $p knows{2,4} $p',
    "self-loop only": '$p: Person { name: "f" }  $p knows{1,3} $p',
    "self-loop only 2-3": '$p: Person { name: "f" }  $p knows{2,3} $p',
    "both keyed": '$p: Person { name: "a" }  $q: Person { name: "d" }  $p knows{2,3} $q',
    "both keyed backwards": '$p: Person { name: "a" }  $q: Person { name: "d" }  $q knows{1,3} $p',
    "backwards": '$f: Person { name: "d" }  $p knows{1,3} $f',
    "backwards through a dangling id": '$f: Person { name: "e" }  $p knows{1,3} $f',
    "through a dangling id": '$p: Person { name: "b" }  $p knows{2,2} $f',
    "loop at min - 1": '$p: Person { name: "a" }  $p knows{3,3} $f',
    "loop at min - 1 backwards": '$f: Person { name: "c" }  $p knows{3,3} $f',
    "two types": '$p: Person { name: "a" }  $p livesIn{1,3} $c',
    "two types 2-3": '$p: Person { name: "a" }  $p livesIn{2,3} $c',
    "two types backwards": '$c: City { name: "a" }  $p livesIn{1,3} $c',
    "two types backwards x": '$c: City { name: "x" }  $p livesIn{1,3} $c',
    "two hops": '$p: Person { name: "a" }  $p knows{1,2} $f  $f knows{1,2} $g',
    "then lives": '$p: Person { name: "a" }  $p knows{1,3} $f  $f livesIn{1,2} $c',
    "a missing key": '$p: Person { name: "zz" }  $p knows{1,3} $f',
    "repeated hop": '$p: Person { name: "a" }  $p knows{1,2} $f  $p knows{1,2} $f',
    "two bounds one pair": '$p: Person { name: "a" }  $p knows{1,1} $f  $p knows{2,3} $f',
    "compare": '$p: Person { name: "a" }  $p knows{1,3} $f  $p.age < $f.age',
    "keys of two types with one id": '$p: Person { name: "a" }  $c: City { name: "a" }  $p livesIn{1,3} $c',
    "a dangling id then a hop": '$p: Person { name: "b" }  $p knows $x  $x knows{1,2} $y',
}
RETURNS = {
    "names": ("$p.name", "order { $p.name }"),
    "count": ("count($p) as n", ""),
    "two counts": ("count($p) as n, count($p) as m", "order { n desc } limit 1"),
    "limit 0": ("count($p) as n", "limit 0"),
}


def _returned(match: str, kind: str) -> tuple[str, str]:
    returned, tail = RETURNS[kind]
    last = next(var for var in ("$y", "$g", "$c", "$f", "$q", "$p") if var in match)
    if kind == "names":
        names = [f"{var}.name" for var in ("$p", "$q", "$f", "$g", "$c", "$x", "$y") if var in match]
        return ", ".join(names), "order { " + ", ".join(names) + " }"
    return returned.replace("$p", last), tail


@pytest.mark.parametrize("kind", sorted(RETURNS))
@pytest.mark.parametrize("name", sorted(MATCHES))
def test_review_matches(graph: tuple[Graph, ModelGraph], fresh_cache: AdjacencyCache, name: str, kind: str) -> None:
    g, model = graph
    run_query(g, WARM)
    returned, tail = _returned(MATCHES[name], kind)
    source = f"query q() {{ match {{ {MATCHES[name]} }} return {{ {returned} }} {tail} }}"
    _same_as_duckdb_and_model(g, model, source, {}, direct_expected=True)


POINT = 'query q() { match { $p: Person { name: "a" }  $p knows{1,3} $f } return { $f.name } order { $f.name } }'


def _knows(pairs: list[tuple[str, str]]) -> dict[str, list[Any]]:
    return edge_columns("k", pairs) | {"since": [None] * len(pairs)}


def test_an_adjacency_of_another_version_or_branch_is_never_read(graph: tuple[Graph, ModelGraph], fresh_cache: AdjacencyCache) -> None:
    """A new version of the edge table, a branch whose edge table differs, a node deleted after the adjacency was built."""
    from omnigraph.engine.ops.branches import create_branch

    g, _ = graph
    run_query(g, WARM)
    document, answered = _run(g, POINT, {})
    assert answered[-1] is not None and _rows(document) == [["a"], ["b"], ["c"], ["d"], ["e"]]
    overwrite_tables(g, {"edge:Knows": _knows([("a", "e")])}, actor=ACTOR)
    builds = fresh_cache.stats().builds
    document, answered = _run(g, POINT, {})
    assert answered[-1] is not None and _rows(document) == [["e"]]  # the new version's adjacency, built for it: never the old one's
    assert fresh_cache.stats().builds == builds + 1
    create_branch(g, "b")
    overwrite_tables(g, {"edge:Knows": _knows([("a", "c"), ("c", "d")])}, branch="b", actor=ACTOR)
    assert [_rows(_run(g, POINT, {}, "b")[0]) for _ in range(2)] == [[["c"], ["d"]]] * 2
    document, answered = _run(g, POINT, {})
    assert answered[-1] is not None and _rows(document) == [["e"]]
    none = [None, None]
    overwrite_tables(
        g, {"node:Person": {"id": ["a", "b"], "name": ["a", "b"], "age": none, "score": none, "tags": none, "rank": none}}, actor=ACTOR
    )
    count = 'query q() { match { $p: Person { name: "a" }  $p knows{1,3} $f } return { count($f) as n } }'
    for source, expected in ((POINT, []), (count, [[0]])):
        document, answered = _run(g, source, {})
        assert answered[-1] is not None and _rows(document) == expected == _rows(_run(g, source, {}, allow_direct=False)[0])


def test_a_search_whose_statement_stops_early_is_left_to_duckdb(graph: tuple[Graph, ModelGraph], fresh_cache: AdjacencyCache) -> None:
    """What the property test drew (``--hypothesis-seed=3``): a limit without order over one traversal, expected direct."""
    g, model = graph
    run_query(g, WARM)
    for limit in (0, 2):
        source = f'query q() {{ match {{ $p: Person {{ name: "a" }}  $p knows{{1,2}} $q }} return {{ $p.name }} limit {limit} }}'
        assert _stops_early(g, source, {})
        _same_as_duckdb_and_model(g, model, source, {}, direct_expected=False)


def test_a_deep_search_from_a_key_stops_at_the_time_limit(
    tmp_path: Path, fresh_cache: AdjacencyCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain, its adjacency held: the direct search checks the time limit before every hop."""
    g = init_graph(open_store(str(tmp_path / "chain")), SCHEMA, FENCED_PROFILE, ACTOR)
    names = [f"n{i:06d}" for i in range(20000)]
    none = [None] * len(names)
    person = {"id": names, "name": names, "age": none, "score": none, "tags": none, "rank": none}
    overwrite_tables(g, {"node:Person": person, "edge:Knows": _knows(list(itertools.pairwise(names)))}, actor=ACTOR)
    source = 'query q() { match { $p: Person { name: "n000000" }  $p knows{1,1000000} $f } return { count($f) as n } }'
    run_query(g, 'query w() { match { $p: Person { name: "n019998" }  $p knows{1,2} $f } return { count($f) as n } }')
    assert fresh_cache.stats().entries == 1
    monkeypatch.setenv(TIMEOUT_ENV, "0.05")
    with pytest.raises(QueryTimeout):
        _run(g, source, {})
