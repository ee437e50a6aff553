"""Node ids: canonical key strings and ULIDs.

A keyed node's id is derived from its typed key value(s):

- String: verbatim; Bool: ``true``/``false``; integers: decimal;
- Date: epoch days in decimal (``"19723"``); DateTime: epoch milliseconds in decimal;
- F64: the shortest string that round-trips to the same float64, positional (never an
  exponent), with no trailing ``.0`` (``1.25``, ``1``, ``100000000000000000000``, ``0.0000001``);
  ``-0.0`` is ``"0"``; NaN and infinities are refused;
- F32: the same, but shortest among the strings that round-trip to the same *float32* (so the
  float32 nearest 0.1 is ``"0.1"``, not ``"0.10000000149011612"``). Both use numpy's Dragon4
  ``format_float_positional(unique=True, trim="-")`` on ``numpy.float64``/``numpy.float32``.

A key member's value must not be the empty string (:func:`empty_key_member`): an id must be
non-empty. A single ``@key`` gives its canonical string; a composite ``@key(p, q)`` gives the compact JSON
array of its members' canonical strings ordered by property name (byte order), non-ASCII kept.
Enum keys are canonicalised as strings.

Unkeyed nodes and edges get :func:`new_ulid` ids (or a block of :func:`new_ulids`) unless the
input names one.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import threading
import time
from typing import Any

import numpy as np
import pyarrow as pa

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import INTEGER_RANGES, EnumType, ScalarType

EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH_DATETIME = dt.datetime(1970, 1, 1)
ONE_MS = dt.timedelta(milliseconds=1)


def canonical_float(value: float, single: bool) -> str:
    """Shortest positional round-trip spelling of a finite float (float32 when ``single``)."""
    if not math.isfinite(value):
        raise BadRequest(f"a key value must be finite, got {value!r}", {"value": repr(value)})
    if value == 0:
        return "0"
    with np.errstate(over="ignore"):
        number = np.float32(value) if single else np.float64(value)
    if not np.isfinite(number):
        raise BadRequest(f"{value!r} is out of range for F32", {"value": repr(value)})
    return np.format_float_positional(number, unique=True, trim="-")


def canonical_scalar(scalar_type_name: str, value: Any) -> str:
    """The canonical key string of ``value``, an already-coerced value of the scalar type.

    Coerced values are ``str``, ``bool``, ``int``, ``float``, ``datetime.date`` (Date) and naive
    UTC ``datetime.datetime`` (DateTime; an aware one is converted to UTC). A value of the wrong
    Python type, an out-of-range integer or a non-finite float raises :class:`BadRequest`.
    """
    name = ScalarType(scalar_type_name).name
    if name == "String" and isinstance(value, str):
        return value
    if name == "Bool" and isinstance(value, bool):
        return "true" if value else "false"
    if name in INTEGER_RANGES and isinstance(value, int) and not isinstance(value, bool):
        low, high = INTEGER_RANGES[name]
        if low <= value <= high:
            return str(value)
    if name in ("F32", "F64") and isinstance(value, float):
        return canonical_float(value, single=name == "F32")
    if name == "Date" and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return str((value - EPOCH_DATE).days)
    if name == "DateTime" and isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return str((value - EPOCH_DATETIME) // ONE_MS)
    raise BadRequest(f"{value!r} is not a valid {name} key value", {"type": name, "value": repr(value)})


def empty_key_member(table: TableDef, data: dict[str, Any]) -> str | None:
    """The first ``@key`` member (in key order) whose value in ``data`` is ``""``, else None.

    Writers refuse such a row (``bad_request`` naming the member): its id would be empty.
    """
    for name in table.key or ():
        if data.get(name) == "":
            return name
    return None


def derive_node_id(table: TableDef, data: dict[str, Any]) -> str:
    """The id of a keyed node whose coerced property values are ``data``.

    Refuses (:class:`BadRequest`) an unkeyed table and a missing or null key member.
    """
    if table.key is None:
        raise BadRequest(f"node type {table.type_name} has no @key", {"type_name": table.type_name})
    parts: dict[str, str] = {}
    for name in table.key:
        value = data.get(name)
        if value is None:
            raise BadRequest(
                f"key property {name!r} of {table.type_name} is missing",
                {"type_name": table.type_name, "property": name},
            )
        ptype = table.property(name).type
        scalar = "String" if isinstance(ptype, EnumType) else ptype.describe()
        parts[name] = canonical_scalar(scalar, value)
    if len(table.key) == 1:
        return parts[table.key[0]]
    ordered = [parts[name] for name in sorted(parts, key=lambda n: n.encode("utf-8"))]
    return json.dumps(ordered, separators=(",", ":"), ensure_ascii=False)


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_RANDOM_BITS = 80
_ulid_lock = threading.Lock()
_ulid_last: tuple[int, int] = (0, 0)


def _next_ulid_state() -> tuple[int, int]:
    """The (ms, randomness) of the next ULID; the caller holds ``_ulid_lock``."""
    millis = time.time_ns() // 1_000_000
    last_millis, last_random = _ulid_last
    if millis <= last_millis:
        millis, randomness = last_millis, last_random + 1
        if randomness >> _RANDOM_BITS:
            millis, randomness = millis + 1, 0
        return millis, randomness
    return millis, int.from_bytes(os.urandom(10), "big")


def _encode_ulid(millis: int, randomness: int) -> str:
    value = (millis << _RANDOM_BITS) | randomness
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def new_ulid() -> str:
    """A 26-character Crockford base32 ULID (48-bit ms timestamp, 80 random bits).

    Monotonic within a process: a ULID minted in the same millisecond as (or, if the clock went
    back, before) the previous one reuses its timestamp and increments its random part.
    """
    global _ulid_last
    with _ulid_lock:
        _ulid_last = _next_ulid_state()
        millis, randomness = _ulid_last
    return _encode_ulid(millis, randomness)


_CROCKFORD_BYTES = np.frombuffer(_CROCKFORD.encode("ascii"), dtype=np.uint8)
_ULID_CHARS = 26
_LOW_BITS = 64


def new_ulids(count: int) -> pa.StringArray:
    """``count`` ULIDs, each greater than the previous one, as a Utf8 array.

    The same sequence as ``count`` calls of :func:`new_ulid` made within one millisecond: one
    timestamp, consecutive random parts (a random part that would pass 80 bits moves to the
    next millisecond, as :func:`new_ulid` does). Later :func:`new_ulid` calls continue after the
    last one. Encoded with numpy, without a Python loop over the ids.
    """
    global _ulid_last
    if count <= 0:
        return pa.array([], pa.utf8())
    with _ulid_lock:
        millis, first = _next_ulid_state()
        fits = min(count, (1 << _RANDOM_BITS) - first)
        _ulid_last = (millis, first + fits - 1) if fits == count else (millis + 1, count - fits - 1)
    parts = [_ulid_run(millis, first, fits)]
    if fits < count:
        parts.append(_ulid_run(millis + 1, 0, count - fits))
    chars = np.concatenate(parts)
    offsets = np.arange(0, (count + 1) * _ULID_CHARS, _ULID_CHARS, dtype=np.int32)
    return pa.Array.from_buffers(pa.utf8(), count, [None, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes())])


def _ulid_run(millis: int, first: int, count: int) -> np.ndarray:
    """The characters (uint8, ``count`` x 26 flattened) of ULIDs ``millis``/``first + i``."""
    prefix = np.frombuffer(_encode_ulid(millis, first)[:10].encode("ascii"), dtype=np.uint8)
    low_start = first & ((1 << _LOW_BITS) - 1)
    steps = np.arange(count, dtype=np.uint64)
    low = np.uint64(low_start) + steps  # wraps modulo 2**64; the carry goes to the high part
    high = np.uint64(first >> _LOW_BITS) + (low < np.uint64(low_start)).astype(np.uint64)
    chars = np.empty((count, _ULID_CHARS), dtype=np.uint8)
    chars[:, :10] = prefix
    # The 80 random bits are characters 10..25, 5 bits each: bits 79..75 first.
    for index in range(16):
        shift = 75 - 5 * index
        if shift >= _LOW_BITS:
            digit = high >> np.uint64(shift - _LOW_BITS)
        elif shift + 5 <= _LOW_BITS:
            digit = low >> np.uint64(shift)
        else:  # the character that straddles the high and low parts
            digit = (high << np.uint64(_LOW_BITS - shift)) | (low >> np.uint64(shift))
        chars[:, 10 + index] = _CROCKFORD_BYTES[(digit & np.uint64(31)).astype(np.intp)]
    return chars.reshape(-1)
