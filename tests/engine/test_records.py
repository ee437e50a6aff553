"""JSONL records: parsing and validation (every refusal names its line), endpoint checks,
Arrow conversion, export format, and the load -> export -> load round trip."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.records.parse import EdgeRow, NodeRow, ParsedFile, arrow_to_records, check_endpoints, parse_jsonl, rows_to_arrow
from omnigraph.engine.schema.catalog import Catalog
from tests.support.catalogs import EVERY_TYPE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SOCIAL = Catalog.from_source((EXAMPLES / "social.pg").read_text())

ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}\Z")


def jsonl(*records: object) -> bytes:
    """One line per record; str records are taken verbatim."""
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records).encode() + b"\n"


def refused(data: bytes, catalog: Catalog = SOCIAL) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        parse_jsonl(data, catalog)
    return caught.value


def all_node(**data: object) -> dict[str, object]:
    return {"type": "All", "data": {"s": "k", **data}}


def test_example_file_parses() -> None:
    parsed = parse_jsonl((EXAMPLES / "social.jsonl").read_bytes(), SOCIAL)
    assert isinstance(parsed, ParsedFile)
    assert parsed.line_count == 41
    assert list(parsed.nodes) == ["Company", "Doc", "Membership", "Person", "Tag"]
    assert list(parsed.edges) == ["Knows", "WorksAt", "Wrote"]
    alice = parsed.nodes["Person"][0]
    assert alice == NodeRow(1, "Person", "Alice", {"name": "Alice", "age": 34, "email": "alice@example.com"})
    assert parsed.nodes["Membership"][0].id == '["1","acme"]'
    assert parsed.nodes["Tag"][0].id == "tag-graphs"
    first_knows = parsed.edges["Knows"][0]
    assert first_knows == EdgeRow(26, "Knows", "knows-alice-bob", "Alice", "Bob", {"since": dt.date(2019, 6, 1)})
    check_endpoints(parsed, SOCIAL, lambda type_name, ids: set())


def test_blank_lines_are_skipped_but_counted() -> None:
    data = b'\n{"type": "Company", "data": {"name": "Acme"}}\n   \n\r\n{"type": "Company", "data": {"name": "B"}}'
    parsed = parse_jsonl(data, SOCIAL)
    assert [row.line for row in parsed.nodes["Company"]] == [2, 5]
    assert parsed.line_count == 5
    assert parse_jsonl(b"", SOCIAL) == ParsedFile({}, {}, 0)


def test_data_defaults_to_empty_and_generated_ids() -> None:
    parsed = parse_jsonl(jsonl({"type": "Tag", "data": {"label": "x"}}, {"edge": "WorksAt", "from": "A", "to": "B"}), SOCIAL)
    tag = parsed.nodes["Tag"][0]
    edge = parsed.edges["WorksAt"][0]
    assert ULID.match(tag.id) and ULID.match(edge.id) and tag.id < edge.id
    assert (edge.src, edge.dst, edge.values) == ("A", "B", {})


def test_keyed_node_accepts_matching_explicit_id() -> None:
    data = jsonl({"type": "Membership", "data": {"id": '["7","acme"]', "tenant": "acme", "slot": 7}})
    assert parse_jsonl(data, SOCIAL).nodes["Membership"][0].id == '["7","acme"]'


def test_absent_and_null_nullable_properties_are_none() -> None:
    data = jsonl({"type": "Person", "data": {"name": "A", "age": None}})
    assert parse_jsonl(data, SOCIAL).nodes["Person"][0].values == {"name": "A", "age": None, "email": None}


def test_coercions() -> None:
    record = all_node(
        b=False,
        i32=-(2**31),
        u64=2**64 - 1,
        f32=0.1,
        f64=3,
        d="2024-01-01",
        t="2024-01-01T01:00:00.250+01:00",
        e="green",
        v=[1, 0.5, -2],
        ls=["a", None],
        ld=[19723, "1970-01-02"],
        lt=[0, "2024-01-01T00:00:00"],
    )
    values = parse_jsonl(jsonl(record), EVERY_TYPE).nodes["All"][0].values
    assert values["b"] is False
    assert values["f32"] == float(np.float32(0.1))
    assert values["f64"] == 3.0 and isinstance(values["f64"], float)
    assert values["d"] == dt.date(2024, 1, 1)
    assert values["t"] == dt.datetime(2024, 1, 1, 0, 0, 0, 250000)
    assert values["v"] == [1.0, 0.5, -2.0]
    assert values["ls"] == ["a", None]
    assert values["ld"] == [dt.date(2024, 1, 1), dt.date(1970, 1, 2)]
    assert values["lt"] == [dt.datetime(1970, 1, 1), dt.datetime(2024, 1, 1)]
    epoch = parse_jsonl(jsonl(all_node(d=19723, t=1704067200000)), EVERY_TYPE).nodes["All"][0].values
    assert (epoch["d"], epoch["t"]) == (dt.date(2024, 1, 1), dt.datetime(2024, 1, 1))


PERSON = '{"type": "Person", "data": {"name": "Ann"}}'
ERRORS = [
    ('{"type": "Person", "data": {"name": "A"}', "malformed JSON"),
    ('{"type": "Person", "data": {"name": NaN}}', "malformed JSON"),
    ('["Person"]', "must be a JSON object"),
    ('"text"', "must be a JSON object"),
    ('{"type": "Person", "type": "Company", "data": {}}', "duplicate JSON member 'type'"),
    ('{"type": "Person", "data": {"name": "A", "name": "B"}}', "duplicate JSON member 'name'"),
    ('{"type": "Person", "edge": "Knows", "data": {}}', "exactly one of 'type' and 'edge'"),
    ('{"data": {"name": "A"}}', "needs 'type'"),
    ('{"type": "Person", "data": {"name": "A"}, "from": "x"}', "unexpected top-level key 'from'"),
    ('{"edge": "Knows", "from": "A", "to": "B", "extra": 1}', "unexpected top-level key 'extra'"),
    ('{"type": 5, "data": {}}', "'type' must be a string"),
    ('{"type": "Nope", "data": {}}', "unknown node type 'Nope'"),
    ('{"type": "Knows", "data": {}}', "unknown node type 'Knows'"),
    ('{"edge": "Person", "from": "A", "to": "B"}', "unknown edge type 'Person'"),
    ('{"type": "Person", "data": [1]}', "'data' must be a JSON object"),
    ('{"type": "Person", "data": null}', "'data' must be a JSON object"),
    ('{"type": "Person", "data": {"name": "A", "nick": "a"}}', "unknown property 'nick'"),
    ('{"edge": "Knows", "from": "A", "to": "B", "data": {"src": "A"}}', "unknown property 'src'"),
    ('{"type": "Person", "data": {"age": 3}}', "property 'name' of Person: missing"),
    ('{"type": "Person", "data": {"name": null}}', "property 'name' of Person: must not be null"),
    ('{"type": "Person", "data": {"name": 5}}', "expected String"),
    ('{"type": "Person", "data": {"name": "A", "age": true}}', "expected I32"),
    ('{"type": "Person", "data": {"name": "A", "age": 30.0}}', "expected I32"),
    ('{"type": "Person", "data": {"name": "A", "age": 2147483648}}', "out of range for I32"),
    ('{"type": "Membership", "data": {"tenant": "t", "slot": -1}}', "out of range for U32"),
    ('{"type": "Doc", "data": {"slug": "s", "title": "t", "status": "gone"}}', "expected one of draft, published"),
    ('{"type": "Doc", "data": {"slug": "s", "title": "t", "status": "draft", "embedding": [1, 2, 3]}}', "Vector(4)"),
    ('{"type": "Doc", "data": {"slug": "s", "title": "t", "status": "draft", "embedding": [1, 2, 3, true]}}', "expected F32"),
    ('{"type": "Doc", "data": {"slug": "s", "title": "t", "status": "draft", "tags": "x"}}', "expected [String]"),
    ('{"type": "Doc", "data": {"slug": "s", "title": "t", "status": "draft", "tags": [1]}}', "expected String"),
    ('{"edge": "Knows", "from": "A", "to": "B", "data": {"since": "2024-13-01"}}', "not a valid date"),
    ('{"edge": "Knows", "from": "A", "to": "B", "data": {"since": "Jan 1"}}', "expected Date"),
    ('{"edge": "Knows", "from": "A", "to": "B", "data": {"since": 1.5}}', "expected Date"),
    ('{"type": "Person", "data": {"id": "Bob", "name": "Ann"}}', "does not match the id 'Ann'"),
    ('{"type": "Person", "data": {"id": 7, "name": "Ann"}}', "data.id must be a non-empty string"),
    ('{"type": "Tag", "data": {"id": "", "label": "x"}}', "data.id must be a non-empty string"),
    ('{"edge": "Knows", "from": "", "to": "B"}', "'from' must be a non-empty string"),
    ('{"edge": "Knows", "from": "A", "to": 5}', "'to' must be a non-empty string"),
    ('{"edge": "Knows", "from": "A"}', "'to' must be a non-empty string"),
]


@pytest.mark.parametrize(("line", "fragment"), ERRORS)
def test_each_refusal_names_its_line(line: str, fragment: str) -> None:
    error = refused(jsonl(PERSON, "", line))
    assert error.code == "bad_request"
    assert error.message.startswith("line 3: ")
    assert fragment in error.message
    assert error.details["line"] == 3


TYPE_ERRORS = [
    ('{"type": "All", "data": {"s": "k2", "f64": 1e400}}', "not a finite F64"),
    (all_node(f32=1e39), "not a finite F32"),
    (all_node(f64=10**400), "out of range for F64"),
    (all_node(u64=2**64), "out of range for U64"),
    (all_node(i64=-(2**63) - 1), "out of range for I64"),
    (all_node(b=0), "expected Bool"),
    (all_node(e=1), "expected one of red, green"),
    (all_node(t="2024-01-01T00:00:00.000001Z"), "sub-millisecond"),
    (all_node(t="yesterday"), "not a valid ISO-8601 DateTime"),
    (all_node(t=1.5), "expected DateTime"),
    (all_node(t=10**20), "out of range for DateTime"),
    (all_node(d=10**9), "out of range for Date"),
    ('{"type": "All", "data": {"s": "k2", "v": [1, 2, -1e999]}}', "not a finite F32"),
    (all_node(li=[1, "2"]), "expected I64"),
]


@pytest.mark.parametrize(("record", "fragment"), TYPE_ERRORS)
def test_wrong_typed_values_name_their_line(record: dict[str, object] | str, fragment: str) -> None:
    error = refused(jsonl(all_node(s="first"), record), EVERY_TYPE)
    assert error.message.startswith("line 2: ") and fragment in error.message
    assert error.details["type_name"] == "All" and error.details["property"] in str(record)


def test_invalid_utf8_names_its_line() -> None:
    error = refused(jsonl(PERSON) + b'{"type": "Tag", "data": {"label": "\xff"}}\n')
    assert error.details["line"] == 2 and "invalid UTF-8" in error.message


def test_duplicate_key_in_file_names_both_lines() -> None:
    error = refused(jsonl(PERSON, {"type": "Company", "data": {"name": "Ann"}}, PERSON))
    assert error.message.startswith("line 3: duplicate @key value 'Ann' for Person (first at line 1)")
    assert error.details == {"line": 3, "first_line": 1, "type_name": "Person", "id": "Ann"}


def test_duplicate_composite_key_names_both_lines() -> None:
    member = {"type": "Membership", "data": {"tenant": "acme", "slot": 1}}
    error = refused(jsonl(member, {"type": "Membership", "data": {"tenant": "acme", "slot": 1, "label": "x"}}))
    assert error.details["first_line"] == 1 and error.details["line"] == 2


def test_duplicate_explicit_id_names_both_lines() -> None:
    error = refused(
        jsonl(
            {"type": "Tag", "data": {"id": "t1", "label": "a"}},
            {"edge": "WorksAt", "from": "a", "to": "b", "data": {"id": "t1"}},
            {"type": "Tag", "data": {"id": "t1", "label": "b"}},
        )
    )
    assert error.message.startswith("line 3: duplicate id 't1' for Tag (first at line 1)")
    edge_error = refused(
        jsonl(
            {"edge": "WorksAt", "from": "a", "to": "b", "data": {"id": "w"}},
            {"edge": "WorksAt", "from": "c", "to": "d", "data": {"id": "w"}},
        )
    )
    assert edge_error.details["first_line"] == 1 and edge_error.details["line"] == 2


def test_duplicate_unique_value_names_both_lines_and_nulls_are_exempt() -> None:
    ok = jsonl({"type": "Person", "data": {"name": "A"}}, {"type": "Person", "data": {"name": "B", "email": None}})
    assert len(parse_jsonl(ok, SOCIAL).nodes["Person"]) == 2
    error = refused(
        jsonl(
            {"type": "Person", "data": {"name": "A", "email": "x@y"}},
            "",
            {"type": "Person", "data": {"name": "B", "email": "x@y"}},
        )
    )
    assert error.message.startswith("line 3: duplicate @unique value 'x@y' for Person.email (first at line 1)")
    assert error.details == {"line": 3, "first_line": 1, "type_name": "Person", "property": "email", "value": "x@y", "id": "B"}


def test_duplicate_unique_value_on_edges() -> None:
    other = {"type": "Other", "data": {"n": 1}}
    link = {"edge": "Link", "from": "k", "to": "1", "data": {"code": "c"}}
    error = refused(jsonl(all_node(), other, link, link), EVERY_TYPE)
    assert error.details["line"] == 4 and error.details["first_line"] == 3


def test_check_endpoints_uses_file_then_committed_state() -> None:
    data = jsonl(
        {"edge": "Knows", "from": "Ann", "to": "Zed", "data": {"id": "k1"}},
        {"edge": "Wrote", "from": "Old", "to": "doc", "data": {"id": "w1"}},
        {"edge": "Knows", "from": "Old", "to": "Ann", "data": {"id": "k2"}},
        PERSON,
    )
    parsed = parse_jsonl(data, SOCIAL)
    calls: list[tuple[str, list[str]]] = []

    def committed(type_name: str, ids: list[str]) -> set[str]:
        calls.append((type_name, ids))
        return {"Doc": {"doc"}, "Person": {"Old", "Zed", "Unasked"}}[type_name]

    check_endpoints(parsed, SOCIAL, committed)
    assert calls == [("Doc", ["doc"]), ("Person", ["Old", "Zed"])]


def test_missing_endpoint_names_the_first_line() -> None:
    data = jsonl(
        PERSON,
        {"edge": "WorksAt", "from": "Ann", "to": "Nowhere", "data": {"id": "w1"}},
        {"edge": "Knows", "from": "Ghost", "to": "Ann", "data": {"id": "k1"}},
        {"type": "Company", "data": {"name": "Ann2"}},
    )
    with pytest.raises(BadRequest) as caught:
        check_endpoints(parse_jsonl(data, SOCIAL), SOCIAL, lambda type_name, ids: set())
    error = caught.value
    assert error.message.startswith("line 2: missing endpoint: WorksAt to 'Nowhere' is not a Company node")
    assert error.details == {
        "line": 2,
        "edge": "WorksAt",
        "end": "to",
        "type_name": "Company",
        "node_id": "Nowhere",
        "missing_count": 2,
    }


def test_endpoint_of_the_wrong_node_type_is_missing() -> None:
    data = jsonl({"type": "Company", "data": {"name": "Acme"}}, {"edge": "Knows", "from": "Acme", "to": "Acme"})
    with pytest.raises(BadRequest, match="line 2: missing endpoint: Knows from 'Acme' is not a Person"):
        check_endpoints(parse_jsonl(data, SOCIAL), SOCIAL, lambda type_name, ids: set())


def test_rows_to_arrow_schema_and_order() -> None:
    parsed = parse_jsonl((EXAMPLES / "social.jsonl").read_bytes(), SOCIAL)
    for with_pk in (True, False):
        doc = SOCIAL.node("Doc")
        table = rows_to_arrow(doc, parsed.nodes["Doc"], with_pk)
        assert table.schema == doc.arrow_schema(with_pk)
        assert table.schema.field("id").metadata == doc.arrow_schema(with_pk).field("id").metadata
        assert table.column("id").to_pylist() == [row.id for row in parsed.nodes["Doc"]]
        assert table.column("embedding").to_pylist()[0] == [float(np.float32(x)) for x in (0.1, 0.2, 0.3, 0.4)]
    knows = rows_to_arrow(SOCIAL.edge("Knows"), parsed.edges["Knows"], True)
    assert knows.column_names == ["id", "src", "dst", "since"]
    assert knows.column("src").to_pylist()[:2] == ["Alice", "Bob"]
    empty = rows_to_arrow(SOCIAL.node("Tag"), [], True)
    assert empty.num_rows == 0 and empty.schema == SOCIAL.node("Tag").arrow_schema(True)


def test_export_format() -> None:
    data = jsonl(
        {"type": "Doc", "data": {"title": "T", "slug": "s", "status": "draft", "embedding": [0.1, 1, 2, 3]}},
        {"edge": "Knows", "from": "Ann", "to": "Bob", "data": {"since": "2024-01-01", "id": "k"}},
        {"type": "All", "data": {"s": "é", "t": "2024-01-01T00:00:00.5Z", "f64": 0.1, "lf": [0.1, None]}},
    )
    merged = Catalog.from_source(SOCIAL.source + EVERY_TYPE.source)
    parsed = parse_jsonl(data, merged)
    doc = arrow_to_records(merged.node("Doc"), rows_to_arrow(merged.node("Doc"), parsed.nodes["Doc"], True))
    assert doc == ['{"type": "Doc", "data": {"id": "s", "slug": "s", "title": "T", "embedding": [0.1, 1.0, 2.0, 3.0], "status": "draft"}}']
    knows = arrow_to_records(merged.edge("Knows"), rows_to_arrow(merged.edge("Knows"), parsed.edges["Knows"], True))
    assert knows == ['{"edge": "Knows", "from": "Ann", "to": "Bob", "data": {"id": "k", "since": "2024-01-01"}}']
    every = arrow_to_records(merged.node("All"), rows_to_arrow(merged.node("All"), parsed.nodes["All"], False))
    assert every == ['{"type": "All", "data": {"id": "é", "s": "é", "f64": 0.1, "t": "2024-01-01T00:00:00.500Z", "lf": [0.1, null]}}']


def test_export_reads_columns_by_name() -> None:
    parsed = parse_jsonl(jsonl({"type": "Person", "data": {"name": "A", "age": 3}}), SOCIAL)
    table = rows_to_arrow(SOCIAL.node("Person"), parsed.nodes["Person"], True)
    shuffled = table.select(["age", "email", "name", "id"]).append_column("extra", pa.array([1]))
    assert arrow_to_records(SOCIAL.node("Person"), shuffled) == ['{"type": "Person", "data": {"id": "A", "name": "A", "age": 3}}']


def export_file(catalog: Catalog, parsed: ParsedFile) -> bytes:
    lines: list[str] = []
    for type_name, node_rows in parsed.nodes.items():
        table = catalog.node(type_name)
        lines += arrow_to_records(table, rows_to_arrow(table, node_rows, True))
    for type_name, edge_rows in parsed.edges.items():
        table = catalog.edge(type_name)
        lines += arrow_to_records(table, rows_to_arrow(table, edge_rows, True))
    return "".join(line + "\n" for line in lines).encode()


def test_example_round_trips() -> None:
    parsed = parse_jsonl((EXAMPLES / "social.jsonl").read_bytes(), SOCIAL)
    exported = export_file(SOCIAL, parsed)
    again = parse_jsonl(exported, SOCIAL)
    assert export_file(SOCIAL, again) == exported
    rows = lambda p: sorted((r.type_name, r.id, repr(r.values)) for rs in p.nodes.values() for r in rs)  # noqa: E731
    assert rows(again) == rows(parsed)


def _opt(strategy: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.none() | strategy


def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


DATES = st.dates()
DATETIMES = st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)).map(
    lambda value: value.replace(microsecond=value.microsecond // 1000 * 1000)
)
DATE_JSON = DATES.map(lambda d: d.isoformat()) | DATES.map(lambda d: (d - dt.date(1970, 1, 1)).days)
DATETIME_JSON = DATETIMES.map(lambda t: t.isoformat() + "Z") | DATETIMES.map(
    lambda t: (t - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)
)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
FINITE32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
ALL_VALUES = st.fixed_dictionaries(
    {"s": st.text(min_size=1)},
    optional={
        "b": _opt(st.booleans()),
        "i32": _opt(_ints(-(2**31), 2**31 - 1)),
        "i64": _opt(_ints(-(2**63), 2**63 - 1)),
        "u32": _opt(_ints(0, 2**32 - 1)),
        "u64": _opt(_ints(0, 2**64 - 1)),
        "f32": _opt(FINITE32 | st.floats(-1e30, 1e30)),
        "f64": _opt(FINITE | _ints(-(2**53), 2**53)),
        "d": _opt(DATE_JSON),
        "t": _opt(DATETIME_JSON),
        "e": _opt(st.sampled_from(["red", "green"])),
        "v": _opt(st.lists(FINITE32, min_size=3, max_size=3)),
        "ls": _opt(st.lists(_opt(st.text()), max_size=3)),
        "lb": _opt(st.lists(_opt(st.booleans()), max_size=3)),
        "li": _opt(st.lists(_ints(-(2**63), 2**63 - 1), max_size=3)),
        "lf": _opt(st.lists(_opt(FINITE32), max_size=3)),
        "ld": _opt(st.lists(DATE_JSON, max_size=3)),
        "lt": _opt(st.lists(_opt(DATETIME_JSON), max_size=3)),
    },
)
LINKS = st.fixed_dictionaries(
    {},
    optional={"weight": _opt(FINITE), "day": _opt(DATE_JSON), "code": _opt(st.text())},
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ALL_VALUES, min_size=1, max_size=4, unique_by=lambda d: d["s"]), st.lists(LINKS, max_size=3))
def test_round_trip_every_type(nodes: list[dict[str, object]], links: list[dict[str, object]]) -> None:
    records: list[object] = [{"type": "All", "data": data} for data in nodes]
    records.append({"type": "Other", "data": {"n": 1}})
    codes: set[object] = set()
    for index, data in enumerate(links):
        if data.get("code") is not None and data["code"] in codes:
            continue
        codes.add(data.get("code"))
        records.append({"edge": "Link", "from": nodes[0]["s"], "to": "1", "data": {"id": f"l{index}", **data}})
    data = "\n".join(json.dumps(r, ensure_ascii=False) for r in records).encode()
    parsed = parse_jsonl(data, EVERY_TYPE)
    check_endpoints(parsed, EVERY_TYPE, lambda type_name, ids: set())
    exported = export_file(EVERY_TYPE, parsed)
    again = parse_jsonl(exported, EVERY_TYPE)
    # The input is already in export order (node types by name, then edges), so even the
    # line numbers survive the round trip.
    assert again == parsed
    assert export_file(EVERY_TYPE, again) == exported
