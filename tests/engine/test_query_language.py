"""The read-query language without storage: what it accepts, and every refusal with its place.

Each refusal is ``bad_request`` (:class:`omnigraph.engine.gq.GqError`) whose details name the line, the
column and the offending token; the reference's list of error kinds is covered one by one, as
are the parse errors (escapes, bounds), the newline separators shared with mutations and the
refusal of each kind of query by the other command.
"""

from __future__ import annotations

from typing import Any

import pytest

from omnigraph.engine.gq.parser import choose_query, parse
from omnigraph.engine.gq.read_checker import BoundRead, check_read
from omnigraph.engine.gq.syntax import GqError
from omnigraph.engine.ops.mutate import select_query
from omnigraph.engine.schema.catalog import Catalog
from tests.support.graph_helpers import SCHEMA_PATH

CATALOG = Catalog.from_source(SCHEMA_PATH.read_text(encoding="utf-8"))


def _check(source: str, params: dict[str, Any] | None = None) -> BoundRead:
    return check_read(choose_query(source, None, "read"), CATALOG, params or {})


def _refused(source: str, params: dict[str, Any] | None = None) -> GqError:
    with pytest.raises(GqError) as refused:
        _check(source, params)
    assert refused.value.code == "bad_request" and refused.value.http_status == 400
    return refused.value


@pytest.mark.parametrize(
    ("source", "params", "where", "text"),
    [
        # parameters: null or missing when required, wrong type, undeclared
        ("query q($n: String) {\n match { $p: Person { name: $n } }\n return { $p.age }\n}", {}, (1, 9, "$n"), "needs parameter $n"),
        ("query q($n: String) {\n match { $p: Person { name: $n } }\n return { $p.age }\n}", {"n": None}, (1, 9, "$n"), "needs"),
        ("query q($n: I32) {\n match { $p: Person { age: $n } }\n return { $p.age }\n}", {"n": "x"}, (1, 9, "$n"), "expected I32"),
        ("query q() {\n match { $p: Person { name: $n } }\n return { $p.age }\n}", {}, (2, 29, "$n"), "undeclared parameter $n"),
        ("query q() {\n match { $p: Person }\n return { $p.age }\n}", {"x": 1}, (1, 7, "q"), "declares no parameter $x"),
        # unknown type, property, edge; an edge bound as a node
        ("query q() {\n match { $p: Persona }\n return { $p.age }\n}", {}, (2, 14, "Persona"), "unknown node type"),
        ("query q() {\n match { $p: Person }\n return { $p.height }\n}", {}, (3, 14, "height"), "no property 'height'"),
        ('query q() {\n match { $p: Person { nick: "x" } }\n return { $p.age }\n}', {}, (2, 23, "nick"), "no property 'nick'"),
        ("query q() {\n match { $p likes $f }\n return { $p.age }\n}", {}, (2, 13, "likes"), "unknown edge 'likes'"),
        ("query q() {\n match { $p Knows $f }\n return { $p.age }\n}", {}, (2, 13, "Knows"), "lower-case first letter"),
        ("query q() {\n match { $k: Knows }\n return { $k.id }\n}", {}, (2, 14, "Knows"), "is an edge type"),
        # a traversal from the wrong endpoint type ($a is always the source side)
        ("query q() {\n match { $c: Company\n $c worksAt $p }\n return { $c.name }\n}", {}, (3, 2, "$c"), "goes from Person to Company"),
        ("query q() {\n match { $d: Doc\n $p knows $d }\n return { $d.slug }\n}", {}, (3, 11, "$d"), "not the to side's Person"),
        ("query q() {\n match { $p: Person\n $p: Company }\n return { $p.name }\n}", {}, (3, 6, "Company"), "cannot also be a Company"),
        # incompatible comparisons
        ('query q() {\n match { $p: Person\n $p.age = "x" }\n return { $p.name }\n}', {}, (3, 9, "="), "cannot compare I32 with String"),
        ("query q() {\n match { $p: Person\n $p.name < 3 }\n return { $p.name }\n}", {}, (3, 10, "<"), "cannot compare String with I64"),
        ('query q() {\n match { $d: Doc\n $d.tags = "x" }\n return { $d.slug }\n}', {}, (3, 10, "="), "a list takes contains"),
        ("query q() {\n match { $d: Doc\n $d.embedding = 1.5 }\n return { $d.slug }\n}", {}, (3, 15, "="), "a vector is not comparable"),
        ("query q() {\n match { $p: Person\n $p.age contains 3 }\n return { $p.name }\n}", {}, (3, 9, "contains"), "contains takes"),
        ('query q() {\n match { $p: Person\n $p.age starts_with "1" }\n return { $p.name }\n}', {}, (3, 9, "starts_with"), "two strings"),
        ("query q() {\n match { $k: Person $p knows $k\n $p.name = true }\n return { $p.name }\n}", {}, (3, 10, "="), "String with Bool"),
        ('query q() {\n match { $d: Doc\n $d.status = "gone" }\n return { $d.slug }\n}', {}, (3, 14, '"gone"'), "not a value of enum"),
        ("query q($d: Date) {\n match { $p: Person\n $p.age > $d }\n return { $p.name }\n}", {"d": 1}, (3, 9, ">"), "I32 with Date"),
        # aggregates, columns, order
        ("query q() {\n match { $p: Person }\n return { sum($p.name) }\n}", {}, (3, 11, "sum"), "sum takes a number property"),
        ("query q() {\n match { $p: Person }\n return { avg($p.email) }\n}", {}, (3, 11, "avg"), "avg takes a number property"),
        ("query q() {\n match { $d: Doc }\n return { max($d.tags) }\n}", {}, (3, 11, "max"), "max takes a scalar property"),
        ("query q() {\n match { $p: Person }\n return { $p.name, $p.age as p.name }\n}", {}, (3, 31, "."), "a line break or '}'"),
        ("query q() {\n match { $p: Person }\n return { $p.name, $p.age as n, $p.email as n }\n}", {}, (3, 45, "n"), "named 'n'"),
        ("query q() {\n match { $p: Person }\n return { $p.name }\n order { nope }\n}", {}, (4, 10, "nope"), "no return item is named so"),
        ("query q() {\n match { $p: Person }\n return { $p.name, count($p) as n }\n order { $p.age }\n}", {}, (4, 10, "$p"), "group keys"),
        (
            "query q() {\n match { $p: Person  $p knows $f }\n return { $p.name, count($f) }\n order { count($f) desc }\n}",
            {},
            (4, 10, "count"),
            "name it in return (count($f) as n) and order by the alias (order { n desc })",
        ),
        ("query q() {\n match { $p: Person }\n return { $p.name }\n order { max($p.age) }\n}", {}, (4, 10, "max"), "not max($p.age)"),
        # variables
        ("query q() {\n match { $p: Person\n $f.age > 1 }\n return { $p.name }\n}", {}, (3, 2, "$f"), "unknown variable $f"),
        ("query q() {\n match { $p: Person  not { $p knows $f } }\n return { $f.name }\n}", {}, (3, 11, "$f"), "unknown variable $f"),
        ("query q() {\n match { $p: Person  $p knows $_ }\n return { $_.name }\n}", {}, (3, 11, "$_"), "anonymous"),
        ("query q($p: String) {\n match { $p: Person }\n return { $p.name }\n}", {"p": "x"}, (2, 10, "$p"), "spelled like the parameter"),
        # an undirected traversal needs one node type at both ends
        ("query q() {\n match { $p: Person  $p <worksAt> $c }\n return { $p.name }\n}", {}, (2, 26, "worksAt"), "use the directed form"),
        # edge bindings: one hop, a new name, no id, not returned whole
        ("query q() {\n match { $p $k:knows{1,3} $f }\n return { $p.name }\n}", {}, (2, 21, "{"), "single hop, not {1,3}"),
        ("query q() {\n match { $p $k:<knows> $f {2,2} }\n return { $p.name }\n}", {}, (2, 27, "{"), "an edge binding ($k:knows)"),
        ("query q() {\n match { $p $p:knows $f }\n return { $p.name }\n}", {}, (2, 13, "$p"), "$p names another variable too (at 2:10)"),
        ("query q() {\n match { $p $k:knows $f  $k: Person }\n return { $p.name }\n}", {}, (2, 13, "$k"), "too (at 2:26)"),
        ("query q() {\n match { $p $k:knows $f  $f $k:knows $g }\n return { $p.name }\n}", {}, (2, 29, "$k"), "too (at 2:13)"),
        ("query q() {\n match { $p knows $k  not { $p $k:knows $g } }\n return { $p.name }\n}", {}, (2, 32, "$k"), "too (at 2:19)"),
        ("query q() {\n match { $p $_:knows $f }\n return { $p.name }\n}", {}, (2, 13, "$_"), "an edge binding needs a name"),
        ("query q() {\n match { $p $k:knows $f }\n return { $k.id }\n}", {}, (3, 14, "id"), "id of a bound edge is not queryable"),
        ("query q() {\n match { $p $k:knows $f }\n return { $k.weight }\n}", {}, (3, 14, "weight"), "edge type Knows has no"),
        ("query q() {\n match { $p $k:knows $f }\n return { $k }\n}", {}, (3, 11, "$k"), "whole node or bound edge"),
        (
            "query q() {\n match { $p $k:knows $f  not { $p $j:knows $g } }\n return { $j.since }\n}",
            {},
            (3, 11, "$j"),
            "unknown variable $j",
        ),
        ("query q() {\n match { $p $k:knows $c  $k.since = 3 }\n return { $p.name }\n}", {}, (2, 35, "="), "Date with I64"),
        # bad bounds (parse errors)
        ("query q() {\n match { $p: Person  $p knows{2,} $f }\n return { $p.name }\n}", {}, (2, 33, "}"), "{n,} is not allowed"),
        ("query q() {\n match { $p: Person  $p knows{1,2} $f {1,2} }\n return { $p.name }\n}", {}, (2, 39, "{"), "given twice"),
        ("query q() {\n match { $p: Person  $p knows $f {2,} }\n return { $p.name }\n}", {}, (2, 37, "}"), "{n,} is not allowed"),
        ("query q() {\n match { $p: Person  $p knows $f {3, 2} }\n return { $p.name }\n}", {}, (2, 34, "{"), "minimum exceeds the maximum"),
        ("query q() {\n match { $p: Person  $p knows $f {0,2} }\n return { $p.name }\n}", {}, (2, 35, "0"), "at least 1"),
        # literals
        ('query q() {\n match { $p: Person  $p.name = "a\\qb" }\n return { $p.name }\n}', {}, (2, 34, "\\q"), "unknown escape"),
        ('query q() {\n match { $p: Person  $p.name = "\\u{D800}" }\n return { $p.name }\n}', {}, (2, 33, "\\u{D800}"), "scalar value"),
        ('query q() {\n match { $p: Person  $p.born = date("2024-13-01") }\n return { $p }\n}', {}, (2, 37, '"2024-13-01"'), "valid"),
        ("query q() {\n match { $p: Person  $p.name = null }\n return { $p.name }\n}", {}, (2, 32, "null"), "write $v.prop is null"),
        ("query q() {\n match { }\n return { $p.name }\n}", {}, (2, 10, "}"), "at least one clause"),
        ("query q() {\n match { $p: Person }\n return { $p }\n}", {}, (3, 11, "$p"), "expected a return item"),
        ("query q() {\n match { $p: Person, $p knows $f }\n return { $p.name }\n}", {}, (2, 20, ","), "expected a match clause"),
        ("query q() {\n match { $p: Person }\n return { $p.name $p.age }\n}", {}, (3, 19, "$p"), "a line break or '}'"),
    ],
)
def test_refusals_name_line_column_and_token(source: str, params: dict[str, Any], where: tuple[int, int, str], text: str) -> None:
    refused = _refused(source, params)
    line, column, token = where
    assert (refused.details["line"], refused.details["column"], refused.details["token"]) == (line, column, token), refused.message
    assert text in refused.message
    assert refused.message.startswith(f"gq error at {line}:{column} near ")


def test_the_reference_examples_check() -> None:
    source = SCHEMA_EXAMPLES
    bound = check_read(choose_query(source, "friends_of", "read"), CATALOG, {"name": "Alice"})
    assert [output.name for output in bound.outputs] == ["f.name", "f.age"]
    assert [var.name for var in bound.variables] == ["p", "f", "_1"]
    assert bound.limit == 10 and [key.descending for key in bound.order] == [True, False]
    counts = check_read(choose_query(source, "friend_counts", "read"), CATALOG, {})
    assert [output.name for output in counts.outputs] == ["p.name", "friends"] and counts.grouped


SCHEMA_EXAMPLES = """
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


def test_column_names_alias_property_and_aggregate_text() -> None:
    bound = _check("query q() { match { $p: Person $p knows $f } return { $p.name, count($f), sum($f.age) as s, max($f.age) } }")
    assert [o.name for o in bound.outputs] == ["p.name", "count($f)", "s", "max($f.age)"]


def test_escapes_and_typed_literals_decode() -> None:
    bound = _check('query q() { match { $p: Person  $p.name = "a\\"b\\\\c\\nd\\te\\u{1F600}\\u{e9}" } return { $p.name } }')
    assert bound.block.compares[0].right.value == 'a"b\\c\nd\te\U0001f600\u00e9'  # type: ignore[union-attr]


def test_newlines_separate_return_items_and_assignments() -> None:
    bound = _check("query q() {\n match { $p: Person }\n return {\n  $p.name\n  $p.age as a\n }\n order {\n  a desc\n  $p.name\n }\n}")
    assert [o.name for o in bound.outputs] == ["p.name", "a"] and len(bound.order) == 2
    (mutation,) = parse("query m($n: String, $a: I32) {\n insert Person {\n  name: $n\n  age: $a\n }\n}")
    assert [a.prop for a in mutation.statements[0].assignments] == ["name", "age"]


def test_clause_order_does_not_matter() -> None:
    first = _check('query q() { match { $f.age > 1  $p knows $f  $p: Person { name: "Alice" } } return { $f.name } }')
    second = _check('query q() { match { $p: Person { name: "Alice" }  $p knows $f  $f.age > 1 } return { $f.name } }')
    assert first.block.compares == second.block.compares and first.block.hops == second.block.hops


def test_each_command_refuses_the_other_kind() -> None:
    source = 'query r() { match { $p: Person } return { $p.name } }\nquery m() { insert Company { name: "X" } }'
    with pytest.raises(GqError) as refused:
        select_query(source, "r")
    assert "read query" in refused.value.message and "omnigraph query" in refused.value.message
    assert refused.value.details["line"] == 1
    with pytest.raises(GqError) as refused:
        choose_query(source, "m", "read")
    assert "mutation" in refused.value.message and "omnigraph mutate" in refused.value.message
    assert refused.value.details["line"] == 2


def test_the_advice_for_an_aggregate_order_key_checks() -> None:
    """The refusal of ``order { count($f) desc }`` names a form that checks: the aggregate aliased in return."""
    bound = _check("query q() {\n match { $p: Person  $p knows $f }\n return { $p.name, count($f) as n }\n order { n desc }\n}")
    assert [output.name for output in bound.outputs] == ["p.name", "n"]


@pytest.mark.parametrize("alias", ["$p knows $f {1,3}", "$p knows{ 1, 3 } $f", "$p knows {1,3} $f"])
def test_hop_bounds_after_the_edge_name_mean_what_the_alias_means(alias: str) -> None:
    """Upstream's spelling ``$a knows{1,3} $b`` and this project's alias ``$a knows $b {1,3}`` check to the same query."""
    template = 'query q() {{\n match {{ $p: Person {{ name: "Ann" }}  {} }}\n return {{ $f.name }}\n order {{ $f.name }}\n}}'
    upstream = _check(template.format("$p knows{1,3} $f"))
    assert [(hop.min_hops, hop.max_hops) for hop in upstream.block.hops] == [(1, 3)]
    assert _check(template.format(alias)) == upstream


def test_an_undirected_traversal_is_a_traversal_either_way() -> None:
    """``$a <knows>{1,2} $b`` binds the same variables as the directed form, marked undirected, also inside ``not { }``."""
    bound = _check("query q() {\n match { $p: Person  $p <knows>{1,2} $f  not { $f <knows> $_ } }\n return { $f.name }\n}")
    assert [(hop.min_hops, hop.max_hops, hop.undirected) for hop in bound.block.hops] == [(1, 2, True)]
    assert [hop.undirected for hop in bound.block.negations[0].hops] == [True]


def test_a_filter_of_more_than_one_comparison_splits_at_its_top_level_and() -> None:
    """A top-level ``and`` splits into the block's comparisons and other conditions; a ``$param``
    before a reserved word starts a filter, not a traversal; sub-pattern variables are their own."""
    bound = _check(
        'query q($flag: Bool?) {\n match { $p: Person  $flag and $p.age > 1 and ($p.name = "a" or $p.age is null) }\n return { $p.name }\n}'
    )
    assert len(bound.block.compares) == 1 and [type(c).__name__ for c in bound.block.conditions] == ["Truth", "Junction"]
    sub = _check("query q() {\n match { $p: Person  exists { $p knows $f  not $f.age > 1 } }\n return { $p.name }\n}")
    (inner,) = sub.block.nested
    assert [var.name for var in inner.variables] == ["f"] and [type(c).__name__ for c in inner.conditions] == ["Inverse"]
    refused = _refused("query q() {\n match { $p: Person  exists { $p knows $f } }\n return { $f.name }\n}")
    assert (refused.line, refused.column) == (3, 11) and "unknown variable $f" in refused.message


def test_an_edge_binding_is_a_variable_of_the_edge_table_between_its_ends() -> None:
    """``$p $k:knows $f`` numbers ``$k`` between its ends, names it on the hop, and reads its properties.

    Inside ``not { }`` an edge binding is the block's own."""
    bound = _check(
        'query q() {\n match { $p $k:<knows> $f  $k.since > date("2020-01-01")  not { $f $j:knows $p } }\n'
        " return { $k.since, count($k) as n }\n}"
    )
    assert [(var.name, var.table.table_key, var.is_edge) for var in bound.variables] == [
        ("p", "node:Person", False),
        ("k", "edge:Knows", True),
        ("f", "node:Person", False),
        ("j", "edge:Knows", True),
    ]
    assert [(hop.edge_var, hop.undirected) for hop in bound.block.hops] == [(1, True)]
    assert [hop.edge_var for hop in bound.block.negations[0].hops] == [3]
    assert [output.name for output in bound.outputs] == ["k.since", "n"] and bound.outputs[1].var == 1
    assert _check("query q() {\n match { $p $k:knows{1,1} $f }\n return { $k.since }\n}").block.hops[0].edge_var == 1
