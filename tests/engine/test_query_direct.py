"""Direct answers (:mod:`omnigraph.engine.query.direct`) and the node images' id indexes (:mod:`omnigraph.engine.query.node_ids`).

Direct answers: random small graphs (self-loops, parallel edges, edges whose endpoint is not a
node, City ids that collide with Person ids, NULLs) and random queries of the direct form only
(keyed starts by literal, parameter, filter, two keyed variables, a key pinned by two constants,
one that does not exist; 0-3 single hops forward, backward, across types and between bound
variables; comparisons of every allowed kind; returns of scalars, floats and lists; ``order``
and ``limit``): each one must be answered directly (but one whose statement stops a traversal's search
early: a ``limit`` without ``order``), and equal the DuckDB statement's answer and
the reference evaluator's (:mod:`tests.support.query_model`). Queries outside the direct form are
left to DuckDB; past the bounds a direct answer gives up and DuckDB answers.

Id indexes: real Lance datasets with ids of unequal lengths, non-ASCII ids, an id and the same id
followed by NUL, ids longer than any stored one, deleted rows, no rows, a ``large_string`` column;
the build policy (the first read filters, the second builds, the third hits; an oversize index is
built once, remembered, never kept); and a branch deleted and created again at the same versions.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import lance
import msgspec
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.gq.parser import parse
from omnigraph.engine.graph import Graph, init_graph
from omnigraph.engine.ops.branches import create_branch, delete_branch
from omnigraph.engine.ops.load import load
from omnigraph.engine.query import adjacency, direct, node_ids, probe, run, session
from omnigraph.engine.query.adjacency import AdjacencyCache, ImageKey, PinnedImage
from omnigraph.engine.query.run import run_query
from omnigraph.engine.query.session import stop_after
from omnigraph.engine.storage.store import open_store
from tests.engine.test_query_property import CITIES, COMPARE, PEOPLE, SCHEMA
from tests.support.call_spy import returns_of
from tests.support.query_model import Model, ModelGraph
from tests.support.table_writes import edge_columns, overwrite_tables

ACTOR = "tests"
MISSING = ["zz", "ghost"]

people = st.lists(
    st.tuples(
        st.sampled_from(PEOPLE),
        st.one_of(st.none(), st.integers(0, 4)),
        st.one_of(st.none(), st.sampled_from([0.5, 1.25, 2.0])),
        st.one_of(st.none(), st.lists(st.sampled_from(["t1", "t2"]), max_size=2)),
        st.one_of(st.none(), st.integers(0, 3)),
    ),
    min_size=2,
    max_size=6,
    unique_by=lambda person: person[0],
)
person_end = st.sampled_from(PEOPLE + MISSING)  # a name no person has: an edge whose endpoint is not a node


def _write(
    graph: Graph, persons: list[tuple[Any, ...]], cities: list[str], knows: list[tuple[str, str, Any]], lives: list[tuple[str, str]]
) -> None:
    """Every table written straight through the commit path (no endpoint check: edges may dangle)."""
    names = [person[0] for person in persons]
    person_columns = {"id": names, "name": names} | {
        column: [person[index] for person in persons] for index, column in enumerate(["age", "score", "tags", "rank"], start=1)
    }
    knows_columns = edge_columns("k", [(k[0], k[1]) for k in knows]) | {"since": [k[2] for k in knows]}
    tables = {
        "node:Person": person_columns,
        "node:City": {"id": cities, "name": cities},
        "edge:Knows": knows_columns,
        "edge:LivesIn": edge_columns("l", lives),
    }
    overwrite_tables(graph, tables, actor=ACTOR)


def _records(
    persons: list[tuple[Any, ...]], cities: list[str], knows: list[tuple[str, str, Any]], lives: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = [
        {"type": "Person", "data": {"name": n, "age": a, "score": s, "tags": t, "rank": r}} for n, a, s, t, r in persons
    ]
    records += [{"type": "City", "data": {"name": name}} for name in cities]
    records += [{"edge": "Knows", "from": s, "to": d, "data": {"id": f"k{n:02d}", "since": since}} for n, (s, d, since) in enumerate(knows)]
    records += [{"edge": "LivesIn", "from": s, "to": d} for s, d in lives]
    return records


@st.composite
def direct_queries(draw: Any, names: list[str], cities: list[str], traversals: bool = False) -> tuple[str, dict[str, Any]]:
    """One read query of the direct form (:mod:`omnigraph.engine.query.direct`) over :data:`SCHEMA`, and its params.

    Keys are mostly of the graph's ``names`` and ``cities``, sometimes of no node of their type.
    ``traversals``: hops may be variable-length (direct only while the edge images' adjacencies are held).
    """

    def bounds() -> str:
        return draw(st.sampled_from(["", "", "{1,2}", "{2,3}", "{1,3}", "{2,2}"])) if traversals else ""

    params: dict[str, Any] = {}
    declared: list[str] = []
    clauses: list[str] = []
    types: dict[str, str] = {}  # variable -> node type, in the order they are introduced
    fresh = iter("pqrstuvw")

    def keyed(node_type: str) -> None:
        var = next(fresh)
        types[var] = node_type
        present = (names if node_type == "Person" else cities) or ["zz"]
        value = draw(st.one_of(st.sampled_from(present), st.sampled_from(present), st.sampled_from(present), st.sampled_from(["zz", "b"])))
        form = draw(st.sampled_from(["literal", "literal", "param", "filter", "reversed", "twice"]))
        if form == "param" and "$who: String" not in declared:
            declared.append("$who: String")
            params["who"] = value
            clauses.append(f"${var}: {node_type} {{ name: $who }}")
        elif form == "filter":
            clauses.append(f'${var}: {node_type}  ${var}.name = "{value}"')
        elif form == "reversed":
            clauses.append(f'${var}: {node_type}  "{value}" = ${var}.name')
        elif form == "twice":  # pinned by two key constants (equal or not)
            other = draw(st.sampled_from([value, value, *PEOPLE[:3]]))
            clauses.append(f'${var}: {node_type} {{ name: "{value}" }}  ${var}.name = "{other}"')
        else:
            clauses.append(f'${var}: {node_type} {{ name: "{value}" }}')

    keyed(draw(st.sampled_from(["Person", "Person", "Person", "City"])))
    if draw(st.sampled_from([False, False, False, True])):
        keyed(draw(st.sampled_from(["Person", "City"])))
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 2, 3]))):
        persons = [v for v, t in types.items() if t == "Person"]
        cities = [v for v, t in types.items() if t == "City"]
        kinds = ["cycle"] if len(types) >= 5 else ["cycle", "forward", "backward", "lives", "lived"]
        kind = draw(st.sampled_from(kinds))
        if kind in ("forward", "backward", "lives") and persons:
            near, far = draw(st.sampled_from(persons)), next(fresh)
            types[far] = "City" if kind == "lives" else "Person"
            edge = "livesIn" if kind == "lives" else "knows"
            clauses.append(f"${far} knows{bounds()} ${near}" if kind == "backward" else f"${near} {edge}{bounds()} ${far}")
        elif kind == "lived" and cities:
            near, far = draw(st.sampled_from(cities)), next(fresh)
            types[far] = "Person"
            clauses.append(f"${far} livesIn{bounds()} ${near}")
        elif persons and cities and draw(st.booleans()):
            clauses.append(f"${draw(st.sampled_from(persons))} livesIn{bounds()} ${draw(st.sampled_from(cities))}")
        elif persons:  # between two bound variables, or a self-loop
            clauses.append(f"${draw(st.sampled_from(persons))} knows{bounds()} ${draw(st.sampled_from(persons))}")
    persons = [v for v, t in types.items() if t == "Person"]
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
        kind = draw(st.sampled_from(["age", "name", "two", "param", "rank", "city", "names"]))
        op = draw(st.sampled_from(COMPARE))
        anyone = draw(st.sampled_from(sorted(types)))
        if kind == "name" or (kind in ("age", "two", "param", "rank") and not persons):
            clauses.append(f'"{draw(st.sampled_from(PEOPLE))}" {op} ${anyone}.name')
        elif kind == "city" or kind == "names":
            other = draw(st.sampled_from(sorted(types)))
            right = f"${other}.name" if kind == "names" else f'"{draw(st.sampled_from(CITIES))}"'
            clauses.append(f"${anyone}.name {op} {right}")
        elif kind == "age":
            clauses.append(f"${draw(st.sampled_from(persons))}.age {op} {draw(st.integers(-1, 4))}")
        elif kind == "two":
            clauses.append(f"${draw(st.sampled_from(persons))}.age {op} ${draw(st.sampled_from(persons))}.age")
        elif kind == "rank":
            clauses.append(f"${draw(st.sampled_from(persons))}.rank {op} {draw(st.sampled_from(['1', '0', '-1', '5000000000']))}")
        else:
            if "$min: I32?" not in declared:
                declared.append("$min: I32?")
                params["min"] = draw(st.one_of(st.none(), st.integers(0, 4)))
            clauses.append(f"$min {op} ${draw(st.sampled_from(persons))}.age")
    columns = [
        f"${v}.{prop}" for v, t in types.items() for prop in (["name", "age", "score", "rank", "tags"] if t == "Person" else ["name"])
    ]
    order = ""
    if draw(st.sampled_from([False, False, False, True])):  # counts of the match's rows
        counted = draw(st.lists(st.sampled_from(sorted(types)), min_size=1, max_size=2, unique=True))
        returned = [f"count(${var}) as n{index}" for index, var in enumerate(counted)]
        if draw(st.booleans()):
            order = f"order {{ n0{draw(st.sampled_from(['', ' desc']))} }}"
    else:
        returned = draw(st.lists(st.sampled_from(columns), min_size=1, max_size=3, unique=True))
        keys = [column for column in returned if not column.endswith(".tags") and draw(st.booleans())]
        if keys and draw(st.sampled_from([True, True, True, False])):
            order = "order { " + ", ".join(f"{k}{draw(st.sampled_from(['', ' asc', ' desc']))}" for k in keys) + " }"
    limit = f"limit {draw(st.integers(0, 4))}" if draw(st.booleans()) else ""
    body = "\n    ".join(clauses)
    source = (
        f"query q({', '.join(declared)}) {{\n  match {{\n    {body}\n  }}\n  return {{ {', '.join(returned)} }}\n  {order}\n  {limit}\n}}\n"
    )
    return source, params


def _rows(document: dict[str, Any]) -> list[list[Any]]:
    return [[row[column] for column in document["columns"]] for row in document["rows"]]


def _run(
    graph: Graph, source: str, params: dict[str, Any], branch: str = "main", *, allow_direct: bool = True
) -> tuple[dict[str, Any], list[Any]]:
    """The answer document, and what each call of ``direct_rows`` returned (none when the query was not direct)."""
    plan = run.direct_plan if allow_direct else (lambda bound: None)
    with returns_of(run, "direct_rows") as answered, mock.patch.object(run, "direct_plan", plan):
        document = run_query(graph, source, params=params, branch=branch)
    return document, answered


def _any_rows(source: str) -> int | None:
    """The limit of a query that asks for any ``N`` rows (a limit without order), else None."""
    read = parse(source)[0].read
    assert read is not None
    return read.limit if read.limit is not None and not read.order else None


def _model(model: ModelGraph, source: str, params: dict[str, Any], *, unlimited: bool = False) -> tuple[list[str], list[list[Any]]]:
    query = parse(source)[0]
    if unlimited:
        assert query.read is not None
        query = msgspec.structs.replace(query, read=msgspec.structs.replace(query.read, limit=None))
    return Model(model, query, params).answer()


def _stops_early(graph: Graph, source: str, params: dict[str, Any]) -> bool:
    """Whether the statement of ``source`` stops a traversal's search early (a ``limit`` without ``order``): never direct."""
    bound = run.bind_read(graph, source, None, params, "main", None)[1]
    return any(stop_after(bound, hop) is not None for hop in bound.block.hops if hop.max_hops > 1)


def _same_as_duckdb_and_model(graph: Graph, model: ModelGraph, source: str, params: dict[str, Any], *, direct_expected: bool) -> None:
    document, answered = _run(graph, source, params)
    context = (source, params)
    if direct_expected:
        assert answered and answered[-1] is not None, context
    else:
        assert not answered, context
    found = _rows(document)
    statement = _run(graph, source, params, allow_direct=False)[0]
    columns, expected = _model(model, source, params)
    assert document["columns"] == statement["columns"] == columns, context
    limit = _any_rows(source)
    if limit is None:
        assert found == _rows(statement) == expected, context
        return
    # a limit without order: DuckDB gives any N rows; a direct answer the first N in tie-break order (ids ascending)
    _, every = _model(model, source, params, unlimited=True)
    for rows in (found, _rows(statement)):
        assert len(rows) == min(limit, len(every)), context
        assert not Counter(map(json.dumps, rows)) - Counter(map(json.dumps, every)), context
    if direct_expected:
        assert found == expected, context


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_direct_answers_equal_the_statement_and_the_reference(tmp_path: Path, data: Any) -> None:
    persons = data.draw(people)
    names = [person[0] for person in persons]
    known = st.sampled_from(names)
    cities = data.draw(st.lists(st.sampled_from(CITIES), max_size=3, unique=True))
    ends = st.one_of(known, known, known, person_end)
    knows = data.draw(st.lists(st.tuples(ends, ends, st.one_of(st.none(), st.integers(0, 3))), min_size=3, max_size=14))
    knows += [(s, s, None) for s in data.draw(st.lists(known, max_size=2))]  # self-loops
    knows += knows[: data.draw(st.integers(0, 2))]  # parallel edges
    city_ends = st.one_of(st.sampled_from(cities), st.sampled_from(["b", "q"])) if cities else st.sampled_from(["b", "q"])
    lives = data.draw(st.lists(st.tuples(ends, city_ends), max_size=6))
    graph = init_graph(open_store(str(tmp_path / uuid.uuid4().hex)), SCHEMA, FENCED_PROFILE, ACTOR)
    _write(graph, persons, cities, knows, lives)
    model = ModelGraph.of_records(graph.catalog, _records(persons, cities, knows, lives))
    warm = data.draw(st.booleans())
    if warm:  # the edge images' adjacencies in the cache: the hops are read from them, variable-length ones too
        run_query(graph, WARM)
    for _ in range(4):
        source, params = data.draw(direct_queries(names, cities, traversals=warm))
        _same_as_duckdb_and_model(graph, model, source, params, direct_expected=not _stops_early(graph, source, params))


WARM = "query w() { match { $p: Person  $p knows{1,2} $f  $p livesIn{1,2} $c } return { count($f) as n } }"
"""A query whose variable-length traversals build the adjacencies of both edge images."""


EXAMPLE_PERSONS: list[tuple[Any, ...]] = [
    ("a", 1, 0.5, ["t1"], 0),
    ("b", None, 2.0, None, 3),
    ("c", 3, None, ["t2", "t1"], None),
    ("d", 1, 1.25, [], 2),
]
EXAMPLE_KNOWS: list[tuple[str, str, Any]] = [
    ("a", "b", 1),
    ("a", "c", None),
    ("b", "c", 2),
    ("c", "a", 0),
    ("a", "a", None),
    ("b", "zz", 1),
]
EXAMPLE_LIVES = [("a", "x"), ("b", "a"), ("c", "q")]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Graph, ModelGraph]:
    graph = init_graph(open_store(str(tmp_path_factory.mktemp("direct") / "g")), SCHEMA, FENCED_PROFILE, ACTOR)
    _write(graph, EXAMPLE_PERSONS, ["a", "x"], EXAMPLE_KNOWS, EXAMPLE_LIVES)
    return graph, ModelGraph.of_records(graph.catalog, _records(EXAMPLE_PERSONS, ["a", "x"], EXAMPLE_KNOWS, EXAMPLE_LIVES))


NOT_DIRECT = {
    "negation": '$p: Person { name: "a" }  $p knows $f  not { $f knows $_ }',
    "grouped count": '$p: Person { name: "a" }  $p knows $f',
    "sum": '$p: Person { name: "a" }  $p knows $f',
    "undirected": '$p: Person { name: "a" }  $p <knows> $f',
    "undirected variable length": '$p: Person { name: "a" }  $p <knows>{1,2} $f',
    "float comparison": '$p: Person { name: "a" }  $p knows $f  $f.score > 1.0',
    "order on a list": '$p: Person { name: "a" }  $p knows $f',
    "edge variable": '$p: Person { name: "a" }  $p $e:knows $f',
    "no key": "$p: Person  $p knows $f",
    "or": '$p: Person { name: "a" }  $p knows $f  ($f.age = 1 or $f.age = 3)',
    "null test": '$p: Person { name: "a" }  $p knows $f  $f.age is null',
}
NOT_DIRECT_TAILS = {
    "grouped count": ("$f.name, count($p) as n", "order { $f.name }"),
    "sum": ("sum($f.age) as s", ""),
    "order on a list": ("$f.name, $f.tags", "order { $f.tags desc }"),
}


@pytest.mark.parametrize("name", sorted(NOT_DIRECT))
def test_a_query_outside_the_direct_form_is_left_to_duckdb(example: tuple[Graph, ModelGraph], name: str) -> None:
    graph, model = example
    returned, tail = NOT_DIRECT_TAILS.get(name, ("$f.name", "order { $f.name }"))
    source = f"query q() {{ match {{ {NOT_DIRECT[name]} }} return {{ {returned} }} {tail} }}"
    plans: list[Any] = []
    real = run.direct_plan

    def spy(bound: Any) -> Any:
        plans.append(real(bound))
        return plans[-1]

    with mock.patch.object(run, "direct_plan", spy):
        document = run_query(graph, source)
    assert plans == [None], source
    if name == "order on a list":  # the reference does not order lists: the same rows, in DuckDB's order
        assert sorted(map(json.dumps, _rows(document))) == sorted(map(json.dumps, _model(model, source, {})[1]))
    else:
        _same_as_duckdb_and_model(graph, model, source, {}, direct_expected=False)


ORDERED = {
    # NULL first ascending, last descending; ties by the ids of the variables
    "ascending": ("$f.age, $f.name", "order { $f.age }", [[None, "b"], [1, "a"], [3, "c"]]),
    "descending": ("$f.age, $f.name", "order { $f.age desc }", [[3, "c"], [1, "a"], [None, "b"]]),
    "float descending": ("$f.score", "order { $f.score desc }", [[2.0], [0.5], [None]]),
    "first of the tie-break order": ("$f.name", "limit 2", [["a"], ["b"]]),
}


@pytest.mark.parametrize("name", sorted(ORDERED))
def test_a_direct_answer_orders_nulls_as_the_statement(example: tuple[Graph, ModelGraph], name: str) -> None:
    graph, model = example
    returned, tail, expected = ORDERED[name]
    source = f'query q() {{ match {{ $p: Person {{ name: "a" }}  $p knows $f }} return {{ {returned} }} {tail} }}'
    document, answered = _run(graph, source, {})
    assert answered[-1] is not None
    assert _rows(document) == expected
    _same_as_duckdb_and_model(graph, model, source, {}, direct_expected=True)


KINDS_SCHEMA = """
node Person { name: String @key  born: Date?  seen: DateTime?  ok: Bool?  kind: enum(red, blue)?  big: I64?  huge: U64? }
edge Knows: Person -> Person
"""
KINDS_PEOPLE: list[dict[str, Any]] = [
    {"name": "a", "born": "1969-12-31", "seen": "2024-01-31T09:30:00.123Z", "ok": True, "kind": "red", "big": -9223372036854775808},
    {"name": "b", "born": "2024-02-29", "seen": "1969-12-31T23:59:59.999Z", "ok": False, "kind": "blue", "big": 9007199254740993},
    {"name": "c", "born": None, "seen": None, "ok": None, "kind": None, "big": None, "huge": 18446744073709551615},
    {"name": "d", "born": "1969-12-31", "seen": "2024-01-31T09:30:00.124Z", "ok": True, "kind": "blue", "big": 9007199254740992, "huge": 0},
    {"name": "é", "born": "2000-01-01", "seen": "2000-01-01T00:00:00.000Z", "ok": False, "kind": "red", "big": 0, "huge": 5},
]
KINDS_FILTERS = [
    '$f.born < date("2000-01-01")',
    "$f.born = $p.born",
    "$f.born >= $p.born",
    '$f.seen > datetime("2024-01-31T10:30:00.123+01:00")',
    "$f.seen <= $p.seen",
    "$f.ok = true",
    "$f.ok != $p.ok",
    '$f.kind = "red"',
    '$f.kind > "blue"',
    "$f.kind != $p.kind",
    "$f.big > 9007199254740992",
    "$f.big < $p.big",
    "$f.huge >= 18446744073709551615",
    "$f.huge > -1",
    '$f.name > "d"',
]
KINDS_ORDERS = ["$f.born", "$f.seen desc", "$f.ok", "$f.kind desc", "$f.big", "$f.huge desc", "$f.name desc"]


@pytest.fixture(scope="module")
def kinds(tmp_path_factory: pytest.TempPathFactory) -> Graph:
    graph = init_graph(open_store(str(tmp_path_factory.mktemp("kinds") / "g")), KINDS_SCHEMA, FENCED_PROFILE, ACTOR)
    records: list[dict[str, Any]] = [{"type": "Person", "data": person} for person in KINDS_PEOPLE]
    records += [{"edge": "Knows", "from": src["name"], "to": dst["name"]} for src in KINDS_PEOPLE for dst in KINDS_PEOPLE]
    load(graph, "".join(json.dumps(record) + "\n" for record in records).encode(), mode="append", branch="main", actor=ACTOR)
    return graph


@pytest.mark.parametrize("start", ["a", "b", "c", "é"])
@pytest.mark.parametrize("index", range(len(KINDS_FILTERS)))
def test_comparisons_and_orders_of_every_direct_kind_are_the_statements(kinds: Graph, index: int, start: str) -> None:
    """Dates and DateTimes around 1970, booleans, enums, 64-bit integers past 2^53 and U64's maximum, non-ASCII strings."""
    order = KINDS_ORDERS[index % len(KINDS_ORDERS)]
    returned = "$f.name, $f.born, $f.seen, $f.ok, $f.kind, $f.big, $f.huge"
    source = (
        f'query q() {{ match {{ $p: Person {{ name: "{start}" }}  $p knows $f  {KINDS_FILTERS[index]} }} '
        f"return {{ {returned} }} order {{ {order} }} }}"
    )
    document, answered = _run(kinds, source, {})
    assert answered and answered[-1] is not None, source
    assert _rows(document) == _rows(_run(kinds, source, {}, allow_direct=False)[0]), source


# -- past the bounds ------------------------------------------------------------------------------

GIVE_UP = {
    "known ids": ({"ids": 0}, '$p: Person { name: "a" }', "$p.name"),
    "ids of a far end": ({"ids": 1}, '$p: Person { name: "a" }  $p knows $f', "$f.name"),
    "edges of a hop": ({"edges": 2}, '$p: Person { name: "a" }  $p knows $f', "$f.name"),
    "edges of a backward hop": ({"edges": 1}, '$f: Person { name: "c" }  $p knows $f', "$p.name"),
    "bindings": ({"bindings": 2}, '$p: Person { name: "a" }  $p knows $f  $f knows $g', "$f.name, $g.name"),
}


@pytest.mark.parametrize("name", sorted(GIVE_UP))
def test_a_direct_answer_past_its_bounds_gives_up_and_duckdb_answers(
    example: tuple[Graph, ModelGraph], fresh_cache: AdjacencyCache, name: str
) -> None:
    """Hops read from the edge images (the fresh cache holds no adjacency)."""
    graph, model = example
    bounds, match, returned = GIVE_UP[name]
    source = f"query q() {{ match {{ {match} }} return {{ {returned} }} order {{ {returned} }} }}"
    _same_as_duckdb_and_model(graph, model, source, {}, direct_expected=True)  # within the default bounds: answered directly
    with (
        mock.patch.object(probe, "PROBED_IDS", bounds.get("ids", probe.PROBED_IDS)),
        mock.patch.object(probe, "PROBED_EDGES", bounds.get("edges", probe.PROBED_EDGES)),
        mock.patch.object(direct, "MOST_BINDINGS", bounds.get("bindings", direct.MOST_BINDINGS)),
    ):
        document, answered = _run(graph, source, {})
        statement = _run(graph, source, {}, allow_direct=False)[0]
    assert answered == [None], source
    assert _rows(document) == _rows(statement) == _model(model, source, {})[1]
    assert _rows(document)  # a non-empty answer: the bound was passed by real rows


ADJACENT = [
    '$p: Person { name: "a" }  $p knows $f  $f livesIn $c',
    '$c: City { name: "a" }  $p livesIn $c  $f knows $p',
    '$p: Person { name: "a" }  $p knows $p',
    '$p: Person { name: "a" }  $p knows $f  $f knows $p',
]


@pytest.mark.parametrize("index", range(len(ADJACENT)))
def test_hops_read_from_the_adjacencies_answer_as_the_statement(
    example: tuple[Graph, ModelGraph], fresh_cache: AdjacencyCache, index: int
) -> None:
    """With the edge images' adjacencies in the cache (self-loops are flags there), the hops are read from them."""
    graph, model = example
    run_query(graph, WARM)
    assert fresh_cache.stats().entries == 2
    returned = "$p.name, $f.name" if "$f" in ADJACENT[index] else "$p.name"
    source = f"query q() {{ match {{ {ADJACENT[index]} }} return {{ {returned} }} order {{ {returned} }} }}"
    real = direct._adjacent_pairs
    calls: list[Any] = []

    def spy(*args: Any) -> Any:
        calls.append(real(*args))
        return calls[-1]

    with mock.patch.object(direct, "_adjacent_pairs", spy):
        _same_as_duckdb_and_model(graph, model, source, {}, direct_expected=True)
        assert calls and all(found is not None for found in calls)
        assert _rows(run_query(graph, source))
        with mock.patch.object(probe, "PROBED_EDGES", 0):  # past the bound on edges: the adjacency gives up too
            document, answered = _run(graph, source, {})
    assert answered == [None] and _rows(document) == _model(model, source, {})[1]


def test_a_traversal_builds_its_adjacency_and_is_answered_directly(example: tuple[Graph, ModelGraph], fresh_cache: AdjacencyCache) -> None:
    """A direct answer builds a traversal's missing adjacency once (as the statement would) and later answers read it."""
    graph, model = example
    source = 'query q() { match { $p: Person { name: "a" }  $p knows{1,3} $f  $f knows{2,2} $g } return { count($g) as n } }'
    document, answered = _run(graph, source, {})
    assert answered and answered[-1] is not None  # answered directly, having built the adjacency
    assert fresh_cache.stats().builds == 1 and fresh_cache.stats().entries == 1
    assert _rows(document) == _model(model, source, {})[1]
    builds = fresh_cache.stats().builds
    with returns_of(direct, "build_adjacency") as built, returns_of(session, "build_adjacency") as built_by_statement:
        _same_as_duckdb_and_model(graph, model, source, {}, direct_expected=True)
    assert (
        built == built_by_statement == [] and fresh_cache.stats().builds > builds
    )  # read again, never built again (the id index was, on second sight)


def test_a_traversal_whose_adjacency_does_not_fit_is_left_to_the_statement(
    example: tuple[Graph, ModelGraph], fresh_cache: AdjacencyCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no room for adjacencies the direct answer gives up before reading anything; DuckDB's search answers the same."""
    graph, model = example
    monkeypatch.setenv("OMNIGRAPH_QUERY_ADJACENCY_MB", "0")
    source = 'query q() { match { $p: Person { name: "a" }  $p knows{1,3} $f } return { $f.name } order { $f.name } }'
    with returns_of(direct, "node_rows") as read:
        document, answered = _run(graph, source, {})
    assert answered == [None] and read == []  # gave up before any node row was read
    assert fresh_cache.stats().builds == 0 and fresh_cache.stats().entries == 0
    assert _rows(document) == _model(model, source, {})[1]


# -- the id index ---------------------------------------------------------------------------------


@pytest.fixture
def fresh_cache() -> Iterator[AdjacencyCache]:
    """A cache of this test's own (counts from zero), where lookups of edges never pay for an adjacency."""
    cache = AdjacencyCache()
    with mock.patch.object(adjacency, "_CACHE", cache), mock.patch.object(adjacency, "BUILD_SECONDS_PER_EDGE", 1e9):
        yield cache


class Recorded:
    """A Lance dataset whose ``take`` calls are recorded."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self.takes: list[list[int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dataset, name)

    def take(self, indices: list[int], columns: list[str] | None = None) -> pa.Table:
        self.takes.append(list(indices))
        return self.dataset.take(indices, columns=columns)


def _dataset(path: Path, ids: list[str], id_type: pa.DataType | None = None) -> Any:
    schema = pa.schema([pa.field("id", id_type or pa.string(), nullable=False), pa.field("n", pa.int64())])
    return lance.write_dataset(pa.table({"id": ids, "n": list(range(len(ids)))}, schema=schema), str(path))


def _key(name: str) -> ImageKey:
    return (name, None, 1, "digest")


def _image(dataset: Any, key: ImageKey) -> PinnedImage:
    """``dataset`` as a pinned image whose cache key is ``key``."""
    image = PinnedImage(key[0], key[1], key[2], dataset, dataset.count_rows())
    image.__dict__["key"] = key  # the cached property, set: these datasets are told apart by name
    return image


def _offsets(found: list[tuple[int, str]]) -> list[int]:
    return [offset for offset, _ in found]


def _filtered(dataset: Any, ids: list[str]) -> list[dict[str, Any]]:
    rows = node_ids.read_where_in(dataset, ["id", "n"], "id", ids, None)
    assert rows is not None
    return sorted(rows.to_pylist(), key=lambda row: row["n"])


def _indexed(dataset: Any, key: ImageKey, ids: list[str]) -> list[dict[str, Any]]:
    """The rows of ``ids`` read through the id index (built on the first read)."""
    with (
        mock.patch.object(node_ids, "BUILD_AFTER", 1),
        mock.patch.object(node_ids, "read_where_in", side_effect=AssertionError("filtered")),
    ):
        return sorted(node_ids.node_rows(_image(dataset, key), ["id", "n"], ids, 1 << 20).to_pylist(), key=lambda row: row["n"])


AWKWARD_IDS = ["a", "bb", "", "é", "日本", "emoji😀", "x" * 40, "a\x00", "Z", "e\u0301", "'", "a b"]


def test_the_index_finds_ids_of_every_length_and_script(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    dataset = _dataset(tmp_path / "d.lance", AWKWARD_IDS)
    index = node_ids.build_node_ids(dataset, 1 << 20)
    assert index.ids.dtype.itemsize == max(len(value.encode()) for value in AWKWARD_IDS)
    for position, value in enumerate(AWKWARD_IDS):
        assert position in _offsets(index.find([value])), value
        assert _indexed(dataset, _key("d"), [value]) == [{"id": value, "n": position}], value
    assert _indexed(dataset, _key("d"), AWKWARD_IDS) == [{"id": value, "n": n} for n, value in enumerate(AWKWARD_IDS)]
    assert fresh_cache.stats().builds == 1


def test_an_id_and_the_same_id_followed_by_nul_are_told_apart(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    ids = ["a\x00", "b", "a", "a\x00\x00"]
    dataset = _dataset(tmp_path / "d.lance", ids)
    index = node_ids.build_node_ids(dataset, 1 << 20)
    assert _offsets(index.find(["a"])) == [0, 2, 3]  # padding makes them alike: every candidate is found
    for position, value in enumerate(ids):
        assert _indexed(dataset, _key("d"), [value]) == [{"id": value, "n": position}], repr(value)
    assert _indexed(dataset, _key("d"), ["a", "b"]) == [{"id": "b", "n": 1}, {"id": "a", "n": 2}]


def test_the_filter_tells_an_id_and_the_same_id_followed_by_nul_apart(tmp_path: Path) -> None:
    ids = ["a\x00", "b", "a"]
    dataset = _dataset(tmp_path / "d.lance", ids)
    assert _filtered(dataset, ["a"]) == [{"id": "a", "n": 2}]
    assert _filtered(dataset, ["a\x00"]) == [{"id": "a\x00", "n": 0}]


def test_ids_longer_than_every_stored_one_and_missing_ids_are_not_found(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    dataset = _dataset(tmp_path / "d.lance", ["ab", "c"])
    index = node_ids.build_node_ids(dataset, 1 << 20)
    assert _offsets(index.find(["abc", "ab\x00x", "x" * 100])) == []
    assert _indexed(dataset, _key("d"), ["abc", "x" * 100, "zz", "a"]) == []
    assert _indexed(dataset, _key("d"), ["abc", "ab"]) == [{"id": "ab", "n": 0}]


def test_offsets_skip_deleted_rows(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    """Two fragments, rows deleted from both: the rows read through the index are the filter's."""
    path = tmp_path / "d.lance"
    ids = [f"n{i:02d}" for i in range(20)]
    _dataset(path, ids[:10])
    schema = pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("n", pa.int64())])
    dataset = lance.write_dataset(pa.table({"id": ids[10:], "n": list(range(10, 20))}, schema=schema), str(path), mode="append")
    dataset.delete("id IN ('n00', 'n03', 'n04', 'n12', 'n19')")
    dataset = lance.dataset(str(path))
    assert dataset.count_rows() == 15 and len(dataset.get_fragments()) == 2
    assert dataset.get_fragments()[0].metadata.deletion_file is not None
    for value in ids:
        assert _indexed(dataset, _key("d"), [value]) == _filtered(dataset, [value]), value
    assert _indexed(dataset, _key("d"), ids) == _filtered(dataset, ids)
    assert len(_indexed(dataset, _key("d"), ids)) == 15


def test_an_empty_image_has_an_empty_index(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    dataset = _dataset(tmp_path / "d.lance", [])
    index = node_ids.build_node_ids(dataset, 1 << 20)
    assert len(index.ids) == 0 and _offsets(index.find(["a", ""])) == []
    assert _indexed(dataset, _key("d"), ["a"]) == []
    assert node_ids.node_rows(_image(dataset, _key("d")), ["id", "n"], [], 1 << 20).num_rows == 0


def test_a_large_string_id_column(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    dataset = _dataset(tmp_path / "d.lance", ["long-one", "b", "日本"], pa.large_string())
    assert pa.types.is_large_string(dataset.schema.field("id").type)  # Lance keeps it: the index reads 64-bit offsets
    index = node_ids.build_node_ids(dataset, 1 << 20)
    assert _offsets(index.find(["b"])) == [1]
    assert _indexed(dataset, _key("d"), ["日本", "long-one", "long"]) == [{"id": "long-one", "n": 0}, {"id": "日本", "n": 2}]


def test_the_index_and_columns_are_built_on_the_second_read_and_read_from_memory(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    """First read: the filter. Second: the id index is built, and with it the column read, and the rows come from memory.
    Third and fourth: hits, nothing read."""
    dataset = Recorded(_dataset(tmp_path / "d.lance", ["a", "b", "c"]))
    filtered: list[list[str]] = []
    real = node_ids.read_where_in

    def spy(dataset: Any, columns: Any, column: str, values: Any, limit: Any) -> Any:
        filtered.append(list(values))
        return real(dataset, columns, column, values, limit)

    reads: list[list[dict[str, Any]]] = []
    seen: list[tuple[int, int, int, int, int]] = []
    with mock.patch.object(node_ids, "read_where_in", spy):
        for _ in range(4):
            reads.append(node_ids.node_rows(_image(dataset, _key("d")), ["id", "n"], ["c", "a"], 1 << 20).sort_by("n").to_pylist())
            stats = fresh_cache.stats()
            seen.append((len(filtered), len(dataset.takes), stats.builds, stats.hits, stats.entries))
    assert seen == [(1, 0, 0, 0, 0), (1, 0, 2, 0, 2), (1, 0, 2, 2, 2), (1, 0, 2, 4, 2)]
    assert dataset.takes == []  # nothing read from Lance after the first read: the rows come from memory
    assert reads == [[{"id": "a", "n": 0}, {"id": "c", "n": 2}]] * 4


def test_an_oversize_index_is_built_once_and_never_kept(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    dataset = Recorded(_dataset(tmp_path / "d.lance", ["a", "bb", "ccc"]))
    built: list[int] = []
    real_build = node_ids.build_node_ids

    def build(dataset: Any, limit: int) -> node_ids.NodeIds:
        built.append(limit)
        return real_build(dataset, limit)

    limit = 3 * (3 + 8) - 1  # one byte short of the ids and their offsets
    with pytest.raises(adjacency.Oversize):
        real_build(dataset, limit)
    with mock.patch.object(node_ids, "build_node_ids", build):
        reads = [node_ids.node_rows(_image(dataset, _key("d")), ["id", "n"], ["bb"], limit).to_pylist() for _ in range(4)]
    assert reads == [[{"id": "bb", "n": 1}]] * 4
    assert built == [limit] and not dataset.takes
    stats = fresh_cache.stats()
    assert (stats.builds, stats.entries, stats.bytes) == (1, 0, 0)
    with mock.patch.object(node_ids, "build_node_ids", build):  # within a bound that holds it: built again (counted anew), and kept
        for _ in range(node_ids.BUILD_AFTER):
            assert node_ids.node_rows(_image(dataset, _key("d")), ["id", "n"], ["bb"], limit + 1).to_pylist() == [{"id": "bb", "n": 1}]
    assert built == [limit, limit + 1] and dataset.takes == [[1]]  # the column does not fit beside the index: rows taken from Lance
    assert fresh_cache.stats().entries == 1 and fresh_cache.stats().bytes <= limit + 1  # the index alone, within the bound


def test_a_direct_answer_after_deletes_reads_the_rows_that_remain(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    """Through a real graph: rows deleted after the load; the index, built on the second read, skips them."""
    from omnigraph.engine.ops.mutate import mutate

    graph = init_graph(open_store(str(tmp_path / "g")), SCHEMA, FENCED_PROFILE, ACTOR)
    names = [f"p{i}" for i in range(8)]
    records: list[dict[str, Any]] = [{"type": "Person", "data": {"name": name, "age": i}} for i, name in enumerate(names)]
    records += [{"edge": "Knows", "from": "p7", "to": name} for name in names]
    load(graph, "".join(json.dumps(record) + "\n" for record in records).encode(), mode="append", branch="main", actor=ACTOR)
    for name in ("p0", "p2", "p5"):
        mutate(graph, "query d($n: String) { delete Person where name = $n }", params={"n": name}, branch="main", actor=ACTOR)
    source = 'query q() { match { $p: Person { name: "p7" }  $p knows $f } return { $f.name, $f.age } order { $f.age desc } }'
    expected = [[name, int(name[1:])] for name in reversed(names) if name not in ("p0", "p2", "p5")]
    for _ in range(3):
        document, answered = _run(graph, source, {})
        assert answered[-1] is not None and _rows(document) == expected
    assert fresh_cache.stats().builds == 3 and fresh_cache.stats().hits >= 1  # the id index, then age and name


# -- a branch created again -----------------------------------------------------------------------

POINT = "query q($n: String) { match { $p: Person { name: $n }  $p knows $f } return { $p.age, $f.name } order { $f.name } }"


def _people(names: list[str], base: int) -> bytes:
    records: list[dict[str, Any]] = [{"type": "Person", "data": {"name": name, "age": base + int(name[1:])}} for name in names]
    records += [{"edge": "Knows", "from": name, "to": names[0]} for name in names]
    return "".join(json.dumps(record) + "\n" for record in records).encode()


def test_a_direct_answer_of_a_branch_created_again_reads_its_new_rows(tmp_path: Path, fresh_cache: AdjacencyCache) -> None:
    """The new incarnation holds the same ids in another order at the same versions: an index of the old one would read other rows."""
    graph = init_graph(open_store(str(tmp_path / "g")), SCHEMA, FENCED_PROFILE, ACTOR)
    names = [f"p{i}" for i in range(5)]
    load(graph, _people(names, 0), mode="append", branch="main", actor=ACTOR)
    keys: list[ImageKey] = []
    real = direct.node_rows

    def spy(image: PinnedImage, *args: Any) -> Any:
        keys.append(image.key)
        return real(image, *args)

    def answers() -> list[list[Any]]:
        with mock.patch.object(direct, "node_rows", spy):
            document, answered = _run(graph, POINT, {"n": "p3"}, "b")
        assert answered[-1] is not None
        return _rows(document)

    create_branch(graph, "b")
    load(graph, _people(names, 100), mode="overwrite", branch="b", actor=ACTOR)
    assert [answers() for _ in range(3)] == [[[103, "p0"]]] * 3
    assert fresh_cache.stats().builds == 3  # the id index, then age and name
    old = keys[-1]
    delete_branch(graph, "b")
    create_branch(graph, "b")
    load(graph, _people(list(reversed(names)), 200), mode="overwrite", branch="b", actor=ACTOR)
    assert [answers() for _ in range(3)] == [[[203, "p4"]]] * 3
    assert keys[-1][:3] == old[:3] and keys[-1] != old  # the same table, branch and version; other content
