"""The .pg schema language: accepted shapes, the physical Arrow schemas, and every refusal
with its exact 1-based line:column."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.parser import SchemaError
from omnigraph.engine.schema.types import EnumType, ListType, ScalarType, VectorType
from omnigraph.engine.storage.names import PK_METADATA_KEY

REFERENCE = """\
// line comments and /* block */ comments
node Person  { name: String @key   age: I32?   email: String? @unique }
node Company { name: String @key }
node Doc     { slug: String @key   title: String @index   embedding: Vector(4)?
               status: enum(draft, published) }
node Membership { tenant: String  slot: U32  label: String?  @key(tenant, slot) }
edge Knows:   Person -> Person { since: Date? }
edge WorksAt: Person -> Company
"""

ALL_TYPES = """\
node All {
    s: String, b: Bool, i32: I32, i64: I64, u32: U32, u64: U64, f32: F32, f64: F64,
    d: Date, t: DateTime, ls: [String]?, lf: [F32]?, e: enum(x, y)?, v: Vector(3)?
}
"""

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_reference_schema_tables() -> None:
    catalog = Catalog.from_source(REFERENCE)
    assert catalog.source == REFERENCE
    assert catalog.table_keys() == [
        "edge:Knows",
        "edge:WorksAt",
        "node:Company",
        "node:Doc",
        "node:Membership",
        "node:Person",
    ]
    person = catalog.node("Person")
    assert (person.kind, person.type_name, person.table_key) == ("node", "Person", "node:Person")
    assert [p.name for p in person.properties] == ["name", "age", "email"]
    assert person.key == ("name",)
    assert person.unique == ("email",)
    assert person.from_type is None and person.to_type is None
    email = person.property("email")
    assert (email.type, email.nullable, email.unique, email.index) == (ScalarType("String"), True, True, False)
    assert catalog.node("Doc").property("title").index
    assert catalog.node("Doc").property("embedding").type == VectorType(4)
    assert catalog.node("Doc").property("status").type == EnumType(("draft", "published"))
    assert catalog.node("Membership").key == ("tenant", "slot")
    knows = catalog.edge("Knows")
    assert (knows.kind, knows.from_type, knows.to_type, knows.key) == ("edge", "Person", "Person", None)
    works_at = catalog.table("edge:WorksAt")
    assert works_at.properties == () and works_at.to_type == "Company"
    assert catalog.has_node("Person") and not catalog.has_node("Knows")
    assert catalog.has_edge("Knows") and not catalog.has_edge("Person")


def test_lookups_refuse_unknown_names() -> None:
    catalog = Catalog.from_source(REFERENCE)
    with pytest.raises(BadRequest, match="unknown node type Knows"):
        catalog.node("Knows")
    with pytest.raises(BadRequest, match="unknown edge type Person"):
        catalog.edge("Person")
    with pytest.raises(BadRequest, match="unknown table"):
        catalog.table("node:Nope")
    with pytest.raises(BadRequest, match="no property 'nope'"):
        catalog.node("Person").property("nope")


def test_arrow_schema_node_with_and_without_pk() -> None:
    table = Catalog.from_source(ALL_TYPES).node("All")
    expected_types = [
        ("id", pa.utf8(), False),
        ("s", pa.utf8(), False),
        ("b", pa.bool_(), False),
        ("i32", pa.int32(), False),
        ("i64", pa.int64(), False),
        ("u32", pa.uint32(), False),
        ("u64", pa.uint64(), False),
        ("f32", pa.float32(), False),
        ("f64", pa.float64(), False),
        ("d", pa.date32(), False),
        ("t", pa.timestamp("ms"), False),
        ("ls", pa.list_(pa.utf8()), True),
        ("lf", pa.list_(pa.float32()), True),
        ("e", pa.utf8(), True),
        ("v", pa.list_(pa.float32(), 3), True),
    ]
    for with_pk in (True, False):
        schema = table.arrow_schema(with_pk)
        assert [(f.name, f.type, f.nullable) for f in schema] == expected_types
        assert not schema.metadata
        for field in schema:
            if field.name == "id" and with_pk:
                assert field.metadata == {PK_METADATA_KEY.encode(): b"true"}
            else:
                assert not field.metadata
        assert schema.field("ls").type.value_field.nullable


def test_arrow_schema_edge_columns() -> None:
    schema = Catalog.from_source(REFERENCE).edge("Knows").arrow_schema(True)
    assert schema.names == ["id", "src", "dst", "since"]
    assert [schema.field(n).nullable for n in schema.names] == [False, False, False, True]
    assert schema.field("src").type == pa.utf8() and not schema.field("src").metadata
    assert schema.field("id").metadata == {b"lance-schema:unenforced-primary-key": b"true"}


def test_commas_optional_and_trailing_allowed() -> None:
    spaced = Catalog.from_source("node A { x: String @key\n y: I32? }")
    commas = Catalog.from_source("node A { x: String @key, y: I32?, }")
    assert spaced == commas
    assert [p.name for p in commas.node("A").properties] == ["x", "y"]


def test_edge_declared_before_its_node_types() -> None:
    catalog = Catalog.from_source("edge E: A -> A { w: F64 @unique @index }\nnode A {}")
    edge = catalog.edge("E")
    assert edge.unique == ("w",) and edge.property("w").index


def test_type_spellings() -> None:
    table = Catalog.from_source(ALL_TYPES).node("All")
    assert [str(p.type) for p in table.properties][-4:] == ["[String]", "[F32]", "enum(x, y)", "Vector(3)"]
    assert table.property("ls").type == ListType(ScalarType("String"))


def test_comments_are_ignored_and_counted_for_lines() -> None:
    source = "/* a\nmulti-line\ncomment */ node A { // trailing\n x: String /* inline */ @key }\n// end"
    assert Catalog.from_source(source).node("A").key == ("x",)
    with pytest.raises(SchemaError) as error:
        Catalog.from_source("/* a\nb */ node A {\n // c\n  x: Strin }")
    assert error.value.details == {"line": 4, "column": 6}


def test_equality_and_fingerprint_ignore_comments_whitespace_and_order() -> None:
    a = Catalog.from_source(REFERENCE)
    lines = REFERENCE.splitlines()
    reordered = "\n".join([*reversed(lines[5:]), *lines[1:5]])
    b = Catalog.from_source("/* other */\n" + reordered.replace("  ", " "))
    assert b.source != a.source
    assert a == b and a.fingerprint() == b.fingerprint() and hash(a) == hash(b)
    assert a == Catalog.from_source(REFERENCE)
    changed = Catalog.from_source(REFERENCE.replace("age: I32?", "age: I64?"))
    assert changed != a and changed.fingerprint() != a.fingerprint()
    assert len(a.fingerprint()) == 64


def test_example_schema_parses() -> None:
    catalog = Catalog.from_source((EXAMPLES / "social.pg").read_text())
    assert catalog.table_keys() == [
        "edge:Knows",
        "edge:WorksAt",
        "edge:Wrote",
        "node:Company",
        "node:Doc",
        "node:Membership",
        "node:Person",
        "node:Tag",
    ]
    assert catalog.node("Tag").key is None
    assert catalog.node("Doc").property("tags").type == ListType(ScalarType("String"))


def test_empty_schema_is_accepted() -> None:
    assert Catalog.from_source("// nothing yet\n").table_keys() == []


ERRORS = [
    ("node A { x: String $ }", 1, 20, "unexpected character '$'"),
    ("node A { x: String }\n/* never closed\n", 2, 1, "unterminated block comment"),
    ("node A {\n  x String\n}", 2, 5, "expected ':', found 'String'"),
    ("node A {\n  x: Int\n}", 2, 6, "unknown type 'Int'"),
    ("node A { xs: [[String]] }", 1, 15, "list items must be scalar types"),
    ("node A { xs: [enum(a)] }", 1, 15, "list items must be scalar types"),
    ("node A { v: Vector(0) }", 1, 20, "vector dimension"),
    ("node A { e: enum() }", 1, 18, "expected an enum value"),
    ("node A { e: enum(a, b, a) }", 1, 24, "duplicate enum value 'a'"),
    ("node A { x: String @description }", 1, 20, "@description takes one argument, a string"),
    ("node A { @unique x: String }", 1, 10, "@unique takes property names"),
    ("node person { x: String }", 1, 6, "type name 'person'"),
    ("node A { Name: String }", 1, 10, "property name 'Name'"),
    ("node A { id: String }", 1, 10, "'id' is reserved"),
    ("edge E: A -> A { src: String }\nnode A {}", 1, 18, "'src' is reserved"),
    ("node A {}\nedge E: A -> A { dst: String }", 2, 18, "'dst' is reserved"),
    ("node A { _hidden: String }", 1, 10, "'_hidden' is reserved"),
    ("node A {}\nedge A: A -> A", 2, 6, "duplicate type name 'A' (first declared at 1:6)"),
    ("node A {\n  x: String\n  x: I32\n}", 3, 3, "duplicate property 'x'"),
    ("node A { x: String @index @index }", 1, 27, "duplicate annotation '@index'"),
    ("node A {}\nedge E: A -> B", 2, 14, "unknown node type 'B'"),
    ("node A {}\nedge E: A -> F\nedge F: A -> A", 2, 14, "unknown node type 'F'"),
    ("node A {}\nedge E: A -> A { w: I32 @key }", 2, 25, "@key is only allowed on node types"),
    ("node A {}\nedge E: A -> A { w: I32  @key(w) }", 2, 26, "@key is only allowed on node types"),
    ("node A { x: String @key\n  y: String @key }", 2, 13, "already has a @key (at 1:20)"),
    ("node A { x: String @key  y: String  @key(x, y) }", 1, 37, "already has a @key"),
    ("node A { x: String  @key(x)  @key(x) }", 1, 30, "already has a @key"),
    ("node A { x: String  @key(x, z) }", 1, 29, "unknown property 'z'"),
    ("node A { x: String  @key(x, x) }", 1, 29, "property 'x' twice"),
    ("node A { x: String?  @key(x) }", 1, 27, "must not be nullable"),
    ("node A { x: String? @key }", 1, 21, "must not be nullable"),
    ("node A { x: [String]  @key(x) }", 1, 28, "must not be a [String]"),
    ("node A { x: Vector(2) @key }", 1, 23, "must not be a Vector(2)"),
    ("node A { x: [String] @unique }", 1, 22, "@unique is not allowed on a [String]"),
    ("node A { x: Vector(3)? @unique }", 1, 24, "@unique is not allowed on a Vector(3)"),
    ("nodes A {}", 1, 1, "expected 'node', 'edge' or 'interface'"),
    ("node A {", 1, 9, "found end of input"),
    ("edge E A -> A", 1, 8, "expected ':'"),
    ("node A { x: String @ key }", 1, 20, "unexpected character '@'"),
]


@pytest.mark.parametrize(("source", "line", "column", "fragment"), ERRORS)
def test_refusals_carry_line_and_column(source: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(SchemaError) as caught:
        Catalog.from_source(source)
    error = caught.value
    assert isinstance(error, BadRequest) and error.code == "bad_request"
    assert error.details == {"line": line, "column": column}
    assert f"{line}:{column}" in error.message
    assert fragment in error.message
