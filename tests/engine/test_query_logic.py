"""Boolean filters, nulls and sub-patterns of read queries on the example graph, in-process.

* The examples of ``docs/queries.md`` (section "Conditions") run as printed through
  ``omnigraph query`` (click's runner).
* Through the Python API: three-valued logic (an unknown comparison under ``not`` keeps no
  row), ``is [not] null`` on scalars, lists and vectors (a vector's null test is not pushed into
  the Lance scan, which refuses it), a nullable ``Bool`` parameter as a condition, ``exists`` and
  ``count`` correlated with the row (nested in ``not { }``, compared with an outer property and a
  float), the ``--explain`` entries of conditions and the lint descriptors of sub-pattern blocks.
* Refusals are ``gq error at LINE:COLUMN`` naming the feature (more in ``test_query_language``).

The answers of random queries against the reference model are ``test_query_property``'s.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import omnigraph
from omnigraph.engine.gq.syntax import GqError
from tests.support.graph_helpers import OMNIGRAPH, PROJECT, SCHEMA_PATH, invoke, make_example_graph


@pytest.fixture(scope="module")
def social(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = str(tmp_path_factory.mktemp("logic") / "social")
    make_example_graph(root)
    return root


@pytest.fixture(scope="module")
def graph(social: str) -> Iterator[Any]:
    yield omnigraph.open(social)


def _rows(graph: Any, source: str, **params: Any) -> list[list[Any]]:
    answer = graph.query(source, params=params).to_pylist()
    return [list(row.values()) for row in answer]


def test_the_docs_examples_run_as_printed(social: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (PROJECT / "docs/queries.md").read_text(encoding="utf-8").split("### Conditions:", 1)[1].split("\n## ", 1)[0]
    source = re.search(r"```gq\n(.*?)```", text, re.S)
    console = re.search(r"```console\n(.*?)```", text, re.S)
    assert source is not None and console is not None
    (tmp_path / "logic.gq").write_text(source[1], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    runs = re.split(r"^\$ ", console[1], flags=re.M)[1:]
    assert len(runs) == 7
    for run in runs:
        line, printed = run.split("\n", 1)
        argv = shlex.split(line)
        assert argv[:2] == ["omnigraph", "query"] and argv[-1] == "graph/", line
        result = invoke(OMNIGRAPH, *argv[1:-1], social).ok()
        assert result.stdout == printed, line


def test_three_valued_logic_keeps_only_true_rows(graph: Any) -> None:
    ages = "query q() {{ match {{ $p: Person  {} }} return {{ $p.name }} }}"
    assert _rows(graph, ages.format("$p.age != 34")) == [["Bob"], ["Carol"], ["Eve"], ["Grace"], ["Heidi"]]
    assert _rows(graph, ages.format("not $p.age = 34")) == [["Bob"], ["Carol"], ["Eve"], ["Grace"], ["Heidi"]]
    assert _rows(graph, ages.format("not ($p.age = 34 or $p.age is null)")) == [["Bob"], ["Carol"], ["Eve"], ["Grace"], ["Heidi"]]
    # the anti-join keeps the unknown ages (its block has no match for them), the negation does not
    assert _rows(graph, ages.format("not { $p.age > 30 }")) == [["Bob"], ["Dave"], ["Eve"], ["Frank"]]
    assert _rows(graph, ages.format("not $p.age > 30")) == [["Bob"], ["Eve"]]
    # unknown or true is true; unknown and true is unknown
    assert _rows(graph, ages.format('$p.age > 30 or $p.name = "Dave"')) == [["Alice"], ["Carol"], ["Dave"], ["Grace"], ["Heidi"]]
    assert _rows(graph, ages.format('($p.age > 30 or $p.age < 30) and $p.name starts_with "D"')) == []
    assert _rows(graph, ages.format('$p.email is not null and not $p.email contains ".com"')) == [["Dave"], ["Eve"]]
    # a top-level and is split into the block's comparisons: the keyed one still finds its node by id
    assert _rows(graph, ages.format('$p.name = "Alice" and $p.age > 1')) == [["Alice"]]


def test_null_tests_on_lists_and_vectors_and_a_bool_parameter(graph: Any) -> None:
    docs = "query q($flag: Bool?, $tag: String?) {{ match {{ $d: Doc  {} }} return {{ $d.slug }} }}"
    assert _rows(graph, docs.format("$d.embedding is null")) == [["migration-runbook"], ["quarterly-report"]]
    assert _rows(graph, docs.format("$d.embedding is not null and $d.tags is null")) == [["café-reviews"]]
    drafts = [["café-reviews"], ["fencing-notes"]]
    assert _rows(graph, docs.format('$flag or $d.status = "draft"'), flag=True) == [[s] for s in sorted(_all_docs(graph))]
    assert _rows(graph, docs.format('$flag or $d.status = "draft"'), flag=False) == drafts
    assert _rows(graph, docs.format('$flag or $d.status = "draft"')) == drafts  # a null $flag is unknown
    assert _rows(graph, docs.format("not $flag")) == []
    assert _rows(graph, docs.format("$flag is null")) == [[s] for s in sorted(_all_docs(graph))]
    # a null item is unknown in every list, the empty one (migration-runbook's) too
    assert _rows(graph, docs.format("not $d.tags contains $tag")) == []
    assert _rows(graph, docs.format("not $d.tags contains $tag"), tag="graphs") == [
        ["fencing-notes"],
        ["migration-runbook"],
        ["quarterly-report"],
    ]


def _all_docs(graph: Any) -> list[str]:
    return [row[0] for row in _rows(graph, "query q() { match { $d: Doc } return { $d.slug } }")]


def test_sub_patterns_are_correlated_with_the_row(graph: Any) -> None:
    people = "query q() {{ match {{ $p: Person  {} }} return {{ $p.name }} }}"
    assert _rows(graph, people.format("exists { $p worksAt $c  $c.name = $p.name }")) == []
    assert _rows(graph, people.format('not { exists { $p worksAt $c  $c.name = "Acme" } }')) == [
        ["Carol"],
        ["Dave"],
        ["Eve"],
        ["Frank"],
        ["Grace"],
        ["Heidi"],
    ]
    # within three hops Alice reaches Bob, Carol and Dave, Bob reaches Alice, Carol and Dave
    assert _rows(graph, people.format("count { $p knows{1,3} $f } > 2.5")) == [["Alice"], ["Bob"]]
    assert _rows(graph, people.format("count { $p knows $_ } = 0  count { $p worksAt $_ } = 1")) == [["Dave"]]
    assert _rows(graph, people.format("count { $q knows $p  $q.age < $p.age } >= 1")) == [["Alice"], ["Carol"]]
    assert _rows(graph, people.format("count { $p.age > 40 } != 0")) == [["Carol"], ["Grace"]]  # no variable: 1 or 0
    totals = graph.query("query q() { match { $c: Company  count { $p worksAt $c } >= 2 } return { $c.name } }").to_pylist()
    assert totals == [{"c.name": "Acme"}, {"c.name": "Globex"}]


def test_explain_lists_conditions_and_lint_reads_sub_pattern_blocks(graph: Any) -> None:
    source = """query q($m: I32?) {
  match {
    $p: Person
    $m is null or $p.age >= $m
    exists { $p worksAt $c  $c.name = "Acme" or $c.name = "Globex" }
    count { $p <knows> $_ } > 1
  }
  return { $p.name }
}"""
    plan = graph.explain_query(source, params={"m": 30})
    filters = {item["filter"]: (item["table"], item["pushed_into_scan"], item["index"]) for item in plan.filters}
    assert filters == {
        "(30 is null or $p.age >= 30)": ("node:Person", True, None),
        'exists { $c: Company  $p WorksAt{1,1} $c  ($c.name = "Acme" or $c.name = "Globex") }': (None, False, None),
        "count { $_1: Person  $p <Knows>{1,1} $_1 } > 1": (None, False, None),
        '($c.name = "Acme" or $c.name = "Globex")': ("node:Company", True, None),
    }
    report = omnigraph.lint.lint(SCHEMA_PATH.read_text(encoding="utf-8"), source)
    reads = report["results"][0]["operation"]["reads"]
    assert reads == [
        {"kind": "node", "type_name": "Company"},
        {"kind": "node", "type_name": "Person"},
        {"kind": "edge", "type_name": "Knows"},
        {"kind": "edge", "type_name": "WorksAt"},
    ]


@pytest.mark.parametrize(
    ("clause", "offset", "token", "text"),
    [
        ("$p.age", 0, "$p", "a condition on its own must be Bool, and $p.age is I32"),
        ("$p.age > 1 or not { $p knows $_ }", 14, "not", "not { ... } is a clause of its own"),
        ("not exists { $p knows $_ }", 4, "exists", "write not { ... }"),
        ("1 < $p.age < 9", 11, "<", "comparisons do not chain"),
        ('count { $p knows $_ } > "two"', 22, ">", "count { ... } is a number (I64): cannot compare I64 with String"),
        ("sum($f.age) { $p knows $f } > 3", 0, "sum", "sub-pattern aggregates are not supported"),
        ('$p.name in ["Bob", 1]', 11, "[", "the items of a list are of one type, not number and string"),
        ('$p.name in "Bob"', 8, "in", "in takes a value and a list of its type, not String and String"),
        ('$p.born in [date("2024-01-31")]', 12, "date", "for dates pass a [Date] or [DateTime] parameter"),
        ("$p.age = null", 9, "null", "write $v.prop is null"),
    ],
)
def test_refusals_name_the_feature_at_their_place(graph: Any, clause: str, offset: int, token: str, text: str) -> None:
    prefix = "  match { $p: Person  "
    with pytest.raises(GqError) as refused:
        graph.query(f"query q() {{\n{prefix}{clause} }}\n  return {{ $p.name }}\n}}")
    column = len(prefix) + offset + 1
    assert (refused.value.line, refused.value.column, refused.value.token) == (2, column, token), refused.value.message
    assert refused.value.message.startswith(f"gq error at 2:{column} ") and text in refused.value.message


def test_unsigned_columns_keep_their_unknowns_and_stay_out_of_the_scan(tmp_path: Path) -> None:
    """The Lance scan refuses a pushed filter on a U32/U64 column (``test_query``); inside a
    condition such a comparison or null test is kept from the scan and still unknown on null.
    Dates are compared with ``in`` through a ``[Date]`` parameter; a ``Bool`` property is a condition."""
    from omnigraph.engine.door.table_store import FENCED_PROFILE
    from omnigraph.engine.graph import init_graph
    from omnigraph.engine.ops.load import load
    from omnigraph.engine.query.run import run_query
    from omnigraph.engine.storage.store import open_store

    graph = init_graph(
        open_store(str(tmp_path / "u")), "node Slot { name: String @key  rank: U32?  day: Date?  on: Bool? }\n", FENCED_PROFILE, "tests"
    )
    rows = [
        {"name": "a", "rank": 1, "day": "2024-01-31", "on": True},
        {"name": "b", "rank": 2, "on": False},
        {"name": "c", "rank": None, "day": "2024-02-01"},
    ]
    load(graph, "".join(json.dumps({"type": "Slot", "data": row}) + "\n" for row in rows).encode(), mode="append", branch="main", actor="t")
    source = "query q($days: [Date]?) {{ match {{ $s: Slot  {} }} return {{ $s.name }} }}"
    for condition, names in [
        ("not $s.rank = 1", ["b"]),
        ("not ($s.rank = 1 or $s.rank > 1)", []),
        ("$s.rank is null", ["c"]),
        ("not $s.rank is null and $s.rank != 2", ["a"]),
        ("not $s.rank in [1, 5]", ["b"]),
        ("$s.day in $days", ["c"]),
        ("not $s.day in $days", ["a"]),
        ("$s.on", ["a"]),
        ("not $s.on", ["b"]),
        ("$s.on or $s.rank > 1", ["a", "b"]),
    ]:
        answer = run_query(graph, source.format(condition), params={"days": ["2024-02-01", "2023-01-01"]})
        assert [row["s.name"] for row in answer["rows"]] == names, condition
