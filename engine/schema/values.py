"""Typed property values: JSON input to coerced Python values, stored values back to JSON, and rule checks.

Coerced values (:func:`coerce_value`, :func:`coerce_property`) are what
``pyarrow.Array.to_pylist()`` yields for the column type, so values read back from storage
compare equal to freshly coerced ones; :func:`export_value` turns a stored value back into JSON:

=============  ====================================  ==========================================
type           accepted JSON                         coerced Python value / exported JSON
=============  ====================================  ==========================================
String, enum   string (enum: one of its values)      ``str``
Bool           ``true``/``false``                    ``bool``
I32..U64       integer in the type's range           ``int`` (a JSON ``1.0`` or ``true`` is refused)
F64            number, finite                        ``float``
F32            number, finite as float32             ``float`` holding the float32 value; exported
                                                     as its shortest float32 spelling
Date           int epoch days or ``"YYYY-MM-DD"``    ``datetime.date``; exported as epoch days
DateTime       int epoch ms or ISO-8601 string       naive UTC ``datetime.datetime``; exported as
               (naive = UTC; sub-ms refused)         epoch ms
[T]            array of T (null items allowed)       ``list``
Vector(n)      array of exactly n finite numbers     ``list[float]`` of float32 values
Blob           ``"base64:..."`` or a URI string      ``lance.blob.Blob`` (:mod:`omnigraph.engine.schema.types`);
                                                     exported by the export itself (it reads the bytes)
=============  ====================================  ==========================================

A value that does not fit is :class:`InvalidValue`, whose message says why.

Rule checks: a type's ``@range`` and ``@check`` rules, nulls exempt. One implementation for
every write path: the JSONL reader checks each record (:func:`row_violation`), the columnar
reader and the merge/mutate checks take Arrow rows (:func:`table_violations`). A violation
(:class:`ValueViolation`) names the type, the property, the rule and the value; callers add the
id and the input line.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from omnigraph.engine.schema.ids import EPOCH_DATE, EPOCH_DATETIME
from omnigraph.engine.schema.tables import CheckRule, Property, RangeRule, TableDef
from omnigraph.engine.schema.types import (
    INTEGER_RANGES,
    BlobSpellingError,
    BlobType,
    EnumType,
    ListType,
    PropertyType,
    ScalarType,
    VectorType,
    parse_blob,
)


class ValueViolation(msgspec.Struct, frozen=True):
    """A value one rule refuses; ``index`` is the row's position in the checked table (0 for a row)."""

    table: TableDef
    rule: RangeRule | CheckRule
    value: Any
    index: int = 0

    @property
    def kind(self) -> str:
        """The problem kind: ``range_violation`` or ``check_violation``."""
        return "range_violation" if isinstance(self.rule, RangeRule) else "check_violation"

    def describe(self) -> str:
        """``T.p value V is outside @range(p, a..b)`` or ``... does not match @check(p, 're')``."""
        what = "is outside" if isinstance(self.rule, RangeRule) else "does not match"
        return f"{self.table.type_name}.{self.rule.property} value {self.value!r} {what} {self.rule.describe()}"

    def details(self) -> dict[str, Any]:
        """The error details: ``{type_name, property, rule, value}``."""
        return {"type_name": self.table.type_name, "property": self.rule.property, "rule": self.rule.describe(), "value": self.value}


def _refuses(rule: RangeRule | CheckRule, value: Any) -> bool:
    if value is None:
        return False
    return not rule.allows(value)


def row_violation(table: TableDef, values: dict[str, Any]) -> ValueViolation | None:
    """The first rule (ranges, then checks, in source order) that one row's ``values`` break."""
    rules: tuple[RangeRule | CheckRule, ...] = (*table.ranges, *table.checks)
    for rule in rules:
        value = values.get(rule.property)
        if _refuses(rule, value):
            return ValueViolation(table, rule, value)
    return None


def table_violations(table: TableDef, rows: pa.Table) -> list[ValueViolation]:
    """Every rule each row of ``rows`` (with the table's property columns) breaks, by row then rule."""
    found: list[ValueViolation] = []
    rules: tuple[RangeRule | CheckRule, ...] = (*table.ranges, *table.checks)
    for rule in rules:
        for index, value in enumerate(rows.column(rule.property).to_pylist()):
            if _refuses(rule, value):
                found.append(ValueViolation(table, rule, value, index))
    return sorted(found, key=lambda v: v.index)


_DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")


class InvalidValue(ValueError):
    """A JSON value that does not fit its property; the message says why."""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def coerce_property(prop: Property, value: Any) -> Any:
    """The coerced value of ``prop`` for JSON ``value``; None stands for null/absent.

    Raises :class:`InvalidValue` for a null non-nullable property or a value of the wrong type.
    """
    if value is None:
        if not prop.nullable:
            raise InvalidValue("must not be null")
        return None
    return coerce_value(prop.type, value)


def coerce_value(ptype: PropertyType, value: Any) -> Any:
    """The coerced form of the non-null JSON ``value`` for ``ptype`` (see the module table)."""
    if isinstance(ptype, ScalarType):
        return _scalar(ptype.name, value)
    if isinstance(ptype, EnumType):
        if not isinstance(value, str) or value not in ptype.values:
            raise InvalidValue(f"expected one of {', '.join(ptype.values)}, got {_show(value)}")
        return value
    if isinstance(ptype, ListType):
        if not isinstance(value, list):
            raise InvalidValue(f"expected {ptype}, got {_show(value)}")
        return [None if item is None else _scalar(ptype.item.name, item) for item in value]
    if isinstance(ptype, BlobType):
        try:
            return parse_blob(value)
        except BlobSpellingError as error:
            raise InvalidValue(str(error)) from None
    assert isinstance(ptype, VectorType)
    if not isinstance(value, list) or len(value) != ptype.dim:
        raise InvalidValue(f"expected {ptype} (a list of {ptype.dim} numbers), got {_show(value)}")
    return [_float(item, single=True) for item in value]


def _scalar(name: str, value: Any) -> Any:
    if name == "String":
        if not isinstance(value, str):
            raise InvalidValue(f"expected String, got {_show(value)}")
        return value
    if name == "Bool":
        if not isinstance(value, bool):
            raise InvalidValue(f"expected Bool, got {_show(value)}")
        return value
    if name in INTEGER_RANGES:
        return _integer(name, value)
    if name in ("F32", "F64"):
        return _float(value, single=name == "F32")
    if name == "Date":
        return _date(value)
    return _datetime(value)


def _integer(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidValue(f"expected {name}, got {_show(value)}")
    low, high = INTEGER_RANGES[name]
    if not low <= value <= high:
        raise InvalidValue(f"{value} is out of range for {name} ({low}..{high})")
    return value


def _float(value: Any, single: bool) -> float:
    name = "F32" if single else "F64"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InvalidValue(f"expected {name}, got {_show(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidValue(f"{_show(value)} is out of range for {name}") from None
    if single:
        with np.errstate(over="ignore"):
            number = float(np.float32(number))
    if not math.isfinite(number):
        raise InvalidValue(f"{_show(value)} is not a finite {name}")
    return number


def _date(value: Any) -> dt.date:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return EPOCH_DATE + dt.timedelta(days=value)
        except OverflowError:
            raise InvalidValue(f"{value} epoch days is out of range for Date") from None
    if isinstance(value, str) and _DATE_TEXT.match(value):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            raise InvalidValue(f"{_show(value)} is not a valid date") from None
    raise InvalidValue(f'expected Date (epoch days or "YYYY-MM-DD"), got {_show(value)}')


def _datetime(value: Any) -> dt.datetime:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return EPOCH_DATETIME + dt.timedelta(milliseconds=value)
        except OverflowError:
            raise InvalidValue(f"{value} epoch ms is out of range for DateTime") from None
    if not isinstance(value, str):
        raise InvalidValue(f"expected DateTime (epoch ms or ISO-8601 string), got {_show(value)}")
    try:
        parsed = dt.datetime.fromisoformat(value)
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
    except (ValueError, OverflowError):
        raise InvalidValue(f"{_show(value)} is not a valid ISO-8601 DateTime") from None
    if parsed.microsecond % 1000:
        raise InvalidValue(f"{_show(value)} has sub-millisecond precision (DateTime stores ms)")
    return parsed


def export_value(ptype: PropertyType, value: Any) -> Any:
    """The JSON value of a stored (``to_pylist``) non-null ``value`` of ``ptype``.

    A Blob cell arrives already spelled (by :mod:`omnigraph.engine.ops.export`).
    """
    if isinstance(ptype, ScalarType):
        return _export_scalar(ptype.name, value)
    if isinstance(ptype, ListType):
        return [None if item is None else _export_scalar(ptype.item.name, item) for item in value]
    if isinstance(ptype, VectorType):
        return [_shortest_float32(item) for item in value]
    return value


def iso_datetime(value: dt.datetime) -> str:
    """A stored (naive UTC, millisecond) DateTime as ISO 8601 UTC: ``2024-01-31T10:00:00.000Z``.

    How queries print a DateTime and export writes one; :func:`coerce_value` reads it back.
    """
    return value.isoformat(timespec="milliseconds") + "Z"


def _export_scalar(name: str, value: Any) -> Any:
    if name == "F32":
        return _shortest_float32(value)
    if name == "Date":
        return value.isoformat()
    if name == "DateTime":
        return iso_datetime(value)
    return value


def _shortest_float32(value: float) -> float:
    """The float64 nearest the shortest decimal that round-trips as ``value``'s float32."""
    return float(str(np.float32(value)))
