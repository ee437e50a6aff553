"""Node ids: canonical scalar spellings, derived (single and composite) ids, and ULIDs."""

from __future__ import annotations

import datetime as dt
import math
import re
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.ids import canonical_scalar, derive_node_id, new_ulid

CANONICAL = [
    ("String", "Alice", "Alice"),
    ("String", "", ""),
    ("String", "Zoë 東京 🚀", "Zoë 東京 🚀"),
    ("String", ' "quoted" ', ' "quoted" '),
    ("Bool", True, "true"),
    ("Bool", False, "false"),
    ("I32", -(2**31), "-2147483648"),
    ("I32", 7, "7"),
    ("I64", 2**63 - 1, "9223372036854775807"),
    ("U32", 0, "0"),
    ("U64", 2**64 - 1, "18446744073709551615"),
    ("F64", 1.25, "1.25"),
    ("F64", 1.0, "1"),
    ("F64", -0.0, "0"),
    ("F64", 0.0, "0"),
    ("F64", -2.5, "-2.5"),
    ("F64", 1e20, "100000000000000000000"),
    ("F64", 1e-7, "0.0000001"),
    ("F64", 0.1, "0.1"),
    ("F64", float(np.float32(0.1)), "0.10000000149011612"),
    ("F32", float(np.float32(0.1)), "0.1"),
    ("F32", 0.1, "0.1"),
    ("F32", -0.0, "0"),
    ("F32", 16777216.0, "16777216"),
    ("F32", float(np.float32(3.4028235e38)), "340282350000000000000000000000000000000"),
    ("Date", dt.date(2024, 1, 1), "19723"),
    ("Date", dt.date(1970, 1, 1), "0"),
    ("Date", dt.date(1969, 12, 31), "-1"),
    ("DateTime", dt.datetime(2024, 1, 1), "1704067200000"),
    ("DateTime", dt.datetime(1970, 1, 1, 0, 0, 0, 1000), "1"),
    ("DateTime", dt.datetime(1969, 12, 31, 23, 59, 59, 999000), "-1"),
    ("DateTime", dt.datetime(2024, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1))), "1704067200000"),
]


@pytest.mark.parametrize(("type_name", "value", "expected"), CANONICAL)
def test_canonical_scalar(type_name: str, value: object, expected: str) -> None:
    assert canonical_scalar(type_name, value) == expected


@pytest.mark.parametrize(
    ("type_name", "value"),
    [
        ("F64", math.nan),
        ("F64", math.inf),
        ("F32", -math.inf),
        ("F32", 1e300),
        ("I32", 2**31),
        ("U32", -1),
        ("I64", True),
        ("I64", 1.0),
        ("Bool", 1),
        ("String", 5),
        ("Date", dt.datetime(2024, 1, 1)),
        ("Date", 19723),
        ("DateTime", dt.date(2024, 1, 1)),
        ("F64", 1),
    ],
)
def test_canonical_scalar_refuses(type_name: str, value: object) -> None:
    with pytest.raises(BadRequest):
        canonical_scalar(type_name, value)


def _significant_digits(text: str) -> str:
    """The significant digits of a decimal spelling (sign, point, exponent, padding removed)."""
    return text.lower().split("e")[0].lstrip("-").replace(".", "").strip("0")


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_f64_canonical_round_trips_without_exponent(value: float) -> None:
    text = canonical_scalar("F64", value)
    assert float(text) == value
    assert "e" not in text and "E" not in text
    assert not text.endswith(".0") and text != "-0"
    assert _significant_digits(text) == _significant_digits(repr(value))


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_f32_canonical_round_trips_as_float32(value: float) -> None:
    text = canonical_scalar("F32", value)
    assert np.float32(float(text)) == np.float32(value)
    assert "e" not in text and not text.endswith(".0")
    assert _significant_digits(text) == _significant_digits(str(np.float32(value)))


SCHEMA = Catalog.from_source(
    """
    node Person { name: String @key }
    node Slot { slot: U32  tenant: String  @key(tenant, slot) }
    node Multi { b: Bool  a: Date  c: F32  @key(c, b, a) }
    node Level { level: enum(low, high) @key }
    node Tag { label: String }
    """
)


def test_single_key_is_the_canonical_string() -> None:
    assert derive_node_id(SCHEMA.node("Person"), {"name": "Zoë"}) == "Zoë"
    assert derive_node_id(SCHEMA.node("Level"), {"level": "high"}) == "high"


def test_composite_key_orders_members_by_property_name() -> None:
    assert derive_node_id(SCHEMA.node("Slot"), {"slot": 7, "tenant": "acme"}) == '["7","acme"]'
    assert derive_node_id(SCHEMA.node("Slot"), {"slot": 7, "tenant": "Café"}) == '["7","Café"]'
    multi = {"a": dt.date(2024, 1, 1), "b": True, "c": float(np.float32(0.1))}
    assert derive_node_id(SCHEMA.node("Multi"), multi) == '["19723","true","0.1"]'
    assert derive_node_id(SCHEMA.node("Slot"), {"slot": 1, "tenant": 'a"b'}) == '["1","a\\"b"]'


def test_derive_refuses_unkeyed_tables_and_missing_members() -> None:
    with pytest.raises(BadRequest, match="has no @key"):
        derive_node_id(SCHEMA.node("Tag"), {"label": "x"})
    with pytest.raises(BadRequest, match="'tenant'"):
        derive_node_id(SCHEMA.node("Slot"), {"slot": 1, "tenant": None})


ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}\Z")


def _ulid_millis(ulid: str) -> int:
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    value = 0
    for char in ulid:
        value = value * 32 + alphabet.index(char)
    return value >> 80


def test_ulids_are_well_formed_monotonic_and_timestamped() -> None:
    before = time.time_ns() // 1_000_000
    ulids = [new_ulid() for _ in range(2000)]
    after = time.time_ns() // 1_000_000
    assert all(ULID.match(u) for u in ulids)
    assert ulids == sorted(ulids) and len(set(ulids)) == len(ulids)
    assert before <= _ulid_millis(ulids[0]) <= _ulid_millis(ulids[-1]) <= after + 1
