"""[omnigraph.engine.schema.types]
Property types of the schema language and their Arrow storage types.

The hierarchy is closed: :class:`ScalarType`, :class:`ListType` (a list of scalars),
:class:`EnumType` (a string restricted to an allowed set), :class:`VectorType`
(``fixed_size_list<float32, n>``) and :class:`BlobType` (a Lance blob column). ``str(t)`` spells
a type as the schema language does.


[omnigraph.engine.schema.types]
The JSON spelling of a Blob cell, the same on input (load, ``.gq`` values) and on export.

A Blob value is a string:

* ``"base64:<standard base64>"``: managed bytes, stored in the table's blob column
  (``"base64:"`` alone is the empty blob);
* ``"file:///abs/path"`` or ``"s3://bucket/key"``: an external object. What is stored depends on
  the write (``docs/schema.md``): a keyed insert/upsert or a load append/merge copies the
  object's bytes into the table; a load overwrite keeps the URI as a reference.

Anything else (another type, another URI scheme, malformed base64) is refused. Coercion reads
nothing: whether an external object exists, and its size, is settled by the write.


[omnigraph.engine.schema.types]
Typed property values: JSON input to coerced Python values, and stored values back to JSON.

Coerced values are what ``pyarrow.Array.to_pylist()`` yields for the column type, so values
read back from storage compare equal to freshly coerced ones:

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

"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
from lance.blob import Blob
from lance.blob import BlobType as LanceBlobType

from omnigraph.engine.schema.catalog import Property
from omnigraph.engine.schema.ids import EPOCH_DATE, EPOCH_DATETIME, ONE_MS

SCALAR_ARROW_TYPES: dict[str, pa.DataType] = {
    "String": pa.utf8(),
    "Bool": pa.bool_(),
    "I32": pa.int32(),
    "I64": pa.int64(),
    "U32": pa.uint32(),
    "U64": pa.uint64(),
    "F32": pa.float32(),
    "F64": pa.float64(),
    "Date": pa.date32(),
    "DateTime": pa.timestamp("ms"),
}
"""Every scalar type name of the language, mapped to its Arrow type."""

INTEGER_RANGES: dict[str, tuple[int, int]] = {
    "I32": (-(2**31), 2**31 - 1),
    "I64": (-(2**63), 2**63 - 1),
    "U32": (0, 2**32 - 1),
    "U64": (0, 2**64 - 1),
}
"""Inclusive value range of each integer scalar type."""

FLOAT_SCALARS = frozenset({"F32", "F64"})


class PropertyType(ABC):
    """Base of the property types; subclasses are frozen dataclasses."""

    @abstractmethod
    def arrow_type(self) -> pa.DataType:
        """The Arrow type a column of this property type is stored as."""

    @abstractmethod
    def describe(self) -> str:
        """The canonical schema-language spelling (used in messages and fingerprints)."""

    def __str__(self) -> str:
        return self.describe()


@dataclass(frozen=True)
class ScalarType(PropertyType):
    """One of the names in :data:`SCALAR_ARROW_TYPES`."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in SCALAR_ARROW_TYPES:
            raise ValueError(f"unknown scalar type {self.name!r}")

    def arrow_type(self) -> pa.DataType:
        return SCALAR_ARROW_TYPES[self.name]

    def describe(self) -> str:
        return self.name


@dataclass(frozen=True)
class ListType(PropertyType):
    """``[T]``: a list of one scalar type; elements are nullable in Arrow."""

    item: ScalarType

    def arrow_type(self) -> pa.DataType:
        return pa.list_(pa.field("item", self.item.arrow_type(), nullable=True))

    def describe(self) -> str:
        return f"[{self.item.describe()}]"


@dataclass(frozen=True)
class EnumType(PropertyType):
    """``enum(a, b)``: stored as Utf8, values restricted to ``values`` (declaration order)."""

    values: tuple[str, ...]

    def arrow_type(self) -> pa.DataType:
        return pa.utf8()

    def describe(self) -> str:
        return f"enum({', '.join(self.values)})"


@dataclass(frozen=True)
class VectorType(PropertyType):
    """``Vector(n)``: exactly ``dim`` float32 numbers."""

    dim: int

    def arrow_type(self) -> pa.DataType:
        return pa.list_(pa.field("item", pa.float32(), nullable=True), self.dim)

    def describe(self) -> str:
        return f"Vector({self.dim})"


@dataclass(frozen=True)
class BlobType(PropertyType):
    """``Blob``: a byte payload stored in a Lance blob column (``lance.blob.v2``).

    A cell holds managed bytes or a reference to an external object (:mod:`engine.blobs`); reads
    of the column give descriptors, and the bytes are fetched one cell at a time.
    """

    def arrow_type(self) -> pa.DataType:
        return LanceBlobType()

    def describe(self) -> str:
        return "Blob"


UNORDERED_TYPES = (ListType, VectorType, BlobType)
"""Types whose values are not compared as wholes: never a key, ``@unique`` or ``where`` operand."""


BASE64_PREFIX = "base64:"
EXTERNAL_SCHEMES = ("file", "s3")
"""URI schemes an external Blob object may be named by."""
_SPELLING = f'a Blob ("{BASE64_PREFIX}..." or a file:// or s3:// URI)'


class BlobSpellingError(ValueError):
    """A JSON value that is not a Blob spelling; the message says why."""


def parse_blob(value: Any) -> Blob:
    """The Lance :class:`Blob` a JSON value spells: bytes for ``base64:``, a whole-object
    reference (no range) for a URI. Raises :class:`BlobSpellingError`."""
    if not isinstance(value, str):
        shown = repr(value)
        raise BlobSpellingError(f"expected {_SPELLING}, got {shown if len(shown) <= 60 else shown[:57] + '...'}")
    if value.startswith(BASE64_PREFIX):
        try:
            return Blob.from_bytes(base64.b64decode(value[len(BASE64_PREFIX) :], validate=True))
        except (binascii.Error, ValueError):
            raise BlobSpellingError(f"the text after {BASE64_PREFIX!r} is not valid base64") from None
    parsed = urlparse(value)
    if parsed.scheme not in EXTERNAL_SCHEMES or not parsed.path.strip("/") or (parsed.scheme == "s3" and not parsed.netloc):
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise BlobSpellingError(f"expected {_SPELLING}, got {shown!r}")
    return Blob.from_uri(value)


def spell_bytes(data: bytes) -> str:
    """The JSON spelling of managed bytes."""
    return BASE64_PREFIX + base64.b64encode(data).decode("ascii")


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
            parsed = parsed.astimezone(dt.timezone.utc).replace(tzinfo=None)
    except (ValueError, OverflowError):
        raise InvalidValue(f"{_show(value)} is not a valid ISO-8601 DateTime") from None
    if parsed.microsecond % 1000:
        raise InvalidValue(f"{_show(value)} has sub-millisecond precision (DateTime stores ms)")
    return parsed


def export_value(ptype: PropertyType, value: Any) -> Any:
    """The JSON value of a stored (``to_pylist``) non-null ``value`` of ``ptype``; a Blob cell
    arrives already spelled (by :mod:`omnigraph.engine.ops.export`)."""
    if isinstance(ptype, ScalarType):
        return _export_scalar(ptype.name, value)
    if isinstance(ptype, ListType):
        return [None if item is None else _export_scalar(ptype.item.name, item) for item in value]
    if isinstance(ptype, VectorType):
        return [_shortest_float32(item) for item in value]
    return value


def _export_scalar(name: str, value: Any) -> Any:
    if name == "F32":
        return _shortest_float32(value)
    if name == "Date":
        return (value - EPOCH_DATE).days
    if name == "DateTime":
        return (value - EPOCH_DATETIME) // ONE_MS
    return value


def _shortest_float32(value: float) -> float:
    """The float64 nearest the shortest decimal that round-trips as ``value``'s float32."""
    return float(str(np.float32(value)))
