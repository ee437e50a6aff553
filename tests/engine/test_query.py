"""Read queries on real graphs: every example and rule of the reference's read section.

One graph per backend (local and S3) is built once for the module and only read; each test
states a rule and the exact rows it implies. The data: Knows has a parallel edge (Ann -> Bob
twice), a cycle (Ann -> Bob -> Cy -> Ann), a self-loop (Eve) and a Person named like each
Company (ids are unique per type only); nullable properties of every kind are null somewhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import NotFound
from omnigraph.engine.graph import Graph, init_graph, open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.ops.load import load
from omnigraph.engine.query import adjacency, degrees, run
from omnigraph.engine.query.adjacency import ADJACENCY_ENV
from omnigraph.engine.query.run import open_answer, run_query
from omnigraph.engine.query.session import Session
from omnigraph.engine.storage.store import open_store
from tests.conftest import new_root
from tests.support.call_spy import returns_of
from tests.support.graph_helpers import DATA_PATH, SCHEMA_PATH

SCHEMA = """
node Person  { name: String @key  age: I32?  score: F32?  height: F64?  born: Date?  seen: DateTime?
               nick: String?  tags: [String]? }
node Company { name: String @key }
edge Knows:   Person -> Person { since: Date? }
edge WorksAt: Person -> Company
"""
PEOPLE = [
    {
        "name": "Ann",
        "age": 30,
        "score": 2.7,
        "height": 2.0,
        "born": "2000-01-31",
        "seen": "2024-01-31T09:30:00Z",
        "nick": "50%_off",
        "tags": ["a", "b"],
    },
    {"name": "Bob", "age": 2, "score": 2.5, "height": 2.7, "born": "1999-12-31", "nick": "x_y", "tags": []},
    {"name": "Cy"},
    {"name": "Dee", "age": 41},
    {"name": "Eve", "age": 25},
    {"name": "Acme"},
    {"name": "Globex"},
    {"name": 'Q"\\'},
    {"name": "Zoë"},
]
KNOWS = [("Ann", "Bob"), ("Ann", "Bob"), ("Bob", "Cy"), ("Cy", "Ann"), ("Cy", "Dee"), ("Eve", "Eve"), ("Dee", "Acme")]
KNOWS_SINCE = {0: "2020-01-01", 1: "2021-06-01", 5: "2019-01-01"}
"""``since`` of some Knows edges, by position: each parallel Ann -> Bob edge has its own, and Eve's self-loop one."""
WORKS = [("Ann", "Acme"), ("Dee", "Globex"), ("Acme", "Acme"), ("Globex", "Acme")]


def _records() -> bytes:
    records: list[dict[str, Any]] = [{"type": "Person", "data": data} for data in PEOPLE]
    records += [{"type": "Company", "data": {"name": name}} for name in ("Acme", "Globex")]
    records += [{"edge": "Knows", "from": a, "to": b, "data": {"since": KNOWS_SINCE.get(n)}} for n, (a, b) in enumerate(KNOWS)]
    records += [{"edge": "WorksAt", "from": a, "to": b} for a, b in WORKS]
    return "".join(json.dumps(r) + "\n" for r in records).encode()


@pytest.fixture(scope="module", params=["local", "s3"])
def graph(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graph]:
    if request.param == "s3":
        request.getfixturevalue("s3_server")
    root = new_root(request.param, tmp_path_factory.mktemp("query"))
    created = init_graph(open_store(root), SCHEMA, FENCED_PROFILE, "tests")
    load(created, _records(), mode="append", branch="main", actor="tests")
    yield open_graph(open_store(root), FENCED_PROFILE, write=False)


def rows(graph: Graph, body: str, **params: Any) -> list[list[Any]]:
    """The answer's rows (lists in column order) of one query ``query q(...) { body }``."""
    declared = ", ".join(f"${name}: {kind}" for name, (kind, _) in params.items())
    answer = run_query(graph, f"query q({declared}) {{ {body} }}", params={k: v for k, (_, v) in params.items()})
    return [[row[column] for column in answer["columns"]] for row in answer["rows"]]


def names(graph: Graph, match: str, var: str = "p", **params: Any) -> list[str]:
    return [row[0] for row in rows(graph, f"match {{ {match} }} return {{ ${var}.name }}", **params)]


# -- bindings and traversals ----------------------------------------------------------------------


def test_a_bound_edge_is_one_row_per_edge_with_its_properties(graph: Graph) -> None:
    """``$a $k:knows $b``: each parallel edge is a row of its own (the unbound traversal reports the pair once); an
    undirected self-loop is one row; ``$k.since`` filters, returns, orders and counts; inside ``not { }`` it is scoped."""
    ann = 'match { $a: Person { name: "Ann" }  $a $k:knows $b } return { $b.name, $k.since }'
    assert rows(graph, ann + " order { $k.since desc }") == [["Bob", "2021-06-01"], ["Bob", "2020-01-01"]]
    assert rows(graph, 'match { $a: Person { name: "Ann" }  $a knows $b } return { $b.name }') == [["Bob"]]
    either = 'match { $a: Person { name: "Ann" }  $a $k:<knows> $b } return { $b.name, $k.since } order { $b.name, $k.since }'
    assert rows(graph, either) == [["Bob", "2020-01-01"], ["Bob", "2021-06-01"], ["Cy", None]]
    assert rows(graph, 'match { $a: Person { name: "Eve" }  $a $k:<knows> $b } return { $b.name, $k.since }') == [["Eve", "2019-01-01"]]
    since = 'match { $a $k:knows $b  $k.since >= date("2020-01-01") } return { $a.name, count($k) as n }'
    assert rows(graph, since) == [["Ann", 2]]
    assert names(graph, '$p: Person  $p knows $_  not { $p $k:knows $_  $k.since < date("2020-06-01") }') == ["Bob", "Cy", "Cy", "Dee"]


def test_binding_again_adds_constraints(graph: Graph) -> None:
    assert names(graph, '$p: Person { age: 30 }  $p: Person { name: "Ann" }') == ["Ann"]
    assert names(graph, '$p: Person { age: 30 }  $p: Person { name: "Bob" }') == []
    assert names(graph, '$p: Person { id: "Bob" }') == ["Bob"]


def test_unrelated_bindings_are_a_cross_product(graph: Graph) -> None:
    assert rows(graph, 'match { $p: Person { name: "Ann" }  $c: Company } return { $p.name, $c.name }') == [
        ["Ann", "Acme"],
        ["Ann", "Globex"],
    ]


def test_a_pair_is_reported_once_and_a_bound_destination_traverses_backwards(graph: Graph) -> None:
    assert names(graph, '$p: Person { name: "Ann" }  $p knows $f', "f") == ["Bob"]  # two Ann -> Bob edges
    assert names(graph, '$f: Person { name: "Bob" }  $p knows $f') == ["Ann"]
    assert rows(graph, 'match { $f: Person { name: "Dee" }  $p knows $f {2, 3} } return { $p.name, $f.name }') == [
        ["Ann", "Dee"],
        ["Bob", "Dee"],
    ]


def test_variable_length_traversal_is_breadth_first_with_a_visited_set(graph: Graph) -> None:
    assert names(graph, '$p: Person { name: "Ann" }  $p knows $f {2,3}', "f") == ["Cy", "Dee"]  # Ann is visited
    assert names(graph, '$p: Person { name: "Ann" }  $p knows $f {1,5}', "f") == ["Acme", "Bob", "Cy", "Dee"]
    assert names(graph, '$p: Person { name: "Cy" }  $p knows $f {2,2}', "f") == ["Acme", "Bob"]


def test_a_stored_self_loop_reports_its_node(graph: Graph) -> None:
    assert names(graph, '$p: Person { name: "Eve" }  $p knows $f', "f") == ["Eve"]
    assert names(graph, '$p: Person { name: "Eve" }  $p knows $f {1,3}', "f") == ["Eve"]
    assert names(graph, '$p: Person { name: "Eve" }  $p knows $f {2,3}', "f") == []
    assert names(graph, "$p: Person  $p knows $p") == ["Eve"]
    assert names(graph, "$p: Person  $p knows $p {1,4}") == ["Eve"]  # a cycle back to Ann is not reported


def test_ids_never_join_across_types(graph: Graph) -> None:
    # Globex (a Company) and Globex (a Person who works at Acme): a second worksAt hop would join them
    assert rows(graph, 'match { $p: Person { name: "Dee" }  $p worksAt $c {1,2} } return { $c.name }') == [["Globex"]]
    assert names(graph, '$p: Person { name: "Dee" }  $p knows $q {1,3}', "q") == ["Acme"]
    assert names(graph, '$c: Company { name: "Acme" }  $p worksAt $c') == ["Acme", "Ann", "Globex"]


# -- filters and negation -----------------------------------------------------------------------------


def test_filters_take_properties_literals_and_params_on_either_side(graph: Graph) -> None:
    assert rows(graph, "match { $p: Person  $p knows $f  $f.age < $p.age } return { $p.name, $f.name }") == [["Ann", "Bob"]]
    assert names(graph, "$p: Person  30 = $p.age") == ["Ann"]
    assert names(graph, "$p: Person  $a <= $p.age", a=("I32", 30)) == ["Ann", "Dee"]
    assert names(graph, '$p: Person  $p.name = "Zo\\u{eb}"') == ["Zoë"]
    assert names(graph, '$p: Person  $p.name = "Q\\"\\\\"') == ['Q"\\']


def test_contains_and_starts_with_are_exact(graph: Graph) -> None:
    assert names(graph, '$p: Person  $p.nick contains "%"') == ["Ann"]
    assert names(graph, '$p: Person  $p.nick contains "_"') == ["Ann", "Bob"]
    assert names(graph, '$p: Person  $p.nick starts_with "50%"') == ["Ann"]
    assert names(graph, '$p: Person  $p.nick starts_with "5_"') == []
    assert names(graph, '$p: Person  $p.name contains "ann"') == []
    assert names(graph, '$p: Person  $p.name starts_with "A"') == ["Acme", "Ann"]
    assert names(graph, '$p: Person  $p.tags contains "a"') == ["Ann"]
    assert names(graph, '$p: Person  $p.tags contains "c"') == []


def test_negation_nests_and_keeps_rows_whose_block_has_no_match(graph: Graph) -> None:
    assert names(graph, "$p: Person  not { $p worksAt $_ }") == ["Bob", "Cy", "Eve", 'Q"\\', "Zoë"]
    # everyone all of whose friends work somewhere (or who has no friend)
    assert names(graph, "$p: Person  not { $p knows $f  not { $f worksAt $_ } }") == ["Acme", "Cy", "Dee", "Globex", 'Q"\\', "Zoë"]
    assert names(graph, "$p: Person  $p.age > 20  not { $p.age > 28 }") == ["Eve"]


def test_numbers_compare_numerically_and_null_never_matches(graph: Graph) -> None:
    assert names(graph, "$p: Person  $p.age = 2.0") == ["Bob"]
    assert names(graph, "$p: Person  $p.age = 2.7") == []
    assert names(graph, "$p: Person  $p.age < 2.7") == ["Bob"]
    assert names(graph, "$p: Person  $p.height = 2.7") == ["Bob"]
    assert names(graph, "$p: Person  $p.height = 2") == ["Ann"]
    assert names(graph, "$p: Person  $p.score >= 2.5") == ["Ann", "Bob"]
    assert names(graph, "$p: Person  $p.age != 30") == ["Bob", "Dee", "Eve"]
    assert names(graph, "$p: Person  $p.age = $a", a=("I32?", None)) == []
    assert names(graph, "$p: Person  $p.nick != $n", n=("String?", None)) == []


def test_dates_and_datetimes_compare_with_their_literals_and_print_as_iso(graph: Graph) -> None:
    assert names(graph, '$p: Person  $p.born < date("2000-01-01")') == ["Bob"]
    assert names(graph, '$p: Person  $p.seen = datetime("2024-01-31T09:30:00Z")') == ["Ann"]
    assert names(graph, "$p: Person  $p.born = $d", d=("Date", "2000-01-31")) == ["Ann"]
    assert rows(graph, 'match { $p: Person { name: "Ann" } } return { $p.born, $p.seen, $p.score, $p.tags }') == [
        ["2000-01-31", "2024-01-31T09:30:00.000Z", 2.7, ["a", "b"]]
    ]


# -- return, aggregates, order, limit ------------------------------------------------------------------


def test_aggregates_group_by_the_other_items(graph: Graph) -> None:
    assert rows(graph, "match { $p: Person  $p knows $f } return { $p.name, count($f) as n } order { n desc }") == [
        ["Cy", 2],
        ["Ann", 1],
        ["Bob", 1],
        ["Dee", 1],
        ["Eve", 1],
    ]
    assert rows(graph, "match { $p: Person } return { count($p), sum($p.age), avg($p.age), min($p.name), max($p.age) }") == [
        [9, 98, 24.5, "Acme", 41]
    ]


def test_an_aggregate_alone_is_one_global_row(graph: Graph) -> None:
    assert rows(graph, 'match { $p: Person { name: "Nobody" } } return { count($p) as n, sum($p.age) as s }') == [[0, None]]


def test_counts_and_keyed_traversals_without_duckdb_answer_as_the_statement(graph: Graph) -> None:
    """On each backend: a whole-graph count from the edge columns, a keyed traversal over the adjacency it builds."""
    edges = "match { $p: Person  $p knows $f } return { $p.name, count($f) as n } order { n desc, $p.name }"
    reach = 'match { $p: Person { name: "Ann" }  $p knows{1,3} $f } return { count($f) as n }'
    with mock.patch.object(run, "degree_plan", lambda bound: None), mock.patch.object(run, "direct_plan", lambda bound: None):
        expected = [rows(graph, edges), rows(graph, reach)]
    fresh = mock.patch.object(adjacency, "_CACHE", adjacency.AdjacencyCache())
    slow = mock.patch.object(adjacency, "BUILD_SECONDS_PER_EDGE", 1e9)  # the counts never pay for the adjacency here
    with fresh, slow, returns_of(degrees, "_column_degrees") as counted, returns_of(run, "direct_rows") as direct:
        assert [rows(graph, edges), rows(graph, reach)] == expected
        assert counted[-1] is not None and direct[-1] is not None
        assert sum(isinstance(entry, adjacency.Adjacency) for entry in adjacency.adjacency_cache()._entries.values()) == 1


def test_order_puts_null_first_ascending_and_breaks_ties_by_ids(graph: Graph) -> None:
    ascending = rows(graph, "match { $p: Person } return { $p.name, $p.age } order { $p.age }")
    assert ascending == [
        ["Acme", None],
        ["Cy", None],
        ["Globex", None],
        ['Q"\\', None],
        ["Zoë", None],
        ["Bob", 2],
        ["Eve", 25],
        ["Ann", 30],
        ["Dee", 41],
    ]
    descending = rows(graph, "match { $p: Person } return { $p.name } order { $p.age desc }")
    assert [r[0] for r in descending] == ["Dee", "Ann", "Eve", "Bob", "Acme", "Cy", "Globex", 'Q"\\', "Zoë"]
    assert rows(graph, "match { $p: Person } return { $p.name } order { $p.age } limit 3") == [["Acme"], ["Cy"], ["Globex"]]
    assert rows(graph, "match { $p: Person } return { $p.name } limit 0") == []


def test_order_by_a_property_that_is_not_returned_and_without_order(graph: Graph) -> None:
    assert rows(graph, "match { $p: Person  $p.age > 0 } return { $p.name } order { $p.age desc }") == [["Dee"], ["Ann"], ["Eve"], ["Bob"]]
    assert rows(graph, "match { $p: Person  $p.age > 0 } return { $p.age }") == [[30], [2], [41], [25]]  # by id


def _expanded(graph: Graph, source: str, *, repeatable: bool = False) -> tuple[list[list[Any]], int]:
    """The rows of ``source`` and how many hops its breadth-first searches expanded (one edge scan
    each in DuckDB, one expansion of the frontier each over an adjacency)."""
    executed: list[str] = []
    execute = Session.execute
    expand = adjacency._expand
    expansions = 0

    def spy(session: Session, sql: str, params: Any = ()) -> Any:
        executed.append(sql)
        return execute(session, sql, params)

    def expand_spy(*args: Any) -> Any:
        nonlocal expansions
        expansions += 1
        return expand(*args)

    with (
        mock.patch.object(Session, "execute", spy),
        mock.patch.object(adjacency, "_expand", expand_spy),
        open_answer(graph, source, repeatable=repeatable) as answer,
    ):
        found = list(answer.rows())
    return found, expansions + sum("_edges AS SELECT" in sql for sql in executed)


@pytest.mark.parametrize("adjacency_mb", [None, "0"], ids=["adjacency", "duckdb"])
def test_an_unordered_limit_stops_the_traversal_once_it_has_its_rows(
    graph: Graph, adjacency_mb: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``limit N`` without ``order``: any N rows, and the search stops before the next hop once N pairs are reported.

    From Ann, ``knows{1,4}`` reaches Bob, Cy, Dee, Acme at hops 1 to 4. ``repeatable`` (the
    migrator's answer check) keeps the first N rows in tie-break order and searches to the end.
    Both searches: over the cached adjacency, and in DuckDB (no adjacency cache).
    """
    if adjacency_mb is not None:
        monkeypatch.setenv(ADJACENCY_ENV, adjacency_mb)
    reach = 'query q() {{ match {{ $a: Person {{ name: "Ann" }}  $a knows{{1,4}} $b }} return {{ $b.name }} {} }}'
    assert _expanded(graph, reach.format("limit 1")) == ([["Bob"]], 1)
    two, hops = _expanded(graph, reach.format("limit 2"))
    assert sorted(two) == [["Bob"], ["Cy"]] and hops == 2  # in any order
    assert _expanded(graph, reach.format("order { $b.name } limit 1")) == ([["Acme"]], 4)
    assert _expanded(graph, reach.format("limit 0")) == ([], 0)
    every = "query q() {{ match {{ $a: Person  $a knows{{1,4}} $b }} return {{ $a.name, $b.name }} {} }}"
    whole, _ = _expanded(graph, every.format(""))
    some, hops = _expanded(graph, every.format("limit 3"))
    assert len(some) == 3 and all(row in whole for row in some) and hops == 1
    assert _expanded(graph, every.format("limit 3"), repeatable=True) == (whole[:3], 4)


def test_returned_duplicates_are_kept(graph: Graph) -> None:
    # ordered by the ids of $p (Acme, Ann, Dee, Globex), then of $c
    assert rows(graph, "match { $p: Person  $p worksAt $c } return { $c.name }") == [["Acme"], ["Acme"], ["Globex"], ["Acme"]]


def test_empty_answers_keep_their_columns(graph: Graph) -> None:
    answer = run_query(graph, 'query q() { match { $p: Person { name: "Nobody" } } return { $p.name, $p.age as a } }')
    assert answer["columns"] == ["p.name", "a"] and answer["rows"] == []
    assert set(answer) == {"query", "branch", "commit", "columns", "types", "rows"} and answer["types"] == ["String", "I32"]
    assert answer["commit"] == graph.manifest.snapshot("main").head.commit_id


def test_unknown_branch_or_commit_is_not_found(graph: Graph) -> None:
    source = "query q() { match { $p: Person } return { $p.name } }"
    with pytest.raises(NotFound):
        run_query(graph, source, branch="nope")
    with pytest.raises(NotFound) as refused:
        run_query(graph, source, at="01NOTACOMMIT")
    assert refused.value.details == {"branch": "main", "commit": "01NOTACOMMIT"}


# -- the reference's examples on examples/social -------------------------------------------------------

REFERENCE_QUERIES = """
query friends_of($name: String, $min: I32?) {
  match {
    $p: Person { name: $name }
    $p knows $f
    $f.age >= $min
    not { $f worksAt $_ }
  }
  return { $f.name, $f.age }
  order { $f.age desc, $f.name }
  limit 10
}
query friend_counts() {
  match { $p: Person  $p knows $f }
  return { $p.name, count($f) as friends }
  order { friends desc }
}
"""


def _social(root: str, profile: Any = FENCED_PROFILE) -> Graph:
    created = init_graph(open_store(root), SCHEMA_PATH.read_text(encoding="utf-8"), profile, "tests")
    with DATA_PATH.open("rb") as data:
        load(created, data, mode="append", branch="main", actor="tests")
    return open_graph(open_store(root), FENCED_PROFILE, write=False)


def _reference_answers(social: Graph) -> dict[str, Any]:
    found = {}
    for name, params in [
        ("friends_of", {"name": "Grace", "min": 30}),
        ("friends_of", {"name": "Grace"}),
        ("friends_of", {"name": "Alice", "min": 0}),
        ("friend_counts", {}),
    ]:
        answer = run_query(social, REFERENCE_QUERIES, name=name, params=params)
        found[f"{name}{sorted(params.items())}"] = [[r[c] for c in answer["columns"]] for r in answer["rows"]]
    return found


def test_the_reference_examples(backend: str, tmp_path: Path) -> None:
    assert _reference_answers(_social(new_root(backend, tmp_path))) == {
        "friends_of[('min', 30), ('name', 'Grace')]": [["Heidi", 38]],
        "friends_of[('name', 'Grace')]": [],  # a NULL $min never matches
        "friends_of[('min', 0), ('name', 'Alice')]": [],  # Bob and Carol both work somewhere
        "friend_counts[]": [["Alice", 2], ["Bob", 1], ["Carol", 1], ["Eve", 1], ["Grace", 1]],
    }


def test_reads_work_at_format_4_and_while_migrating(tmp_path: Path) -> None:
    root = str(tmp_path / "v4")
    legacy = _social(root, LEGACY_PROFILE)
    assert legacy.stamp == "4"
    expected = _reference_answers(legacy)
    Manifest(open_store(root)).write_stamp("migrating", "m-1")
    migrating = open_graph(open_store(root), FENCED_PROFILE, write=False)
    assert migrating.stamp == "migrating" and _reference_answers(migrating) == expected


def test_keyed_constraints_find_the_node_by_its_id_with_numeric_equality_kept(tmp_path: Path) -> None:
    social = _social(str(tmp_path / "social"))
    source = 'query q() { match { $m: Membership { tenant: "acme", slot: %s } } return { $m.label, $m.id } }'
    for slot in ("2", "2.0"):  # a decimal constant equals the integer but never spells the id
        answer = run_query(social, source % slot)
        assert answer["rows"] == [{"m.label": "editor", "m.id": '["2","acme"]'}], slot
    assert run_query(social, source % "3")["rows"] == []
    friends = run_query(social, 'query q() { match { $p: Person { name: "Carol" }  $p knows $f  $f wrote $d } return { $d.slug } }')
    assert friends["rows"] == []  # Dave wrote nothing
    wrote = run_query(social, 'query q() { match { $p: Person { name: "Bob" }  $q knows $p  $q wrote $d } return { $q.name, $d.slug } }')
    assert wrote["rows"] == [{"q.name": "Alice", "d.slug": "intro-to-graphs"}]


def test_lance_refuses_a_pushed_filter_on_an_unsigned_column(tmp_path: Path) -> None:
    """The Lance fact behind ``omnigraph.engine.query.plan``'s ``coalesce`` on U32/U64 comparisons: when
    this test fails, pylance pushes such filters and the workaround can go."""
    import lance
    import pyarrow as pa
    import pyarrow.compute as pc

    dataset = lance.write_dataset(pa.table({"slot": pa.array([1, 2], pa.uint32())}), str(tmp_path / "u32"))
    with pytest.raises(ValueError, match="Substrait"):
        dataset.to_table(filter=pc.field("slot") == pa.scalar(1, pa.uint32()))


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_a_repeatable_float_aggregate_gives_the_same_bits_every_time(root_uri: str) -> None:
    """A sum of 400,000 random floats is scanned in parallel batches; ``repeatable`` (the answer
    check's mode) runs it on one thread, in scan order, so every run gives the same bits."""
    import random

    import pyarrow as pa

    from omnigraph.engine.door.table_store import FENCED_PROFILE
    from omnigraph.engine.graph import init_graph
    from omnigraph.engine.ops.write import CommitPlan, TableWrite, commit
    from omnigraph.engine.query.run import open_answer

    graph = init_graph(open_store(root_uri), "node Reading { name: String @key  value: F64 }\n", FENCED_PROFILE, "test")
    generator = random.Random(7)
    count = 400_000
    rows = pa.table(
        {
            "id": [f"r{i}" for i in range(count)],
            "name": [f"r{i}" for i in range(count)],
            "value": [generator.uniform(-1e6, 1e6) for _ in range(count)],
        }
    )
    rows = rows.cast(graph.catalog.table("node:Reading").arrow_schema(with_pk=True))
    commit(
        graph,
        "main",
        lambda snapshot, _previous: CommitPlan(
            (TableWrite("node:Reading", "overwrite", rows),), (snapshot.head.commit_id,), "readings", None
        ),
        actor="test",
    )
    source = "query total() { match { $r: Reading } return { sum($r.value) as s, avg($r.value) as a } }"
    answers = set()
    for _ in range(5):
        with open_answer(graph, source, repeatable=True) as answer:
            answers.add(tuple(answer.rows().__next__()))
    assert len(answers) == 1
