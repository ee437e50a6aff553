"""The schema language beyond types: constraints, interfaces, metadata, unsupported features, and
the two hypothesis properties (grammar round trip; mutated sources end in a typed error)."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import omnigraph
from omnigraph.engine.errors import OmnigraphError
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.parser import SchemaError, parse, print_schema
from omnigraph.engine.schema.tables import Cardinality, CheckRule, Metadata, RangeRule
from tests.support.graph_helpers import OMNIGRAPH, run_cli

FEATURES = """\
interface Named @description("has a name") { name: String @key }
interface Aged { age: I32? }
node Person implements Named, Aged @instruction("query by name") {
  name: String
  email: String? @unique
  code: String?
  bio: String? @embed("name") @rename_from("about") @shiny(1, "x", 1.5..)
  @range(age, -5..200)
  @check(code, "[A-Z]{3}")
  @index(email, code)
  @unique(email, code)
}
node Company { name: String @key  tenant: String  slot: U32  @unique(tenant, slot)  @range(slot, ..9) }
edge WorksAt: Person -> Company @card(1..1) @description("employment") { since: Date?  @unique(src, dst) }
edge Knows: Person -> Person @card(0..*)
"""


def test_every_feature_is_in_the_catalog() -> None:
    catalog = Catalog.from_source(FEATURES)
    person = catalog.node("Person")
    assert [p.name for p in person.properties] == ["name", "age", "email", "code", "bio"]
    assert person.key == ("name",) and person.implements == ("Named", "Aged")
    assert person.composite_unique == (("email", "code"),) and person.indexes == (("email", "code"),)
    assert person.ranges == (RangeRule("age", -5, 200),)
    assert person.checks == (CheckRule("code", "[A-Z]{3}"),)
    assert person.metadata == (Metadata("instruction", ("query by name",)),)
    assert person.property("bio").metadata == (
        Metadata("embed", ("name",)),
        Metadata("rename_from", ("about",)),
        Metadata("shiny", (1, "x", {"low": 1.5, "high": None}), known=False),
    )
    assert catalog.node("Company").composite_unique == (("tenant", "slot"),)
    assert catalog.node("Company").ranges == (RangeRule("slot", None, 9),)
    works_at = catalog.edge("WorksAt")
    assert works_at.cardinality == Cardinality(1, 1) and works_at.composite_unique == (("src", "dst"),)
    assert catalog.edge("Knows").cardinality == Cardinality(0, None)
    assert [i.name for i in catalog.interfaces()] == ["Aged", "Named"]
    assert [str(w) for w in catalog.warnings] == [
        "schema warning at 7:53: unknown annotation '@shiny' is kept as metadata and not enforced"
    ]


def test_one_member_body_forms_equal_property_forms() -> None:
    body = Catalog.from_source("node A { x: String  y: I32  @unique(x)  @index(y) }")
    inline = Catalog.from_source("node A { x: String @unique  y: I32 @index }")
    assert body == inline


def test_identical_redeclaration_merges_annotations() -> None:
    catalog = Catalog.from_source(
        "interface N { name: String @unique }\ninterface M { name: String @index }\nnode A implements N, M { name: String }"
    )
    name = catalog.node("A").property("name")
    assert (name.unique, name.index) == (True, True)


REFUSALS = [
    ("node A { x: Blob @key }", 1, 18, "@key property 'x' must not be a Blob"),
    ("node A { x: Blob @index }", 1, 18, "@index is not allowed on a Blob property"),
    ("node A { x: Blob  y: I32  @index(y, x) }", 1, 37, "@index is not allowed on a Blob property"),
    ("node A { x: [Blob] }", 1, 14, "list items must be scalar types, not Blob"),
    ("node B {}\nnode A : B {}", 2, 8, "unsupported schema feature: type inheritance"),
    ("node A { x: I32 = 3 }", 1, 17, "unsupported schema feature: default value"),
    ("enum Color { red }", 1, 1, "unsupported schema feature: enum declaration"),
    ("node A { x: [String?] }", 1, 20, "unsupported schema feature: nullable list items"),
    ("interface I { x: String @unique(x) }", 1, 25, "unsupported schema feature: body constraint @unique in an interface"),
    ("interface N { name: String }\nnode A implements N { name: I32 }", 2, 23, "already declared as String (at 1:15)"),
    ("interface N { name: String }\nnode A implements N { name: String? }", 2, 23, "identical type"),
    ("interface N { x: I32 }\ninterface M { x: I64 }\nnode A implements N, M {}", 2, 15, "interface M is I64"),
    ("node A implements N {}", 1, 19, "unknown interface 'N'"),
    ("interface N {}\nnode A implements N, N {}", 2, 22, "named twice"),
    ("interface N {}\nedge E: N -> N", 2, 9, "'N' is an interface"),
    ("interface N {}\nnode N {}", 2, 6, "duplicate type name 'N'"),
    ("node A {}\nedge E: A -> A @card(2..1)", 2, 22, "minimum 2 is above its maximum 1"),
    ("node A {}\nedge E: A -> A @card(-1..)", 2, 22, "at least 0"),
    ("node A {}\nedge E: A -> A @card(1.5..)", 2, 22, "whole numbers"),
    ("node A {}\nedge E: A -> A @card(..3)", 2, 22, "needs a minimum"),
    ("node A {}\nedge E: A -> A @card(3)", 2, 22, "@card takes one range"),
    ("node A @card(0..1) {}", 1, 8, "@card is only allowed on edge types"),
    ("node A { x: String @card(0..1) }", 1, 20, "@card belongs after an edge type's header"),
    ("node A @unique(x) { x: String }", 1, 8, "belongs on a property or in the body"),
    ("node A { x: String  @unique(x, z) }", 1, 32, "@unique names unknown property 'z'"),
    ("node A { x: String  y: I32  @unique(x, y, x) }", 1, 43, "names 'x' twice"),
    ("node A { x: [String]  y: I32  @unique(x, y) }", 1, 39, "@unique is not allowed on a [String]"),
    ("node A { x: String  y: I32  @unique(x, y)  @unique(y, x) }", 1, 44, "duplicate @unique(y, x)"),
    ("node A { x: String  @unique(src, x) }", 1, 29, "unknown property 'src'"),
    ("node A { x: String  @range(x, 0..1) }", 1, 21, "needs a numeric property; 'x' is String"),
    ("node A { x: I32  @range(x, 5..1) }", 1, 28, "low bound 5 is above its high bound 1"),
    ("node A { x: I32  @range(x, ..) }", 1, 28, "at least one bound"),
    ("node A { x: I32  @range(x, 3) }", 1, 28, "takes a range as its second argument"),
    ("node A { x: I32  @range(y, 0..1) }", 1, 25, "names unknown property 'y'"),
    ("node A { x: I32  @range(0..1) }", 1, 25, "@range takes a property name and a range"),
    ('node A { x: I32  @check(x, "a") }', 1, 18, "needs a String property"),
    ('node A { x: String  @check(x, "(") }', 1, 31, "not a valid regular expression"),
    ("node A { x: String  @check(x, y) }", 1, 31, "regular expression string"),
    ("node A { x: String @embed(1) }", 1, 27, "@embed takes one argument"),
    ("node A { x: String @rename_from }", 1, 20, "@rename_from takes one argument, a string"),
    ('node A { x: String @description("a", "b") }', 1, 33, "@description takes one argument"),
    ('node A { x: String @description("a") @description("b") }', 1, 38, "duplicate annotation '@description'"),
    ('node A { x: String @description("a\\q") }', 1, 35, "unsupported escape '\\q'"),
    ('node A { x: String @description("open }', 1, 33, "unterminated string"),
    ("node A { x: String @description(,) }", 1, 33, "expected an annotation argument"),
    ("node A { x: Vector(-2) }", 1, 20, "expected a vector dimension"),
    ("node A {}\nedge E: A -> A @card(1..1) implements", 2, 28, "expected 'node', 'edge' or 'interface'"),
]


@pytest.mark.parametrize(("source", "line", "column", "fragment"), REFUSALS)
def test_refusals_name_the_feature_with_line_and_column(source: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(SchemaError) as caught:
        Catalog.from_source(source)
    assert caught.value.details == {"line": line, "column": column}, caught.value.message
    assert fragment in caught.value.message


# --- hypothesis: sources generated from the grammar -------------------------------------------------

_TYPE_NAMES = st.from_regex(r"[A-Z][a-z]{0,4}", fullmatch=True)
_PROP_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,4}", fullmatch=True).filter(
    lambda n: n not in {"id", "src", "dst", "node", "edge", "enum", "interface", "implements"}
)
_SCALARS = ["String", "Bool", "I32", "I64", "U32", "U64", "F32", "F64", "Date", "DateTime"]
_TEXT = st.text(alphabet=string.ascii_letters + string.digits + ' "\\\n\t.-_{}()@', max_size=8)
_NUMBERS = st.one_of(st.integers(-(10**6), 10**6), st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    return f"{value:.6f}"


@st.composite
def _arg(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["name", "string", "number", "range"]))
    if kind == "name":
        return draw(_PROP_NAMES)
    if kind == "string":
        return _string(draw(_TEXT))
    if kind == "number":
        return _number(draw(_NUMBERS))
    low = draw(st.none() | _NUMBERS)
    high = draw(st.sampled_from(["", "*"]) | _NUMBERS.map(_number))
    return f"{'' if low is None else _number(low)}..{high}"


@st.composite
def _annotation(draw: st.DrawFn, names: list[str]) -> str:
    name = draw(st.sampled_from(names))
    if draw(st.booleans()):
        return f"@{name}"
    args = draw(st.lists(_arg(), max_size=3))
    return f"@{name}({', '.join(args)}{draw(st.sampled_from(['', ',']) if args else st.just(''))})"


@st.composite
def _type(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["scalar", "list", "enum", "vector", "blob"]))
    scalar = draw(st.sampled_from(_SCALARS))
    if kind == "list":
        return f"[{scalar}]"
    if kind == "enum":
        return f"enum({', '.join(draw(st.lists(_PROP_NAMES, min_size=1, max_size=3, unique=True)))})"
    if kind == "vector":
        return f"Vector({draw(st.integers(1, 64))})"
    if kind == "blob":
        return "Blob"
    return scalar


_SPACE = st.sampled_from([" ", "\n", "  ", " // c\n", " /* c */ ", ", "])
_PROP_ANNOTATIONS = ["unique", "index", "description", "embed", "rename_from", "other"]
_BODY_ANNOTATIONS = ["key", "unique", "index", "range", "check", "note"]


@st.composite
def _body(draw: st.DrawFn) -> str:
    members = []
    for _ in range(draw(st.integers(0, 4))):
        annotations = " ".join(draw(st.lists(_annotation(_PROP_ANNOTATIONS), max_size=2)))
        nullable = draw(st.sampled_from(["", "?"]))
        members.append(f"{draw(_PROP_NAMES)}: {draw(_type())}{nullable} {annotations}".rstrip())
    for _ in range(draw(st.integers(0, 2))):
        members.append(draw(_annotation(_BODY_ANNOTATIONS)))
    space = draw(_SPACE)
    return "{ " + space.join(members) + " }"


@st.composite
def _source(draw: st.DrawFn) -> str:
    decls = []
    for _ in range(draw(st.integers(1, 4))):
        name = draw(_TYPE_NAMES)
        header_annotations = " ".join(draw(st.lists(_annotation(["description", "card", "instruction", "x"]), max_size=2)))
        kind = draw(st.sampled_from(["node", "edge", "interface"]))
        if kind == "edge":
            header = f"edge {name}: {draw(_TYPE_NAMES)} -> {draw(_TYPE_NAMES)} {header_annotations}"
            decls.append(header + (" " + draw(_body()) if draw(st.booleans()) else ""))
        elif kind == "node":
            implements = draw(st.lists(_TYPE_NAMES, max_size=2))
            clause = f" implements {', '.join(implements)}" if implements else ""
            decls.append(f"node {name}{clause} {header_annotations} {draw(_body())}")
        else:
            decls.append(f"interface {name} {header_annotations} {draw(_body())}")
    return "\n".join(decls)


SETTINGS = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(_source())
def test_grammar_sources_round_trip_through_the_printer(source: str) -> None:
    decls = parse(source)
    printed = print_schema(decls)
    assert parse(printed) == decls
    assert print_schema(parse(printed)) == printed
    try:
        catalog = Catalog.from_source(source)
    except SchemaError:
        with pytest.raises(SchemaError):
            Catalog.from_source(printed)
        return
    assert Catalog.from_source(printed) == catalog


VALID = [FEATURES, "node A { x: String @key  y: I32?  @range(y, 0..9) }\nedge E: A -> A @card(0..2) { w: F64? }"]
_NOISE = st.sampled_from(
    [
        *list('{}()[]:,?*=@"./-\\$\n '),
        "..",
        "->",
        "node",
        "edge",
        "interface",
        "implements",
        "@card(",
        "@range(",
        "Blob",
        "0..",
        "-1",
        '"x"',
        "/*",
        "//",
    ]
)


@st.composite
def _mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(VALID))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        span = draw(st.integers(1, 6))
        noise = draw(_NOISE)
        if action == "insert":
            text = text[:at] + noise + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + span :]
        else:
            text = text[:at] + noise + text[at + span :]
    return text


@SETTINGS
@given(_mutated())
def test_mutated_sources_end_in_a_typed_error_with_a_position(source: str) -> None:
    try:
        Catalog.from_source(source)
    except SchemaError as error:
        lines = source.split("\n")
        assert 1 <= error.line <= len(lines)
        assert 1 <= error.column <= len(lines[error.line - 1]) + 1
        assert f"at {error.line}:{error.column}:" in error.message
    except OmnigraphError as error:
        pytest.fail(f"a {type(error).__name__} without a position: {error}")


def test_a_misspelt_annotation_names_the_nearest_one_and_strict_init_refuses_it(tmp_path: Path) -> None:
    source = "node Person {\n  name: String @key\n  email: String @uniq\n}\n"
    assert [str(w) for w in Catalog.from_source(source).warnings] == [
        "schema warning at 3:17: unknown annotation '@uniq' is kept as metadata and not enforced; did you mean '@unique'?"
    ]
    schema = tmp_path / "typo.pg"
    schema.write_text(source, encoding="utf-8")
    refused = run_cli(OMNIGRAPH, "init", "--strict", "--schema", schema, "--json", tmp_path / "strict")
    assert refused.returncode == 1 and refused.json()["error"]["code"] == "bad_request"
    assert refused.json()["error"]["details"]["warnings"] == [
        {"message": "unknown annotation '@uniq' is kept as metadata and not enforced; did you mean '@unique'?", "line": 3, "column": 17}
    ]
    assert not (tmp_path / "strict").exists()
    with omnigraph.init(tmp_path / "lenient", source) as graph:
        assert [w.line for w in graph.schema_warnings] == [3]
