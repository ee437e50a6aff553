"""Columnar coercion of JSONL property values, and key-derived node ids, with Arrow compute.

The columnar counterpart of :mod:`omnigraph.engine.schema.values` and :func:`omnigraph.engine.schema.ids.derive_node_id`
for the fast load path (:mod:`omnigraph.engine.records.columnar`). It never refuses a value itself: where
the row-by-row rules would refuse a value, or where this module cannot prove it would reach the
same result, it raises :class:`Declined` and the caller hands the input to the row path, which
produces the precise error (or the same rows).

Read types (what ``pyarrow.json`` is told to expect) are chosen so that JSON the row path
refuses is refused by the reader too, or shows in the column: integers are read as their exact
Arrow type (a float, a bool or an out-of-range value fails the read); floats as float64 (a JSON
integer is accepted, as the row path does; F32 is then rounded from float64, as the row path
does); Date and DateTime as int64 (epoch days / ms), range-checked here, except a Date property
the caller reads as text (``"YYYY-MM-DD"``, checked by Arrow's strict ISO cast; ISO DateTime
spellings are left to the row path); enums as Utf8, checked against their values here; Blob
properties as Utf8, and always declined (the row path decodes their spellings).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.schema.ids import EPOCH_DATE, EPOCH_DATETIME, ONE_MS
from omnigraph.engine.schema.tables import Property, TableDef
from omnigraph.engine.schema.types import (
    FLOAT_SCALARS,
    BlobType,
    EnumType,
    ListType,
    PropertyType,
    ScalarType,
    VectorType,
)


class Declined(Exception):
    """The fast path does not vouch for this input; the message says why (for diagnostics)."""


_DATE_DAYS = ((dt.date.min - EPOCH_DATE).days, (dt.date.max - EPOCH_DATE).days)
_DATETIME_MS = (
    (dt.datetime.min - EPOCH_DATETIME) // ONE_MS,
    (dt.datetime.max - EPOCH_DATETIME) // ONE_MS,
)
_READ_SCALARS: dict[str, pa.DataType] = {"F32": pa.float64(), "Date": pa.int64(), "DateTime": pa.int64()}
_JSON_ESCAPED = r'["\\\x00-\x1f]'
"""Characters ``json.dumps(..., ensure_ascii=False)`` escapes in a string."""
DATE = ScalarType("Date")
"""The Date scalar type (a column the caller may read as ``YYYY-MM-DD`` text)."""
_DATE_TEXT = r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\z"
"""The row path's ``YYYY-MM-DD`` pattern (:mod:`omnigraph.engine.schema.values`)."""


def read_type(ptype: PropertyType, as_text: bool = False) -> pa.DataType:
    """The Arrow type ``pyarrow.json`` reads a property of ``ptype`` as (see the module docstring);
    ``as_text`` reads a Date property as its ``"YYYY-MM-DD"`` spelling."""
    if as_text and ptype == DATE:
        return pa.utf8()
    if isinstance(ptype, ScalarType):
        return _READ_SCALARS.get(ptype.name, ptype.arrow_type())
    if isinstance(ptype, (EnumType, BlobType)):
        return pa.utf8()
    if isinstance(ptype, ListType):
        return pa.list_(pa.field("item", read_type(ptype.item), nullable=True))
    assert isinstance(ptype, VectorType)
    return pa.list_(pa.field("item", pa.float64(), nullable=True))


def coerce_column(prop: Property, column: pa.Array) -> pa.Array:
    """``column`` (as read, nulls for null or absent) as the property's stored Arrow column.

    Declines a null in a non-nullable property and every value the row path would refuse.
    """
    if not prop.nullable and column.null_count:
        raise Declined(f"null or missing {prop.name}")
    return _coerce(prop.type, column, prop.name)


def _coerce(ptype: PropertyType, column: pa.Array, name: str) -> pa.Array:
    if isinstance(ptype, BlobType):
        raise Declined(f"{name}: a Blob property (decoded row by row)")
    if isinstance(ptype, ScalarType):
        return _scalar(ptype.name, column, name)
    if isinstance(ptype, EnumType):
        allowed = pc.or_kleene(column.is_null(), pc.is_in(column, value_set=pa.array(ptype.values, pa.utf8())))
        if not pc.all(allowed).as_py():
            raise Declined(f"{name}: a value outside the enum")
        return column
    if isinstance(ptype, ListType):
        items = _scalar(ptype.item.name, column.values, name)
        return pa.ListArray.from_arrays(column.offsets, items, type=ptype.arrow_type(), mask=_nulls(column))
    assert isinstance(ptype, VectorType)
    return _vector(ptype, column, name)


def _nulls(column: pa.Array) -> pa.Array | None:
    return column.is_null() if column.null_count else None


def _scalar(type_name: str, column: pa.Array, name: str) -> pa.Array:
    if type_name in FLOAT_SCALARS:
        if type_name == "F32":
            column = pc.cast(column, pa.float32(), safe=False)
        if pc.all(pc.is_finite(column)).as_py() is False:
            raise Declined(f"{name}: a value that is not a finite {type_name}")
        return column
    if type_name == "Date" and pa.types.is_string(column.type):
        if pc.all(pc.match_substring_regex(column, _DATE_TEXT)).as_py() is False:
            raise Declined(f"{name}: a Date string that is not YYYY-MM-DD")
        try:
            dates = pc.cast(column, pa.date32())
        except pa.ArrowInvalid:
            raise Declined(f"{name}: an invalid date") from None
        _in_range(pc.cast(dates, pa.int32()), _DATE_DAYS, name)
        return dates
    if type_name == "Date":
        return pc.cast(pc.cast(_in_range(column, _DATE_DAYS, name), pa.int32()), pa.date32())
    if type_name == "DateTime":
        return pc.cast(_in_range(column, _DATETIME_MS, name), pa.timestamp("ms"))
    return column


def _in_range(column: pa.Array, bounds: tuple[int, int], name: str) -> pa.Array:
    low, high = pc.min_max(column).values()
    if (low.is_valid and low.as_py() < bounds[0]) or (high.is_valid and high.as_py() > bounds[1]):
        raise Declined(f"{name}: a value out of range")
    return column


def _vector(ptype: VectorType, column: pa.Array, name: str) -> pa.Array:
    """A ``fixed_size_list<float32, n>`` laid out as ``pa.array`` lays it out (a null row's items null)."""
    if pc.any(pc.not_equal(pc.list_value_length(column), ptype.dim)).as_py():
        raise Declined(f"{name}: a vector of the wrong length")
    items = pc.list_flatten(column)
    if items.null_count:
        raise Declined(f"{name}: a null vector element")
    items = _scalar("F32", items, name)
    if not column.null_count:
        return pa.FixedSizeListArray.from_arrays(items, ptype.dim)
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    slot = np.cumsum(valid) - 1  # the valid rows' vectors are consecutive in ``items``
    positions = (slot[:, None] * ptype.dim + np.arange(ptype.dim)[None, :]).reshape(-1)
    absent = np.repeat(~valid, ptype.dim)
    spread = pc.take(items, pa.array(np.where(absent, 0, positions), mask=absent))
    return pa.FixedSizeListArray.from_arrays(spread, ptype.dim, mask=pa.array(~valid))


def derive_ids(table: TableDef, columns: dict[str, pa.Array]) -> pa.Array:
    """The key-derived id of every row of a keyed node table (see :mod:`omnigraph.engine.schema.ids`).

    ``columns`` are the coerced key members (never null: key members are non-nullable). Float
    keys are declined (their canonical spelling is numpy's Dragon4, not an Arrow cast), and so is
    a composite key member holding a character that JSON would escape.
    """
    assert table.key is not None
    parts = {name: _canonical(table.property(name).type, columns[name], name) for name in table.key}
    if len(table.key) == 1:
        return parts[table.key[0]]
    ordered = [parts[name] for name in sorted(parts, key=lambda n: n.encode("utf-8"))]
    for name, part in parts.items():
        if pc.any(pc.match_substring_regex(part, _JSON_ESCAPED)).as_py():
            raise Declined(f"key member {name}: a character JSON escapes")
    joined = pc.binary_join_element_wise(*ordered, '","')
    return pc.binary_join_element_wise('["', joined, '"]', "")


def _canonical(ptype: PropertyType, column: pa.Array, name: str) -> pa.Array:
    """Each value's canonical key string: verbatim strings, decimal integers and epoch counts."""
    if isinstance(ptype, EnumType):
        return column
    assert isinstance(ptype, ScalarType)
    if ptype.name in FLOAT_SCALARS:
        raise Declined(f"key member {name}: a float key")
    if ptype.name == "Date":
        column = pc.cast(column, pa.int32())
    elif ptype.name == "DateTime":
        column = pc.cast(column, pa.int64())
    return pc.cast(column, pa.utf8())


def compact(array: pa.Array) -> pa.Array:
    """``array`` without a validity bitmap where it has no nulls, at every nesting level.

    ``pa.array`` allocates no bitmap for a column without nulls, while compute kernels may keep
    an all-valid one; dropping it makes ``nbytes`` (the per-commit Arrow limit) the same for
    the rows of either parsing path. An extension array (a Blob column, which the limit counts
    by its payload sizes, :mod:`omnigraph.engine.ops.blob_staging`) is returned as it is.
    """
    if isinstance(array.type, pa.ExtensionType):
        return array
    children = None
    if pa.types.is_list(array.type) or pa.types.is_fixed_size_list(array.type):
        children = [compact(array.values)]
    own = array.buffers()[: array.type.num_buffers]
    buffers = [own[0] if array.null_count else None, *own[1:]]
    return pa.Array.from_buffers(array.type, len(array), buffers, offset=array.offset, children=children)
