"""Degree aggregates (``omnigraph.engine.query.degrees``) answer as the DuckDB statement does.

Random small graphs written without an endpoint check (edges may dangle: an endpoint missing from
its node table, or a City id where a Person is expected), with self-loops, parallel edges, ids
shared by a Person and a City, and nullable group keys. For each random degree aggregate (the
count of a one-hop match, grouped or not by columns of either end, ordered by counts or keys in
either direction, limited or not), the answer must equal the statement's, row for row and in
order, both when it is counted from the edge table's columns (no adjacency held) and when it is
read off the adjacency, and that path must have answered (it is checked by spying on it). A
degree aggregate never builds an adjacency itself, unless its counts have cost what building it
costs; past ``COUNTED_EDGES`` rows without an adjacency the statement answers.
"""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.graph import Graph, init_graph
from omnigraph.engine.query import adjacency, degrees, node_ids, run
from omnigraph.engine.query.adjacency import AdjacencyCache
from omnigraph.engine.query.explain import explain_query
from omnigraph.engine.query.run import run_query
from omnigraph.engine.storage.store import open_store
from tests.support.call_spy import returns_of
from tests.support.table_writes import edge_columns, overwrite_tables

SCHEMA = """
node Person { name: String @key  age: I32?  born: Date? }
node City   { name: String @key  size: I32? }
edge Knows:   Person -> Person
edge LivesIn: Person -> City
"""
PEOPLE = ["a", "b", "c", "d", "e", "f"]
CITIES = ["a", "b", "x"]  # "a" and "b" are Person ids too
ENDS = [*PEOPLE, "x", "zz"]  # "x" is a City only, "zz" nothing


def _write(graph: Graph, people: list[tuple[str, int | None]], cities: list[tuple[str, int | None]], knows: Any, lives: Any) -> None:
    """One commit that overwrites every table with these rows (no endpoint check: edges may dangle)."""
    names = [name for name, _ in people]
    born = [None if age is None else dt.date(2000, 1, 1 + age) for _, age in people]
    person = {"id": names, "name": names, "age": [age for _, age in people], "born": born}
    city = {"id": [name for name, _ in cities], "name": [name for name, _ in cities], "size": [size for _, size in cities]}
    tables = {"node:Person": person, "node:City": city, "edge:Knows": edge_columns("k", knows), "edge:LivesIn": edge_columns("l", lives)}
    overwrite_tables(graph, tables)


@pytest.fixture
def fresh_cache() -> Any:
    """A cache of the test's own; a node column is built on its first use."""
    cache = AdjacencyCache()
    with mock.patch.object(adjacency, "_CACHE", cache), mock.patch.object(node_ids, "BUILD_AFTER", 1):
        yield cache


@st.composite
def comparisons(draw: Any, src: str, dst: str, dst_type: str) -> tuple[str, bool]:
    """A comparison of two same-typed columns of the hop's ends (``src`` is a Person), counted, or of one with a
    constant, left to the statement; and whether it is counted."""
    dst_columns = {"name": "name", "age": "age" if dst_type == "Person" else "size", "born": "born" if dst_type == "Person" else None}
    kind = draw(st.sampled_from([kind for kind, column in dst_columns.items() if column is not None]))
    left, right = f"{src}.{kind}", f"{dst}.{dst_columns[kind]}"
    if draw(st.booleans()):
        left, right = right, left
    counted = not (kind == "age" and draw(st.integers(0, 4)) == 0)
    if not counted:
        right = "1"
    return f"{left} {draw(st.sampled_from(['=', '!=', '<', '<=', '>', '>=']))} {right}", counted


@st.composite
def aggregates(draw: Any) -> tuple[str, bool]:
    """One degree aggregate over :data:`SCHEMA`, and whether it is counted (not left to the statement)."""
    edge = draw(st.sampled_from(["knows", "livesIn"]))
    src, dst = ("$p", "$f") if draw(st.booleans()) else ("$f", "$p")
    far_type = "Person" if edge == "knows" else "City"
    src_type, dst_type = ("Person", far_type)
    declared = draw(st.sampled_from(["", f"{src}: {src_type}  ", f"{src}: {src_type}  {dst}: {dst_type}  "]))
    match = f"{declared}{src} {edge} {dst}"
    counted = True
    for _ in range(draw(st.integers(0, 2))):
        compare, compare_counted = draw(comparisons(src, dst, dst_type))
        match += f"  {compare}"
        counted = counted and compare_counted
    keyed = draw(st.sampled_from(["none", "src", "dst"]))
    counts = draw(st.sampled_from([["count($f) as n"], ["count($p) as n"], ["count($p) as n", "count($f) as m"]]))
    keys: list[str] = []
    if keyed != "none":
        var, table = (src, src_type) if keyed == "src" else (dst, dst_type)
        columns = ["name", "age"] if table == "Person" else ["name", "size"]
        keys = draw(st.lists(st.sampled_from([f"{var}.{column}" for column in columns]), min_size=1, max_size=2, unique=True))
    returns = [*keys, *counts]
    aliases = [*keys, *(item.rsplit(" as ", 1)[1] for item in counts)]
    order = ""
    chosen = draw(st.lists(st.sampled_from(aliases), max_size=2, unique=True))
    if chosen:
        order = "order { " + ", ".join(f"{alias}{draw(st.sampled_from(['', ' asc', ' desc']))}" for alias in chosen) + " }"
    limit = f"limit {draw(st.integers(0, 4))}" if draw(st.booleans()) else ""
    return f"query q() {{ match {{ {match} }} return {{ {', '.join(returns)} }} {order} {limit} }}", counted


def _rows(graph: Graph, source: str) -> list[list[Any]]:
    document = run_query(graph, source)
    return [[row[column] for column in document["columns"]] for row in document["rows"]]


def _answers(graph: Graph, source: str) -> tuple[list[list[Any]], list[Any]]:
    """The answer with degree aggregates on, and what the adjacency path returned on each call."""
    with returns_of(run, "degree_rows") as returned:
        return _rows(graph, source), returned


def _statement(graph: Graph, source: str) -> list[list[Any]]:
    with mock.patch.object(run, "degree_plan", lambda bound: None):
        return _rows(graph, source)


WALKS = (
    "query w() { match { $a knows{1,2} $b } return { count($b) as n } }",
    "query w() { match { $a livesIn{1,2} $b } return { count($b) as n } }",
)
"""Variable-length traversals of both edge tables: each builds its table's adjacency."""


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_degree_aggregates_answer_as_the_statement(tmp_path: Path, data: Any, fresh_cache: AdjacencyCache) -> None:
    people = data.draw(st.lists(st.tuples(st.sampled_from(PEOPLE), st.one_of(st.none(), st.integers(0, 2))), unique_by=lambda p: p[0]))
    cities = data.draw(st.lists(st.tuples(st.sampled_from(CITIES), st.one_of(st.none(), st.integers(0, 1))), unique_by=lambda c: c[0]))
    knows = data.draw(st.lists(st.tuples(st.sampled_from(ENDS), st.sampled_from(ENDS)), max_size=16))  # loops, parallel, dangling
    lives = data.draw(st.lists(st.tuples(st.sampled_from(ENDS), st.sampled_from([*CITIES, "c", "zz"])), max_size=8))
    graph = init_graph(open_store(str(tmp_path / uuid.uuid4().hex)), SCHEMA, FENCED_PROFILE, "tests")
    _write(graph, people, cities, knows, lives)
    for _ in range(3):
        source, countable = data.draw(aggregates())
        with returns_of(degrees, "_column_degrees") as counted, mock.patch.object(adjacency, "BUILD_SECONDS_PER_EDGE", 1e9):
            found, returned = _answers(graph, source)
        assert bool(returned and returned[-1] is not None) == countable, source
        from_columns = counted and counted[-1] is not None
        assert from_columns or not countable or not (knows if " knows " in source else lives), source
        assert found == _statement(graph, source), (source, people, cities, knows, lives)
    for walk in WALKS:
        run_query(graph, walk)
    for _ in range(6):
        source, countable = data.draw(aggregates())
        with returns_of(degrees, "_adjacency_degrees") as read:
            found, returned = _answers(graph, source)
        assert bool(read and returned and returned[-1] is not None) == countable, source  # read off the adjacency
        assert found == _statement(graph, source), (source, people, cities, knows, lives)


def test_a_degree_aggregate_is_counted_from_the_columns_until_the_adjacency_is_held(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    graph = init_graph(open_store(str(tmp_path / "g")), SCHEMA, FENCED_PROFILE, "tests")
    _write(graph, [("a", 1), ("b", None), ("c", 1)], [("x", 3)], [("a", "b"), ("a", "b"), ("a", "a"), ("b", "zz"), ("c", "a")], [])
    top = "query t() { match { $p knows $f } return { $p.age, count($f) as d } order { d desc } limit 2 }"
    assert explain_query(graph, top).executor == "degrees"
    with mock.patch.object(adjacency, "BUILD_SECONDS_PER_EDGE", 1e9), returns_of(degrees, "_column_degrees") as counted:
        found, returned = _answers(graph, top)
        assert counted[-1] is not None and returned == [[(1, 3)]]
        with mock.patch.object(degrees, "COUNTED_EDGES", 4):  # five edge rows: past the bound, the statement answers
            assert _answers(graph, top) == (found, [None])
    assert not any(isinstance(entry, adjacency.Adjacency) for entry in fresh_cache._entries.values())  # never built
    assert found == [[1, 3]]  # a: b and itself, c: a (age 1 both); b's one edge dangles, so b has no row
    run_query(graph, WALKS[0])
    assert _answers(graph, top) == (found, [[(1, 3)]])
    keyed = 'query c() { match { $p: Person { name: "a" }  $p knows $f } return { count($f) as n } }'
    assert explain_query(graph, keyed).executor == "direct"  # counted from the rows its key reaches, not a degree aggregate


def test_counts_from_the_columns_pay_for_the_adjacency(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    """Counting an edge table's columns costs time that builds its adjacency once it adds up to the build's cost."""
    graph = init_graph(open_store(str(tmp_path / "g")), SCHEMA, FENCED_PROFILE, "tests")
    _write(graph, [("a", 1), ("b", 2)], [], [("a", "b"), ("b", "a"), ("b", "b")], [])
    edges = "query e() { match { $p knows $f } return { count($f) as n } }"
    cheap = mock.patch.object(adjacency, "BUILD_SECONDS_PER_EDGE", 1e-12)  # three rows cost next to nothing to build
    with returns_of(degrees, "_column_degrees") as counted, returns_of(degrees, "_adjacency_degrees") as read, cheap:
        assert _rows(graph, edges) == [[3]]
        assert _rows(graph, edges) == [[3]]
    assert len(counted) == 1 and counted[0] is not None and len(read) == 1 and read[0] is not None
    assert sum(isinstance(entry, adjacency.Adjacency) for entry in fresh_cache._entries.values()) == 1


@pytest.mark.parametrize(("width", "counted"), [(10, True), (200, False)])
def test_counting_from_the_columns_is_bounded_by_the_ids_length(
    tmp_path: Path, fresh_cache: AdjacencyCache, monkeypatch: pytest.MonkeyPatch, width: int, counted: bool
) -> None:
    """5,000 edges within a 1 MiB bound: counted from the columns with 10-byte ids, left to the statement with 200-byte ones."""
    monkeypatch.setenv("OMNIGRAPH_QUERY_ADJACENCY_MB", "1")
    monkeypatch.setattr(adjacency, "BUILD_SECONDS_PER_EDGE", 1e9)
    graph = init_graph(open_store(str(tmp_path / "g")), SCHEMA, FENCED_PROFILE, "tests")
    people = [(f"{index:0{width}d}", index % 3) for index in range(100)]
    knows = [(people[index % 100][0], people[(index * 7 + 1) % 100][0]) for index in range(5000)]
    _write(graph, people, [], knows, [])
    top = "query t() { match { $p knows $f } return { $p.age, count($f) as d } order { d desc } }"
    with returns_of(degrees, "_column_degrees") as found:
        assert _rows(graph, top) == _statement(graph, top)
    assert (found[-1] is not None) == counted


def test_a_comparison_of_the_two_ends_is_counted_both_ways(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    """``$p.age > $f.age`` over ``$p knows $f``: counted from the columns, then off the adjacency, as the statement answers."""
    graph = init_graph(open_store(str(tmp_path / "g")), SCHEMA, FENCED_PROFILE, "tests")
    people = [("a", 3), ("b", 1), ("c", None), ("d", 2)]
    # a>b, a>b again (parallel), b<a, a=a (loop, not older), c has no age, d>b, d>dangling zz
    _write(graph, people, [], [("a", "b"), ("a", "b"), ("b", "a"), ("a", "a"), ("c", "a"), ("a", "c"), ("d", "b"), ("d", "zz")], [])
    older = "query o() { match { $p: Person  $p knows $f  $p.age > $f.age } return { count($p) as n } }"
    by_name = "query o() { match { $p knows $f  $f.age < $p.age } return { $p.name, count($f) as n } order { $p.name } }"
    assert explain_query(graph, older).executor == "degrees"
    with mock.patch.object(adjacency, "BUILD_SECONDS_PER_EDGE", 1e9), returns_of(degrees, "_column_degrees") as counted:
        assert _answers(graph, older) == ([[2]], [[(2,)]])  # (a, b) and (d, b)
        assert _answers(graph, by_name) == ([["a", 1], ["d", 1]], [[("a", 1), ("d", 1)]])
    assert all(found is not None for found in counted)
    run_query(graph, WALKS[0])
    with returns_of(degrees, "_adjacency_degrees") as read:
        assert _answers(graph, older) == ([[2]], [[(2,)]])
        equal = "query e() { match { $p knows $f  $p.age = $f.age } return { count($p) as n } }"
        assert _answers(graph, equal) == ([[1]], [[(1,)]])  # the loop of a
    assert len(read) == 2 and all(found is not None for found in read)
    for source in (older, by_name, equal):
        assert _rows(graph, source) == _statement(graph, source)


def test_compared_pairs_past_the_bound_are_left_to_the_statement(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    graph = init_graph(open_store(str(tmp_path / "g")), SCHEMA, FENCED_PROFILE, "tests")
    _write(graph, [("a", 3), ("b", 1)], [], [("a", "b"), ("b", "a")], [])
    older = "query o() { match { $p knows $f  $p.age > $f.age } return { count($p) as n } }"
    with mock.patch.object(degrees, "COMPARED_PAIR_BYTES", 1 << 40):  # two pairs would pass any cache's bound
        assert _answers(graph, older) == ([[1]], [None])
    assert _answers(graph, older) == ([[1]], [[(1,)]])
    constant = "query c() { match { $p knows $f  $p.age > 2 } return { count($p) as n } }"
    assert explain_query(graph, constant).executor != "degrees"  # a filter of one variable: the statement's


def test_strings_compare_by_their_bytes_as_in_the_statement(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    """Upper case before lower, accented letters after ``z``: both paths order strings by their UTF-8 bytes, as DuckDB does."""
    graph = init_graph(open_store(str(tmp_path / "g")), SCHEMA, FENCED_PROFILE, "tests")
    names = ["B", "a", "é", "z", "ab"]
    _write(graph, [(name, None) for name in names], [], [(p, f) for p in names for f in names], [])
    for op in ("<", "<=", ">", "=", "!="):
        source = f"query s() {{ match {{ $p knows $f  $p.name {op} $f.name }} return {{ $p.name, count($f) as n }} order {{ $p.name }} }}"
        found, returned = _answers(graph, source)
        assert returned and returned[-1] is not None, source
        assert found == _statement(graph, source), source
    assert _rows(graph, "query s() { match { $p knows $f  $p.name < $f.name } return { count($f) as n } }") == [[10]]
