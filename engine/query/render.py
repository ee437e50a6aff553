"""Query output values as JSON values.

Strings, booleans, integers (an integer ``sum`` included, however large) and ``F64`` numbers
as they are; an ``F32`` value (and each item of a vector) as the shortest decimal that reads
back as the same float32 (``2.7``, not ``2.700000047683716``); a Date as ``YYYY-MM-DD``; a
DateTime as ISO 8601 UTC with milliseconds (``2024-01-31T09:30:00.000Z``); a list item by
item; NULL as None.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import numpy as np

from omnigraph.engine.schema.types import EnumType, ListType, PropertyType, ScalarType, VectorType

Render = Callable[[Any], Any]


def _float32(value: Any) -> float:
    return float(str(np.float32(value)))


def _datetime(value: dt.datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def _scalar(name: str) -> Render:
    if name == "F32":
        return _float32
    if name == "F64":
        return float
    if name == "Date":
        return lambda value: value.isoformat()
    if name == "DateTime":
        return _datetime
    return lambda value: value


def renderer(ptype: PropertyType) -> Render:
    """The function that turns a non-null DuckDB value of ``ptype`` into its JSON value."""
    if isinstance(ptype, EnumType):
        return str
    if isinstance(ptype, VectorType):
        return lambda value: [_float32(item) for item in value]
    if isinstance(ptype, ListType):
        item = _scalar(ptype.item.name)
        return lambda value: [None if v is None else item(v) for v in value]
    assert isinstance(ptype, ScalarType)
    return _scalar(ptype.name)


def row_renderer(types: list[PropertyType]) -> Callable[[tuple[Any, ...]], list[Any]]:
    """Render one result row (NULLs stay None)."""
    renders = [renderer(ptype) for ptype in types]
    return lambda row: [None if value is None else render(value) for render, value in zip(renders, row, strict=True)]
