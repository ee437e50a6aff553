"""The columnar JSONL path agrees with the row path, and a large input streams.

Three readers of the same bytes are compared on random documents (valid, invalid and in between):

- the row path, :func:`omnigraph.engine.records.parse.parse_jsonl` (the reference);
- the fast path alone, :func:`omnigraph.engine.records.read.read_records` with ``fallback=False`` (it must
  decline every document the row path refuses, and reproduce every one it accepts);
- the combined reader, ``read_records`` as the load uses it (its result or error must be the
  row path's, exactly), with small blocks so that one document mixes fast and row blocks.

Generated ids are fresh ULIDs on every parse, so they are compared by position (which rows got
one), not by value. The streaming tests bound what a read holds in memory: the block size of
a file read, and the spool's resident rows.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.ops.load import load
from omnigraph.engine.records.columnar import Declined
from omnigraph.engine.records.jsonl_blocks import iter_blocks
from omnigraph.engine.records.parse import parse_jsonl
from omnigraph.engine.records.read import read_records, records_of
from omnigraph.engine.records.record_set import RecordSet
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.ids import new_ulid, new_ulids
from tests.support.catalogs import EVERY_TYPE
from tests.support.graph_helpers import export_text, init

CATALOG = Catalog.from_source(
    EVERY_TYPE.source  # node All (every property type), node Other, edge Link: All -> Other
    + """
    node Pair { tenant: String  slot: U32  note: String?  @key(tenant, slot) }
    node Num { n: I64 @key  label: String? @unique }
    node When { d: Date @key  at: DateTime? }
    node Flag { f: Bool @key }
    node Real { x: F64 @key }
    node Tag { label: String  code: String? @unique  score: F32? @unique }
    edge Near: Tag -> Tag
    """
)
ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}\Z")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- value strategies ---------------------------------------------------------------------------

EPOCH_DATE = dt.date(1970, 1, 1)
PLAIN_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=8)
KEY_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters='"\\'), max_size=6)
ANY_TEXT = st.text(max_size=8)
DAYS = st.integers((dt.date.min - EPOCH_DATE).days, (dt.date.max - EPOCH_DATE).days)
MILLIS = st.integers(-62135596800000, 253402300799999)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
FINITE32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


def _opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


def _all_values(text: st.SearchStrategy[str], dates: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"s": text},
        optional={
            "b": _opt(st.booleans()),
            "i32": _opt(st.integers(-(2**31), 2**31 - 1)),
            "i64": _opt(st.integers(-(2**63), 2**63 - 1)),
            "u32": _opt(st.integers(0, 2**32 - 1)),
            "u64": _opt(st.integers(0, 2**64 - 1)),
            "f32": _opt(FINITE32 | st.floats(-1e30, 1e30) | st.integers(-(2**40), 2**40)),
            "f64": _opt(FINITE | st.integers(-(2**70), 2**70)),
            "d": _opt(dates),
            "t": _opt(MILLIS),
            "e": _opt(st.sampled_from(["red", "green"])),
            "v": _opt(st.lists(FINITE32, min_size=3, max_size=3)),
            "ls": _opt(st.lists(_opt(text), max_size=3)),
            "lb": _opt(st.lists(_opt(st.booleans()), max_size=3)),
            "li": _opt(st.lists(_opt(st.integers(-(2**63), 2**63 - 1)), max_size=3)),
            "lf": _opt(st.lists(_opt(FINITE32), max_size=3)),
            "ld": _opt(st.lists(_opt(DAYS), max_size=3)),
            "lt": _opt(st.lists(_opt(MILLIS), max_size=3)),
        },
    )


def _records(
    text: st.SearchStrategy[str], key_text: st.SearchStrategy[str], dates: st.SearchStrategy[Any]
) -> st.SearchStrategy[dict[str, Any]]:
    """One valid record of a random type (ids may still repeat across records)."""
    ids = st.sampled_from(["x-1", "x-2", "x-3", "y"])
    return st.one_of(
        _all_values(text, dates).map(lambda data: {"type": "All", "data": data}),
        st.fixed_dictionaries({"tenant": key_text, "slot": st.integers(0, 3)}, optional={"note": _opt(text)}).map(
            lambda data: {"type": "Pair", "data": data}
        ),
        st.fixed_dictionaries({"n": st.integers(-3, 3)}, optional={"label": _opt(st.sampled_from(["a", "b", "c"]))}).map(
            lambda data: {"type": "Num", "data": data}
        ),
        st.fixed_dictionaries({"d": dates}, optional={"at": _opt(MILLIS)}).map(lambda data: {"type": "When", "data": data}),
        st.booleans().map(lambda f: {"type": "Flag", "data": {"f": f}}),
        st.fixed_dictionaries(
            {"label": text},
            optional={"id": ids, "code": _opt(st.sampled_from(["p", "q"])), "score": _opt(st.sampled_from([0.5, -0.0, 0.0, 1]))},
        ).map(lambda data: {"type": "Tag", "data": data}),
        st.fixed_dictionaries(
            {"from": key_text.filter(bool), "to": st.sampled_from(["1", "2", "-3"])},
            optional={
                "data": st.fixed_dictionaries(
                    {},
                    optional={
                        "id": ids,
                        "weight": _opt(FINITE),
                        "day": _opt(dates),
                        "code": _opt(st.sampled_from(["c", "d"])),
                    },
                )
            },
        ).map(lambda record: {"edge": "Link", **record}),
        st.fixed_dictionaries({"from": ids, "to": ids}).map(lambda record: {"edge": "Near", **record}),
    )


def _document(lines: list[str], crlf: bool, bom: bool, final_newline: bool) -> bytes:
    ending = "\r\n" if crlf else "\n"
    text = ending.join(lines) + (ending if final_newline and lines else "")
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass")


def _dump(record: dict[str, Any], ensure_ascii: bool, compact: bool) -> str:
    return json.dumps(record, ensure_ascii=ensure_ascii, separators=(",", ":") if compact else None)


# Line-level damage: each turns a valid line into something the row path may refuse.
DAMAGE: list[Callable[[str], str]] = [
    lambda line: line[:-1],  # truncated
    lambda line: line + " " + line,  # two objects on one line
    lambda line: line.replace('"data"', '"data":null,"x"', 1),
    lambda line: line.replace('{"', '{"type":null,"', 1),
    lambda line: line.replace('{"', '{"data":null,"', 1),
    lambda line: line.replace('{"', '{"edge":"Link","', 1),
    lambda line: line.replace('{"', '{"extra":1,"', 1),
    lambda line: line.replace('"s"', '"zz"', 1),
    lambda line: line.replace('"type"', '"typ\\u0065"', 1),
    lambda line: line.replace("1", "1.0", 1),
    lambda line: line.replace("1", "NaN", 1),
    lambda line: line.replace("1", "1e999", 1),
    lambda line: line.replace("1", '"1"', 1),
    lambda line: line.replace("true", "1", 1),
    lambda line: line.replace('"red"', '"blue"', 1),
    lambda line: line.replace("[", "[null,", 1),
    lambda line: line.replace('"from"', '"from":"","f"', 1),
    lambda line: line.replace('{"', '{"data":{"id":""},"', 1),
    lambda line: line.replace('{"', '{"data":{"id":null},"', 1),
    lambda line: "  " + line,
    lambda line: line + "\x00",
    lambda line: "\ud800",
    lambda line: "",
    lambda line: "[1]",
    lambda line: '{"type":"Real","data":{"x":1.5}}',
    lambda line: '{"type":"When","data":{"d":"2024-02-29"}}',
    lambda line: '{"type":"When","data":{"d":"2023-02-29"}}',
    lambda line: '{"type":"When","data":{"d":"0000-03-01"}}',
    lambda line: '{"type":"When","data":{"d":"2024-01-01","at":"2024-01-01T00:00:00Z"}}',
    lambda line: '{"type":"Pair","data":{"tenant":"a\\"b","slot":1}}',
    lambda line: '{"type":"All","data":{"s":"k","d":' + str(10**7) + "}}",
    lambda line: '{"type":"All","data":{"s":"k","u64":18446744073709551616}}',
    lambda line: '{"type":"All","data":{"s":"k","v":[1,2]}}',
    lambda line: '{"type":"All","data":{"s":"k","f32":1e39}}',
    lambda line: '{"type":"Num","data":{"n":1,"id":"2"}}',
    lambda line: '{"edge":"Link","from":"k","to":"1","data":{"id":"x-1","code":"c"}}',
    # JSON null where Arrow sees absence: refused by the row path, indistinguishable in a column
    lambda line: re.sub(r'"data": ?\{[^{}]*\}', '"data":null', line),
    lambda line: '{"edge":"Near","from":"a","to":"b","data":null}',
    lambda line: '{"type":"Tag","data":{"label":"x","id":null}}',
    lambda line: '{"type":"Num","data":{"id":null,"n":5}}',
    # two distinct records on one line: as many records as lines only if another line is lost
    lambda line: '{"type":"Num","data":{"n":98}} {"type":"Num","data":{"n":99}}',
]


@st.composite
def documents(draw: st.DrawFn, damaged: bool) -> bytes:
    dates = DAYS | DAYS.map(lambda days: (EPOCH_DATE + dt.timedelta(days=days)).isoformat())
    records = draw(st.lists(_records(ANY_TEXT, ANY_TEXT, dates), max_size=10))
    lines = [_dump(r, draw(st.booleans()), draw(st.booleans())) for r in records]
    if damaged and lines:
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(lines) - 1))
            lines[at] = draw(st.sampled_from(DAMAGE))(lines[at])
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), "")
    return _document(lines, draw(st.booleans()), draw(st.booleans()), draw(st.booleans()))


@st.composite
def plain_documents(draw: st.DrawFn) -> bytes:
    """Valid documents the fast path must take: epoch-day dates, no control characters, no
    float keys, one record per line (a record that would repeat an id or a ``@unique`` value
    of the records before it is left out)."""
    lines: list[str] = []
    for record in draw(st.lists(_records(PLAIN_TEXT, KEY_TEXT, DAYS), max_size=12)):
        line = _dump(record, draw(st.booleans()), draw(st.booleans()))
        try:
            parse_jsonl("\n".join([*lines, line]).encode(), CATALOG)
        except BadRequest:
            continue
        lines.append(line)
    return _document(lines, draw(st.booleans()), draw(st.booleans()), draw(st.booleans()))


# -- comparing results --------------------------------------------------------------------------


def snapshot(records: RecordSet, spans: int = 3) -> dict[str, Any]:
    """Everything a load uses from a read: rows (generated ids masked), lines, chunk sizes."""
    result: dict[str, Any] = {"line_count": records.line_count, "tables": {}}
    for key in records.table_keys():
        count = records.num_rows(key)
        rows = records.rows(key, 0, count)
        ids = ["<generated>" if ULID.match(i) else i for i in rows.column("id").to_pylist()]
        chunk_bytes = [records.rows(key, low, min(count, low + spans)).nbytes for low in range(0, count, spans)]
        result["tables"][key] = {
            "ids": ids,
            "rows": rows.drop_columns(["id"]).to_pylist(),
            "schema": rows.schema,
            "lines": records.column(key, "line").to_pylist(),
            "chunk_bytes": chunk_bytes,
        }
    return result


def by_rows(data: bytes) -> tuple[str, Any]:
    """The reference: the row parser, then its rows as Arrow (as the load did before)."""
    try:
        records = records_of(parse_jsonl(data, CATALOG), CATALOG, True)
    except BadRequest as error:
        return "refused", (error.message, error.details)
    except Exception as error:
        return "failed", (type(error).__name__, str(error))
    with records:
        return "read", snapshot(records)


def by_reader(data: bytes, block_bytes: int, fallback: bool, source: str = "bytes") -> tuple[str, Any]:
    stream = data if source == "bytes" else io.BytesIO(data)
    try:
        records = read_records(stream, CATALOG, True, block_bytes=block_bytes, fallback=fallback)
    except BadRequest as error:
        return "refused", (error.message, error.details)
    except Declined as declined:
        return "declined", str(declined)
    except Exception as error:
        return "failed", (type(error).__name__, str(error))
    with records:
        return "read", snapshot(records)


_GENERATED_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def _generated_ids_masked(value: Any) -> Any:
    """``value`` with every ``id`` the reader generated (a ULID: each read makes its own) as ``<generated>``."""
    if isinstance(value, dict):
        return {
            key: "<generated>" if key == "id" and isinstance(item, str) and _GENERATED_ID.fullmatch(item) else _generated_ids_masked(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return type(value)(_generated_ids_masked(item) for item in value)
    return value


def assert_same(actual: tuple[str, Any], expected: tuple[str, Any]) -> None:
    assert actual[0] == expected[0], (actual, expected)
    if actual[0] in ("refused", "failed"):
        assert _generated_ids_masked(actual[1]) == _generated_ids_masked(expected[1])
        return
    got, want = actual[1], expected[1]
    assert got["line_count"] == want["line_count"]
    assert list(got["tables"]) == list(want["tables"])
    for key, table in want["tables"].items():
        for part in ("ids", "lines", "schema", "rows", "chunk_bytes"):
            assert got["tables"][key][part] == table[part], (key, part)


# -- the properties -----------------------------------------------------------------------------


@SETTINGS
@given(data=documents(damaged=True), block_bytes=st.sampled_from([1, 40, 200, 1 << 20]), source=st.sampled_from(["bytes", "file"]))
def test_the_combined_reader_is_the_row_path(data: bytes, block_bytes: int, source: str) -> None:
    """Same rows and lines, or the same error (message and details), at any block size."""
    assert_same(by_reader(data, block_bytes, fallback=True, source=source), by_rows(data))


@SETTINGS
@given(data=documents(damaged=True), block_bytes=st.sampled_from([1, 200, 1 << 20]))
def test_the_fast_path_declines_what_the_row_path_refuses_and_reproduces_the_rest(data: bytes, block_bytes: int) -> None:
    expected = by_rows(data)
    actual = by_reader(data, block_bytes, fallback=False)
    if expected[0] in ("refused", "failed"):
        assert actual[0] == "declined", (data, actual, expected)
    elif actual[0] != "declined":
        assert_same(actual, expected)


@SETTINGS
@given(data=plain_documents(), block_bytes=st.sampled_from([1, 120, 1 << 20]))
def test_the_fast_path_takes_plain_documents(data: bytes, block_bytes: int) -> None:
    """The fast path is not a path that always declines: generated and exported shapes go through it."""
    expected = by_rows(data)
    assert expected[0] == "read", expected
    actual = by_reader(data, block_bytes, fallback=False)
    assert actual[0] == "read", (data, actual)
    assert_same(actual, expected)


def test_examples_of_each_shape_go_through_the_fast_path() -> None:
    lines = [
        {
            "type": "All",
            "data": {
                "s": "é",
                "b": True,
                "i32": -5,
                "u64": 2**64 - 1,
                "f32": 0.1,
                "f64": 2**60,
                "d": 19723,
                "t": 1704067200500,
                "e": "green",
                "v": [1, 0.5, -2],
                "ls": ["a", None],
                "lf": [0.1, None],
                "ld": [0, None],
                "lt": [-1],
                "li": [],
                "lb": [False],
            },
        },
        {"type": "Pair", "data": {"tenant": "acme", "slot": 7}},
        {"type": "When", "data": {"d": "2024-02-29", "at": 0}},
        {"type": "Flag", "data": {"f": False}},
        {"type": "Num", "data": {"n": -3, "label": "a", "id": "-3"}},
        {"type": "Tag", "data": {"label": "t", "score": -0.0}},
        {"edge": "Link", "from": "é", "to": "-3", "data": {"day": 1}},
        {"edge": "Near", "from": "a", "to": "b"},
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    with read_records(data, CATALOG, True, fallback=False) as records:
        assert records.column("node:Pair", "id").to_pylist() == ['["7","acme"]']
        assert records.column("node:When", "id").to_pylist() == ["19782"]
        assert records.column("node:Flag", "id").to_pylist() == ["false"]
        assert ULID.match(records.column("node:Tag", "id")[0].as_py())
        assert records.column("edge:Link", "line").to_pylist() == [7]
    assert_same(by_reader(data, 1 << 20, fallback=False), by_rows(data))


# Lines ``pyarrow.json`` reads without complaint but the row path refuses: each is caught by
# one check of the fast path (named first), so each check is proven by its own case. The bad
# line comes second where the first record of a block would catch it (it is read with ``json``
# to choose the block's schema).
ARROW_ACCEPTS_ROWS_REFUSE = {
    "record count: two records on one line": (
        b'{"type":"Num","data":{"n":1}}\n{"type":"Num","data":{"n":98}} {"type":"Num","data":{"n":99}}'
    ),
    "null guard: data null": b'{"edge":"Near","from":"a","to":"b","data":null}',
    "null guard: data.id null": b'{"type":"Tag","data":{"label":"x","id":null}}',
    "escape guard: a member name spelled with escapes": b'{"type":"Tag","data":{"label":"x","\\u0069d":null}}',
    "UTF-8 check": b'{"type":"Tag","data":{"label":"x"}}\n{"type":"Tag","data":{"label":"\xff"}}',
    "line shape: a BOM inside the file": b'{"type":"Flag","data":{"f":true}}\n\xef\xbb\xbf{"type":"Flag","data":{"f":false}}',
    "empty data.id": b'{"type":"Tag","data":{"label":"x","id":""}}',
    "explicit id differs from the key": b'{"type":"Num","data":{"n":1,"id":"2"}}',
    "missing required property": b'{"type":"Tag","data":{"code":"p"}}',
    "empty endpoint": b'{"edge":"Near","from":"","to":"b"}',
    "null endpoint": b'{"edge":"Near","from":"a","to":null}',
    "finite F64": b'{"type":"All","data":{"s":"k","f64":NaN}}',
    "finite F32 after rounding": b'{"type":"All","data":{"s":"k","f32":1e39}}',
    "finite vector element": b'{"type":"All","data":{"s":"k","v":[1,Infinity,2]}}',
    "vector length": b'{"type":"All","data":{"s":"k","v":[1,2]}}',
    "vector null element": b'{"type":"All","data":{"s":"k","v":[1,null,2]}}',
    "enum values": b'{"type":"All","data":{"s":"k","e":"blue"}}',
    "Date range": b'{"type":"When","data":{"d":10000000}}',
    "DateTime range": b'{"type":"When","data":{"d":1,"at":253402300800000}}',
    "Date list range": b'{"type":"All","data":{"s":"k","ld":[-719163]}}',
    "Date text pattern": b'{"type":"When","data":{"d":"2024-1-01"}}',
    "Date text validity": b'{"type":"When","data":{"d":"2023-02-29"}}',
    "Date text year 0 as key": b'{"type":"When","data":{"d":"0000-01-01"}}',
    "Date text year 0 in a list": b'{"type":"All","data":{"s":"k","ld":["0000-03-01"]}}',
    "DateTime text validity": b'{"type":"When","data":{"d":1,"at":"2023-02-29T00:00:00.000Z"}}',
    "DateTime text year 0": b'{"type":"When","data":{"d":1,"at":"0000-01-01T00:00:00.000Z"}}',
    "type member names the table": b'{"type":"Flag","data":{"f":true}}\n{"data":{"f":false}}',
}


@pytest.mark.parametrize("name", list(ARROW_ACCEPTS_ROWS_REFUSE))
@pytest.mark.parametrize("block_bytes", [1, 1 << 20])
def test_each_fast_path_check_declines_what_the_row_path_refuses(name: str, block_bytes: int) -> None:
    data = ARROW_ACCEPTS_ROWS_REFUSE[name] + b"\n"
    expected = by_rows(data)
    assert expected[0] == "refused", (name, expected)
    assert by_reader(data, block_bytes, fallback=False)[0] == "declined", name
    assert by_reader(data, block_bytes, fallback=True) == expected


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"Real","data":{"x":1.5}}',  # a float key: numpy's shortest spelling, not Arrow's
        '{"type":"All","data":{"s":"k","t":"2024-01-01T00:00:00Z"}}',  # ISO DateTime
        '{"type":"Tag","data":{"label":"\\u0041"}}',  # an escaped ASCII character
        '  {"type":"Flag","data":{"f":true}}',  # leading whitespace
        '{"type":"Pair","data":{"tenant":"a\\"b","slot":1}}',  # a composite key member JSON escapes
    ],
)
def test_valid_shapes_the_fast_path_leaves_to_the_row_path(line: str) -> None:
    data = (line + "\n").encode()
    assert by_reader(data, 1 << 20, fallback=False)[0] == "declined"
    assert_same(by_reader(data, 1 << 20, fallback=True), by_rows(data))


def test_the_fast_path_reads_dates_as_export_spells_them() -> None:
    data = b'{"type":"When","data":{"d":"2024-01-31","at":"2024-01-31T10:00:00.250Z"}}\n{"type":"When","data":{"d":"0099-12-31"}}\n'
    assert_same(by_reader(data, 1 << 20, fallback=False), by_rows(data))


def test_a_duplicate_across_blocks_names_the_first_line_of_the_file() -> None:
    """The second Flag duplicates the first across blocks; the later malformed line is not reported."""
    data = b'{"type":"Flag","data":{"f":true}}\n' + b'{"type":"Num","data":{"n":1}}\n' * 3 + b'{"type":"Flag","data":{"f":true}}\n{"oops"\n'
    for block_bytes in (1, 64, 1 << 20):
        outcome = by_reader(data, block_bytes, fallback=True)
        assert outcome[0] == "refused"
        assert outcome[1][0].startswith("line 3: duplicate @key value '1' for Num (first at line 2)")
        assert outcome == by_rows(data)


def test_generated_ids_follow_the_line_order_across_tables() -> None:
    data = b"".join((b'{"type":"Tag","data":{"label":"a"}}\n' if i % 2 else b'{"edge":"Near","from":"a","to":"b"}\n') for i in range(50))
    for block_bytes in (1, 100, 1 << 20):
        with read_records(data, CATALOG, True, block_bytes=block_bytes) as records:
            by_line = sorted(
                (line, row_id)
                for key in records.table_keys()
                for line, row_id in zip(records.column(key, "line").to_pylist(), records.column(key, "id").to_pylist(), strict=True)
            )
        ids = [row_id for _, row_id in by_line]
        assert ids == sorted(ids) and len(set(ids)) == 50


def test_ulid_blocks_continue_the_single_ulid_sequence() -> None:
    minted = [new_ulid(), *new_ulids(1000).to_pylist(), new_ulid(), *new_ulids(3).to_pylist()]
    assert minted == sorted(minted) and len(set(minted)) == len(minted)
    assert all(ULID.match(ulid) for ulid in minted)
    assert new_ulids(0).to_pylist() == []


# -- streaming ----------------------------------------------------------------------------------


@given(data=st.binary(max_size=300) | documents(damaged=True).map(lambda d: d.replace(b"\r", b"")), block_bytes=st.integers(1, 64))
@settings(max_examples=200, deadline=None)
def test_blocks_hold_whole_lines_and_number_them(data: bytes, block_bytes: int) -> None:
    expected = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    if expected[-1] == b"":
        expected.pop()
    for source in (data, io.BytesIO(data)):
        lines, number = [], 1
        for block in iter_blocks(source, block_bytes):
            assert block.first_line == number and block.line_count >= 1
            longest = max(len(line) + 1 for line in block.lines())
            assert len(block.data) <= max(block_bytes, longest) + block_bytes  # bounded by the block or one line
            lines += block.lines()
            number += block.line_count
        assert lines == expected


def _items(count: int) -> bytes:
    return b"".join(b'{"type":"Num","data":{"n":%d,"label":"l%d"}}\n' % (n, n) for n in range(count))


def test_a_large_read_streams_through_a_bounded_spool() -> None:
    """50K rows read from a file in 16 KiB blocks through a 256 KiB spool: the rows held in
    memory never exceed the budget by more than one block's batch, the rest went to disk, and
    reading them back gives the same rows as an all-in-memory read."""
    data = _items(50_000)
    budget = 256 * 1024
    with read_records(io.BytesIO(data), CATALOG, True, block_bytes=16 * 1024, spool_budget=budget) as spooled:
        spool = spooled.spool
        assert spool.spilled_segments > 40
        assert spool.peak_resident_bytes <= budget + 64 * 1024
        streamed = pa.Table.from_batches(list(spooled.reader("node:Num")))
        with read_records(data, CATALOG, True) as whole:
            assert whole.spool.spilled_segments == 0
            assert streamed.equals(whole.rows("node:Num", 0, 50_000))
            assert spooled.rows("node:Num", 30_000, 38_192).equals(whole.rows("node:Num", 30_000, 38_192))
        directory = spool._directory
        assert directory is not None and Path(directory).is_dir()
    assert not Path(directory).exists()


def test_a_load_from_a_file_streams_and_cleans_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``omnigraph load`` reads its file in blocks and spills beyond the budget; the graph gets
    every row (overwrite streams the spool into Lance; chunked append reads it chunk by chunk)."""
    import omnigraph.engine.records.jsonl_blocks as blocks
    import omnigraph.engine.records.record_set as row_spool

    monkeypatch.setattr(row_spool, "SPOOL_BUDGET_BYTES", 64 * 1024)
    monkeypatch.setattr(blocks, "BLOCK_BYTES", 8 * 1024)
    reads: list[int] = []

    class CountingFile(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            chunk = super().read(size)
            reads.append(len(chunk))
            return chunk

    people = b"".join(b'{"type":"Person","data":{"name":"p%05d","age":%d}}\n' % (i, i % 90) for i in range(20_000))
    for mode, chunk_rows in (("overwrite", None), ("append", 8192)):
        uri = str(tmp_path / mode)
        graph = init(uri)
        reads.clear()
        result = load(graph, CountingFile(people), mode=mode, branch="main", actor="tests", chunk_rows=chunk_rows)  # type: ignore[arg-type]
        assert max(reads) <= 8 * 1024 and len(reads) > len(people) // (8 * 1024)
        assert sum(result.rows.values()) == 20_000
        exported = export_text(uri)
        assert '"id": "p19999"' in exported and '"id": "p00000"' in exported
