"""The plans read queries compile to: what DuckDB is given to run, checked on its physical plan.

* A comparison between two variables of the match (``$p.age > $f.age``, or an ``or`` over two
  variables) is applied after the joins that bind them: the physical plan joins no node scan with
  another by a nested loop or a cross product, as it did when the comparison was a join condition
  (288 s on 50K people and 200K edges), and the answer is the one the same match gives filtered
  row by row.
* The joins build their hash tables on the smaller tables: the FROM items are written largest
  first by the manifest's row counts (DuckDB estimates every Lance scan at one row), so a
  whole-graph match probes with the edge scan instead of building a hash table over a join of
  all the edges (the top-10-by-degree query at 1M people took 1 GB, now 0.9).
* ``--explain`` says where each such filter runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

import omnigraph
from omnigraph.engine.query.plan import statement
from omnigraph.engine.query.run import bind_read, tables_read
from omnigraph.engine.query.session import Traversals, open_session
from omnigraph.engine.storage.lance_io import open_pinned
from tests.support.graph_helpers import graph_for, init, knows, load_lines, person

PEOPLE = 60
LOOPING_JOINS = ("NESTED_LOOP_JOIN", "BLOCKWISE_NL_JOIN", "CROSS_PRODUCT", "PIECEWISE_MERGE_JOIN", "IE_JOIN")


@pytest.fixture(scope="module")
def circle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[omnigraph.Graph]:
    """``PEOPLE`` people aged ``i * 7 % 10``, each knowing the next two (around a circle), one self-loop."""
    root = str(tmp_path_factory.mktemp("plan") / "circle")
    init(root)
    names = [f"p{i:03d}" for i in range(PEOPLE)]
    lines = [person(name, i * 7 % 10) for i, name in enumerate(names)]
    lines += [knows(a, names[(i + step) % PEOPLE], f"k{i}-{step}") for i, a in enumerate(names) for step in (1, 2)]
    lines.append(knows(names[0], names[0], "loop"))
    load_lines(root, lines)
    with omnigraph.open(root) as graph:
        yield graph


def _physical_plan(graph: omnigraph.Graph, query: str, form: str = "") -> str:
    """The physical plan DuckDB makes of ``query``'s statement on the head of main (``form``: an EXPLAIN option)."""
    engine = graph_for(graph.uri, write=False)
    point, bound = bind_read(engine, query, None, {}, "main", None)
    with open_session() as session:
        keys = sorted(tables_read(bound.block))
        for key in keys:
            session.connection.register(key, open_pinned(engine.store, point.snapshot.table(key).image))
        rows = {key: point.snapshot.table(key).row_count for key in keys}
        sql, values = statement(bound, Traversals(session, bound).relation, rows=rows)
        found = session.execute(f"EXPLAIN {form} {sql}", values).fetchall()
    return "\n".join(str(row[1]) for row in found)


def _scans_edges(node: dict[str, Any]) -> bool:
    projections = node.get("extra_info", {}).get("Projections", [])
    return "src" in projections or any(_scans_edges(child) for child in node["children"])


def _hash_tables_on_edges(node: dict[str, Any]) -> list[str]:
    """The hash joins of the plan ``node`` that build their table on a side reading the edges."""
    found = [str(node.get("extra_info", {}).get("Conditions"))] if node["name"] == "HASH_JOIN" and _scans_edges(node["children"][1]) else []
    return found + [join for child in node["children"] for join in _hash_tables_on_edges(child)]


def _ages(graph: omnigraph.Graph) -> dict[str, int]:
    rows = graph.query("query q() { match { $p: Person } return { $p.name, $p.age } }").rows
    return {row["p.name"]: row["p.age"] for row in rows}


@pytest.mark.parametrize(
    ("condition", "keep"),
    [
        ("$p.age > $f.age", lambda p, f: p > f),
        ("($p.age = 3 or $f.age < 2)", lambda p, f: p == 3 or f < 2),
        ("not ($p.age <= $f.age)", lambda p, f: p > f),
    ],
)
def test_a_comparison_of_two_variables_runs_after_the_joins(circle: omnigraph.Graph, condition: str, keep: object) -> None:
    query = f"query q() {{ match {{ $p: Person  $p knows $f  {condition} }} return {{ $p.name, $f.name }} }}"
    plan = _physical_plan(circle, query)
    operators = re.sub(r"[ ]+", "_", plan.upper())  # "Blockwise Nl Join" is BLOCKWISE_NL_JOIN
    assert not [name for name in LOOPING_JOINS if name in operators], plan
    pairs = circle.query("query q() { match { $p: Person  $p knows $f } return { $p.name, $f.name } }").rows
    ages = _ages(circle)
    assert callable(keep)
    expected = sorted((r["p.name"], r["f.name"]) for r in pairs if keep(ages[r["p.name"]], ages[r["f.name"]]))
    found = sorted((r["p.name"], r["f.name"]) for r in circle.query(query).rows)
    assert found == expected and 0 < len(found) < len(pairs)


def test_explain_says_where_each_filter_runs(circle: omnigraph.Graph) -> None:
    query = "query q() { match { $p: Person  $p knows $f  $p.age > 2  $p.age > $f.age } return { count($p) as n } }"
    filters = {item["filter"]: (item["pushed_into_scan"], item["after_joins"]) for item in circle.explain_query(query).filters}
    assert filters == {"$p.age > 2": (True, False), "$p.age > $f.age": (False, True)}


@pytest.mark.parametrize(
    "match",
    [
        "$p: Person  $p knows $f",
        "$p: Person  $f: Person  $p knows $f",
        "$f: Person  $p knows $f  $p: Person",
    ],
)
def test_a_whole_graph_match_builds_no_hash_table_on_the_edges(circle: omnigraph.Graph, match: str) -> None:
    query = f"query q() {{ match {{ {match} }} return {{ $p.name, count($f) as d }} order {{ d desc }} limit 3 }}"
    (plan,) = json.loads(_physical_plan(circle, query, "(FORMAT json)"))
    assert _scans_edges(plan) and _hash_tables_on_edges(plan) == [], json.dumps(plan, indent=1)
    degrees = circle.query(query).rows
    assert [row["d"] for row in degrees] == [3, 2, 2] and degrees[0]["p.name"] == "p000"  # two neighbours and its self-loop
