"""Property types of the schema language, their Arrow storage types, and the JSON spelling of a Blob.

The hierarchy is closed: :class:`ScalarType`, :class:`ListType` (a list of scalars),
:class:`EnumType` (a string restricted to an allowed set), :class:`VectorType`
(``fixed_size_list<float32, n>``) and :class:`BlobType` (a Lance blob column). ``str(t)`` spells
a type as the schema language does.

A Blob value is spelled the same on input (load, ``.gq`` values) and on export, as a string
(:func:`parse_blob` reads it, :func:`spell_bytes` writes managed bytes):

* ``"base64:<standard base64>"``: managed bytes, stored in the table's blob column
  (``"base64:"`` alone is the empty blob);
* ``"file:///abs/path"`` or ``"s3://bucket/key"``: an external object. What is stored depends on
  the write (``docs/schema.md``): a keyed insert/upsert or a load append/merge copies the
  object's bytes into the table; a load overwrite keeps the URI as a reference.

Anything else (another type, another URI scheme, malformed base64) is refused
(:class:`BlobSpellingError`). Coercion reads nothing: whether an external object exists, and
its size, is settled by the write.
"""

from __future__ import annotations

import base64
import binascii
from abc import abstractmethod
from typing import Any
from urllib.parse import urlparse

import msgspec
import pyarrow as pa
from lance.blob import Blob
from lance.blob import BlobType as LanceBlobType

from omnigraph.engine.results import SCALAR_ARROW_ALIASES

SCALAR_ARROW_TYPES: dict[str, pa.DataType] = {name: pa.type_for_alias(alias) for name, alias in SCALAR_ARROW_ALIASES.items()}
"""Every scalar type name of the language, mapped to its Arrow type."""

INTEGER_RANGES: dict[str, tuple[int, int]] = {
    "I32": (-(2**31), 2**31 - 1),
    "I64": (-(2**63), 2**63 - 1),
    "U32": (0, 2**32 - 1),
    "U64": (0, 2**64 - 1),
}
"""Inclusive value range of each integer scalar type."""

FLOAT_SCALARS = frozenset({"F32", "F64"})


class PropertyType(msgspec.Struct, frozen=True):
    """Base of the property types, each a frozen Struct; only its subclasses are made."""

    @abstractmethod
    def arrow_type(self) -> pa.DataType:
        """The Arrow type a column of this property type is stored as."""

    @abstractmethod
    def describe(self) -> str:
        """The canonical schema-language spelling (used in messages and fingerprints)."""

    def __str__(self) -> str:
        return self.describe()


class ScalarType(PropertyType, frozen=True):
    """One of the names in :data:`SCALAR_ARROW_TYPES`."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in SCALAR_ARROW_TYPES:
            raise ValueError(f"unknown scalar type {self.name!r}")

    def arrow_type(self) -> pa.DataType:
        """The Arrow type :data:`SCALAR_ARROW_TYPES` maps the name to."""
        return SCALAR_ARROW_TYPES[self.name]

    def describe(self) -> str:
        """The type's name (``I64``, ``String``, ...)."""
        return self.name


class ListType(PropertyType, frozen=True):
    """``[T]``: a list of one scalar type; elements are nullable in Arrow."""

    item: ScalarType

    def arrow_type(self) -> pa.DataType:
        """A list of the item's Arrow type, items nullable."""
        return pa.list_(pa.field("item", self.item.arrow_type(), nullable=True))

    def describe(self) -> str:
        """``[T]``."""
        return f"[{self.item.describe()}]"


class EnumType(PropertyType, frozen=True):
    """``enum(a, b)``: stored as Utf8, values restricted to ``values`` (declaration order)."""

    values: tuple[str, ...]

    def arrow_type(self) -> pa.DataType:
        """Utf8: an enum value is stored as its string."""
        return pa.utf8()

    def describe(self) -> str:
        """``enum(a, b)``, values in declaration order."""
        return f"enum({', '.join(self.values)})"


class VectorType(PropertyType, frozen=True):
    """``Vector(n)``: exactly ``dim`` float32 numbers."""

    dim: int

    def arrow_type(self) -> pa.DataType:
        """``fixed_size_list<float32, dim>``."""
        return pa.list_(pa.field("item", pa.float32(), nullable=True), self.dim)

    def describe(self) -> str:
        """``Vector(n)``."""
        return f"Vector({self.dim})"


class BlobType(PropertyType, frozen=True):
    """``Blob``: a byte payload stored in a Lance blob column (``lance.blob.v2``).

    A cell holds managed bytes or a reference to an external object
    (:mod:`omnigraph.engine.storage.blobs`); reads of the column give descriptors, and the bytes
    are fetched one cell at a time.
    """

    def arrow_type(self) -> pa.DataType:
        """Lance's blob extension type."""
        return LanceBlobType()

    def describe(self) -> str:
        """``Blob``."""
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
    """The Lance :class:`Blob` a JSON value spells (see the module docstring).

    Bytes for ``base64:``, a whole-object reference (no range) for a URI. Raises
    :class:`BlobSpellingError`.
    """
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
