"""What :meth:`omnigraph.Graph.load` accepts, turned into the JSONL input the engine validates.

Every form goes through the same parser and checks as ``omnigraph load`` (so the same data is
refused with the same error, line numbers included):

- a path (``str`` or :class:`os.PathLike`): a JSONL file, read in blocks;
- ``bytes`` (or ``bytearray``/``memoryview``): JSONL content;
- a binary file object (anything with ``read``): JSONL content, read in blocks;
- a mapping from a node or edge type name to a ``pyarrow.Table``: node tables have the
  properties as columns (``id`` optional: unkeyed nodes may name theirs); edge tables have ``src``
  and ``dst`` (the endpoint ids) and the properties (``id`` optional). Null values are left out;
- any other iterable: record dicts in the JSONL shape (``{"type": T, "data": {...}}`` or
  ``{"edge": E, "from": A, "to": B, "data": {...}}``).

Dates become epoch days, date-times epoch milliseconds and bytes (a Blob's managed payload)
``"base64:..."``, as in the JSONL format. In Arrow tables, a float value of an integer property
(or list element) that is a whole number becomes that integer (``31.0`` -> ``31``: pandas turns
an integer column with a null into floats); any other float there (``31.5``, NaN) is left as it
is, and refused as a JSONL ``31.5`` is.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Union, cast

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.schema.types import spell_bytes

if TYPE_CHECKING:
    import pyarrow

__all__ = ["LoadData", "open_data_file", "open_data_stream", "opened_data"]

LoadData = Union[
    str, "os.PathLike[str]", bytes, bytearray, memoryview, IO[bytes], Mapping[str, "pyarrow.Table"], Iterable[Mapping[str, Any]]
]
"""Every form :meth:`omnigraph.Graph.load` accepts (see the module docstring)."""

PIPE_COPY_BYTES = 1 << 20
_EPOCH = dt.date(1970, 1, 1)


def open_data_file(path: str, what: str = "data file") -> BinaryIO:
    """``path`` opened for binary reading (the caller closes it).

    A pipe (``/dev/stdin``, a process substitution) is first copied to an anonymous temporary file,
    because a refused record makes the load read its input again from the start to name the first
    refused line.

    Raises:
        BadRequest: the file cannot be opened or read.
    """
    try:
        return open_data_stream(open(path, "rb"))
    except OSError as error:
        raise BadRequest(f"cannot read {what} {path!r}: {error.strerror}", {"path": path}) from error


def open_data_stream(stream: BinaryIO) -> BinaryIO:
    """``stream`` ready for a load, which may read it twice (the caller closes what is returned).

    A seekable stream is returned as it is; any other (standard input, a pipe) is copied to an
    anonymous temporary file first, and closed. A stream that cannot be read raises the
    ``OSError`` of its read (:func:`open_data_file` turns that into ``bad_request``).
    """
    if stream.seekable():
        return stream
    with stream:
        copy = tempfile.TemporaryFile(prefix="omnigraph-load-")  # noqa: SIM115 - the caller closes it
        shutil.copyfileobj(stream, copy, PIPE_COPY_BYTES)
    copy.seek(0)
    return copy


def _json_value(value: Any) -> Any:
    """The ``json.dumps`` default: dates as epoch days, date-times as epoch milliseconds, bytes as ``base64:``.

    The ``base64:`` spelling of bytes is that of a Blob's managed bytes.
    """
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return round(value.timestamp() * 1000)
    if isinstance(value, dt.date):
        return (value - _EPOCH).days
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return spell_bytes(bytes(value))
    raise TypeError(f"a value of type {type(value).__name__} cannot be loaded: {value!r}")


def _line(record: Any, number: int) -> bytes:
    if not isinstance(record, Mapping):
        raise BadRequest(f"record {number}: expected a dict, got {type(record).__name__}", {"record": number})
    try:
        return json.dumps(dict(record), default=_json_value, ensure_ascii=False).encode("utf-8") + b"\n"
    except (TypeError, ValueError) as error:
        raise BadRequest(f"record {number}: {error}", {"record": number}) from None


def _whole(value: Any) -> Any:
    """A float that is a whole number as its integer (list elements too); anything else as it is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_whole(item) for item in value]
    return value


def _table_records(
    tables: Mapping[str, pyarrow.Table], edge_types: frozenset[str], integers: Mapping[str, frozenset[str]]
) -> Iterator[dict[str, Any]]:
    for type_name, table in tables.items():
        whole = integers.get(type_name, frozenset())
        for row in table.to_pylist():
            data = {key: _whole(value) if key in whole else value for key, value in row.items() if value is not None}
            if type_name in edge_types:
                yield {"edge": type_name, "from": data.pop("src", None), "to": data.pop("dst", None), "data": data}
            else:
                yield {"type": type_name, "data": data}


def _spooled(records: Iterable[Any]) -> BinaryIO:
    """``records`` as JSONL in an anonymous temporary file (bounded memory for long iterables)."""
    spool = tempfile.TemporaryFile(prefix="omnigraph-load-")  # noqa: SIM115 - closed by opened_data
    try:
        for number, record in enumerate(records, start=1):
            spool.write(_line(record, number))
        spool.seek(0)
        return spool
    except BaseException:
        spool.close()
        raise


@contextmanager
def opened_data(
    data: LoadData, edge_types: frozenset[str], integers: Mapping[str, frozenset[str]] | None = None
) -> Iterator[bytes | BinaryIO]:
    """``data`` as JSONL bytes or a seekable binary stream, for the block reader.

    Anything this opens is closed when the block ends. ``edge_types`` tells edge tables from node
    tables; ``integers`` names, per type, the integer properties (scalars and lists) whose
    whole-number floats an Arrow table may carry (module docstring).

    Raises:
        BadRequest: a path that cannot be read, a record that is not a dict or holds a value with
            no JSON form, or a table mapping whose value is not a ``pyarrow.Table``.
    """
    if isinstance(data, bytes | bytearray | memoryview):
        yield bytes(data)
        return
    if isinstance(data, str | os.PathLike):
        with open_data_file(os.fspath(data)) as stream:
            yield stream
        return
    if hasattr(data, "read"):  # duck-typed: anything with ``read`` is the binary file object of LoadData
        yield cast("BinaryIO", data)
        return
    if isinstance(data, Mapping):
        for type_name, table in data.items():
            if not hasattr(table, "to_pylist") or not hasattr(table, "schema"):
                raise BadRequest(f"the value for type {type_name!r} is not a pyarrow.Table", {"type": type_name})
        records: Iterable[Any] = _table_records(data, edge_types, integers or {})
    else:
        records = data
    with _spooled(records) as spool:
        yield spool
