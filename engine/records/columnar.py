r"""The fast path of JSONL parsing: one block of lines to physical Arrow tables, columnar.

:func:`parse_block` reads a block with ``pyarrow.json`` against an explicit schema per record
type (derived from the catalog: :func:`read_schema`, :func:`read_type`) and validates and
converts the columns with Arrow compute: :func:`coerce_column` is the columnar counterpart of
the value coercion of :mod:`omnigraph.engine.schema.values`, :func:`derive_ids` that of
:func:`omnigraph.engine.schema.ids.derive_node_id`. It vouches for a result only when the
row-by-row parser (:func:`omnigraph.engine.records.parse.parse_lines`) would accept the same
lines and produce the same rows, ids and line numbers; in every other case it raises
:class:`Declined`, and the caller hands the input to the row path, which produces the precise
refusal (or the same rows). Nothing here refuses a value itself: where the row-by-row rules
would refuse a value, or where this module cannot prove it would reach the same result, it
declines. Duplicates across rows (ids, ``@unique`` values) are not looked for here: the caller
checks them over the whole input.

Read types (what ``pyarrow.json`` is told to expect) are chosen so that JSON the row path
refuses is refused by the reader too, or shows in the column: integers are read as their exact
Arrow type (a float, a bool or an out-of-range value fails the read); floats as float64 (a JSON
integer is accepted, as the row path does; F32 is then rounded from float64, as the row path
does); Date and DateTime as int64 (epoch days / ms), range-checked here, except a Date or
DateTime property the caller reads as text (``"YYYY-MM-DD"``, and for DateTime only the spelling
export writes, ``"2024-01-31T10:00:00.000Z"``: both checked by a pattern and Arrow's strict ISO
cast, then range-checked; other ISO DateTime spellings are left to the row path); enums as Utf8, checked against their values here; Blob
properties as Utf8, and always declined (the row path decodes their spellings).

What makes a block decline (all rare in generated or exported files, all legal to decline):

- a non-blank line that does not start with ``{`` and end with ``}`` (optionally ``}\r``), or
  a line count that differs from the number of records read (two objects on one line);
- invalid UTF-8, an escaped ASCII character (``\u00XX``: it could spell a member name), or a
  ``type``/``edge``/``data``/``id`` member whose value is ``null`` (JSON null and absence read the
  same in Arrow, but the row path tells them apart);
- anything the reader refuses (malformed JSON, duplicate members, unknown members, wrong JSON
  types, out-of-range integers), an unknown type, a record with both or neither of
  ``type``/``edge``, every value the column coercions decline, and a value outside the type's
  ``@range``/``@check`` rules.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from omnigraph.engine.records.jsonl_blocks import JsonlBlock
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.ids import EPOCH_DATE, EPOCH_DATETIME, ONE_MS, new_ulids
from omnigraph.engine.schema.tables import Property, TableDef
from omnigraph.engine.schema.types import FLOAT_SCALARS, BlobType, EnumType, ListType, PropertyType, ScalarType, VectorType
from omnigraph.engine.schema.values import table_violations

__all__ = ["Declined", "TableBatch", "parse_block", "read_schema"]


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
DATETIME = ScalarType("DateTime")
"""The DateTime scalar type (a column the caller may read as export's ISO 8601 text)."""
_DATE_TEXT = r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\z"
"""The row path's ``YYYY-MM-DD`` pattern (:mod:`omnigraph.engine.schema.values`)."""
_DATETIME_TEXT = r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{3}Z\z"
"""The one ISO 8601 DateTime spelling the fast path reads (export's, UTC with milliseconds);
any other the row path reads (:func:`omnigraph.engine.schema.values.iso_datetime`)."""


def read_type(ptype: PropertyType, as_text: bool = False) -> pa.DataType:
    """The Arrow type ``pyarrow.json`` reads a property of ``ptype`` as (see the module docstring).

    ``as_text`` reads a Date property as its ``"YYYY-MM-DD"`` spelling, a DateTime as its ISO 8601 one.
    """
    if as_text and ptype in (DATE, DATETIME):
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
    if type_name == "DateTime" and pa.types.is_string(column.type):
        if pc.all(pc.match_substring_regex(column, _DATETIME_TEXT)).as_py() is False:
            raise Declined(f"{name}: a DateTime string not spelled as export spells it")
        try:
            instants = pc.cast(pc.utf8_slice_codeunits(column, 0, 23), pa.timestamp("ms"))
        except pa.ArrowInvalid:
            raise Declined(f"{name}: an invalid DateTime") from None
        _in_range(pc.cast(instants, pa.int64()), _DATETIME_MS, name)
        return instants
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
    a composite key member holding a character that JSON would escape, and an empty string
    member (refused by the row parser, with its line).
    """
    assert table.key is not None
    for name in table.key:
        column = columns[name]
        if pa.types.is_string(column.type) and pc.any(pc.equal(pc.binary_length(column), 0)).as_py():
            raise Declined(f"key member {name}: an empty string")
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
    by its payload sizes, :mod:`omnigraph.engine.ops.blobs`) is returned as it is.
    """
    if isinstance(array.type, pa.ExtensionType):
        return array
    children = None
    if pa.types.is_list(array.type) or pa.types.is_fixed_size_list(array.type):
        children = [compact(array.values)]
    own = array.buffers()[: array.type.num_buffers]
    buffers = [own[0] if array.null_count else None, *own[1:]]
    return pa.Array.from_buffers(array.type, len(array), buffers, offset=array.offset, children=children)


_OPEN, _CLOSE, _CR = ord("{"), ord("}"), ord("\r")
_SUSPICIOUS = r'\\u00[0-7]|"(?:type|edge|data|id)"\s*:\s*null'
_DISCRIMINATOR = pa.schema([pa.field("type", pa.utf8()), pa.field("edge", pa.utf8())])
_READ_BLOCK = 512 * 1024
"""``pyarrow.json``'s own block size inside one of our blocks (its unit of parallel parsing)."""


class TableBatch(msgspec.Struct, frozen=True):
    """Validated rows of one table, in input order.

    ``rows`` has the physical schema; ``lines`` (int64) gives each row's input line;
    ``generated`` (bool, or None for none) marks the rows whose id the reader minted because the
    input named none (unkeyed nodes and edges without ``data.id``).
    """

    table_key: str
    rows: pa.Table
    lines: pa.Array
    generated: pa.Array | None = None


def read_schema(table: TableDef, text_dates: frozenset[str] = frozenset()) -> pa.Schema:
    """The ``pyarrow.json`` schema of one record type's lines (no other member is accepted).

    The Date and DateTime properties named in ``text_dates`` are read as text (:func:`read_type`).
    """
    props = [pa.field(p.name, read_type(p.type, p.name in text_dates)) for p in table.properties]
    data = pa.struct([pa.field("id", pa.utf8()), *props])
    if table.kind == "node":
        return pa.schema([pa.field("type", pa.utf8()), pa.field("data", data)])
    return pa.schema([pa.field(name, pa.utf8()) for name in ("edge", "from", "to")] + [pa.field("data", data)])


def parse_block(block: JsonlBlock, catalog: Catalog, with_pk: bool) -> list[TableBatch]:
    """The block's records as one :class:`TableBatch` per table (in table-key order).

    Raises :class:`Declined` when the fast path does not vouch for the block (module docstring).
    Generated ids are minted in line order across the block's tables, as the row path does.
    """
    records = _record_lines(block)
    if not len(records):
        return []
    _guard_text(block)
    pending = [_convert(table, read, lines) for table, read, lines in _read_groups(block, records, catalog)]
    _generate_ids(pending)
    batches = sorted((item.batch(with_pk) for item in pending), key=lambda batch: batch.table_key)
    for batch, table in ((batch, catalog.table(batch.table_key)) for batch in batches):
        if table.has_value_rules and table_violations(table, batch.rows):
            raise Declined("a value outside a @range or @check rule")
    return batches


def _record_lines(block: JsonlBlock) -> np.ndarray:
    r"""Indices of the block's non-blank lines; declines a line that is not one JSON object.

    Most blocks have no blank line: then counting ``}\n{`` (and ``}\r\n{``) proves every
    line is ``{...}`` without looking at each line; otherwise each line's first and last byte
    is checked.
    """
    data = block.data
    terminated = data.endswith(b"\n")
    inner = block.line_count - 1
    closed_last = data.endswith((b"}\n", b"}\r\n")) if terminated else data.endswith((b"}", b"}\r"))
    if data.startswith(b"{") and closed_last:
        joined = data.count(b"}\n{")
        if joined == inner or joined + data.count(b"}\r\n{") == inner:
            return np.arange(block.line_count, dtype=np.int64)
    starts, ends = block.bounds
    nonblank = np.flatnonzero(ends > starts)
    starts, ends = starts[nonblank], ends[nonblank]
    raw = np.frombuffer(data, dtype=np.uint8)
    last = raw[ends - 1]
    before_last = raw[np.maximum(ends - 2, starts)]
    closed = (last == _CLOSE) | ((last == _CR) & (ends - starts >= 3) & (before_last == _CLOSE))
    if not np.all((raw[starts] == _OPEN) & closed):
        raise Declined("a line that is not a single JSON object")
    return nonblank


def _guard_text(block: JsonlBlock) -> None:
    """Declines invalid UTF-8, escaped ASCII and ``null`` for a member Arrow reads as absent."""
    whole = pa.Array.from_buffers(
        pa.large_utf8(), 1, [None, pa.py_buffer(np.array([0, len(block.data)], dtype=np.int64)), pa.py_buffer(block.data)]
    )
    try:
        whole.validate(full=True)
    except pa.ArrowInvalid:
        raise Declined("invalid UTF-8") from None
    if block.data.find(b"\\") < 0 and block.data.find(b"null") < 0:
        return  # neither an escape nor a null anywhere: nothing for the pattern to find
    if pc.any(pc.match_substring_regex(whole, _SUSPICIOUS)).as_py():
        raise Declined("an escaped ASCII character or a null type/edge/data/id member")


def _read(payload: bytes, schema: pa.Schema, unexpected: str = "error") -> pa.Table:
    """``payload`` (JSONL) read with ``schema``.

    The reader's block (its unit of parallel parsing) is widened to hold the longest line, which
    it cannot split. A payload of one block is parsed on the calling thread: there is nothing to
    parse in parallel, and handing it to Arrow's thread pool costs more than parsing it.
    """
    block = max(_READ_BLOCK, _longest_line(payload) + 2)
    options = pj.ReadOptions(use_threads=len(payload) > block, block_size=block)
    parse = pj.ParseOptions(explicit_schema=schema, newlines_in_values=False, unexpected_field_behavior=unexpected)
    try:
        return pj.read_json(pa.BufferReader(payload), read_options=options, parse_options=parse)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise Declined(f"pyarrow.json: {error}") from None


def _longest_line(payload: bytes) -> int:
    """The length of the longest line of ``payload`` if it is at least the reader's block, else 0.

    Found by jumping from one reader block's last newline to the next.
    """
    position, longest = 0, 0
    while len(payload) - position > _READ_BLOCK:
        cut = payload.rfind(b"\n", position, position + _READ_BLOCK)
        if cut < 0:  # a line of at least a reader block
            cut = payload.find(b"\n", position)
            cut = len(payload) if cut < 0 else cut
            longest = max(longest, cut - position)
        position = cut + 1
    return longest


def _table_of(catalog: Catalog, kind: str, name: str) -> TableDef:
    table_key = f"{kind}:{name}"
    if not (catalog.has_node(name) if kind == "node" else catalog.has_edge(name)):
        raise Declined(f"unknown {kind} type")
    return catalog.table(table_key)


def _sample(text: bytes, catalog: Catalog) -> tuple[TableDef, frozenset[str]]:
    """The table of one record, read with the standard library, and its Date and DateTime properties spelled as strings.

    Those are the columns to read as text for its run of records.
    """
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        raise Declined("a record that is not JSON (or nested too deeply)") from None
    if not isinstance(record, dict) or ("type" in record) == ("edge" in record):
        raise Declined("a record without exactly one of type/edge")
    kind, member = ("node", "type") if "type" in record else ("edge", "edge")
    if not isinstance(record[member], str):
        raise Declined("a type name that is not a string")
    table = _table_of(catalog, kind, record[member])
    data = record.get("data")
    if not isinstance(data, dict):
        return table, frozenset()
    texts = frozenset(p.name for p in table.properties if p.type in (DATE, DATETIME) and isinstance(data.get(p.name), str))
    return table, texts


def _read_groups(block: JsonlBlock, records: np.ndarray, catalog: Catalog) -> list[tuple[TableDef, pa.Table, np.ndarray]]:
    """``(table, records read with its schema, their line numbers)`` per table of the block.

    Tries the table of the first record for the whole block (files are mostly runs of one
    type); otherwise reads the type members first and each table's lines on their own.
    """
    lines = block.line_numbers()[records]
    whole = block.data
    first = block.first() if records[0] == 0 else block.lines()[int(records[0])]
    guess, text_dates = _sample(first, catalog)
    try:
        read = _read(whole, read_schema(guess, text_dates))
    except Declined:
        read = None
    if read is not None and read.num_rows == len(records) and _all_named(read, guess):
        return [(guess, read, lines)]
    kinds = _read(whole, _DISCRIMINATOR, unexpected="ignore")
    if kinds.num_rows != len(records):
        raise Declined("records and lines do not match")
    node_name, edge_name = kinds.column("type").combine_chunks(), kinds.column("edge").combine_chunks()
    if not pc.all(pc.xor(node_name.is_valid(), edge_name.is_valid())).as_py():
        raise Declined("a record with both or neither of type/edge")
    keys = pc.if_else(
        node_name.is_valid(),
        pc.binary_join_element_wise("node:", node_name, ""),
        pc.binary_join_element_wise("edge:", edge_name, ""),
    )
    spans = _record_spans(block, records)
    groups = []
    for table_key in pc.unique(keys).sort().to_pylist():
        mask = pc.equal(keys, table_key)
        chosen = spans.filter(mask)
        table, text_dates = _sample(chosen[0].as_py(), catalog)
        if table.table_key != table_key:
            raise Declined("records and type members do not match")
        offsets = np.frombuffer(chosen.buffers()[1], dtype=np.int64)[chosen.offset : chosen.offset + len(chosen) + 1]
        payload = chosen.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0])).to_pybytes()
        read = _read(payload, read_schema(table, text_dates))
        if read.num_rows != len(chosen) or not _all_named(read, table):
            raise Declined("records and lines do not match")
        groups.append((table, read, lines[mask.to_numpy(zero_copy_only=False)]))
    return groups


def _record_spans(block: JsonlBlock, records: np.ndarray) -> pa.Array:
    """Each record line as a binary value running to the next record line.

    Newline and blank lines are included, so that any selection of them, concatenated, is JSONL
    again.
    """
    offsets = np.append(block.bounds[0][records], np.int64(len(block.data)))
    return pa.Array.from_buffers(pa.large_binary(), len(records), [None, pa.py_buffer(offsets.astype(np.int64)), pa.py_buffer(block.data)])


def _all_named(read: pa.Table, table: TableDef) -> bool:
    """Every record read names ``table`` in its discriminating member."""
    column = read.column("type" if table.kind == "node" else "edge")
    return column.null_count == 0 and bool(pc.all(pc.equal(column, table.type_name)).as_py() is not False)


@dataclass
class _Pending:
    """One table's converted columns; ``ids`` may hold nulls where an id is to be generated."""

    table: TableDef
    ids: pa.Array
    ends: tuple[pa.Array, pa.Array] | None
    columns: dict[str, pa.Array]
    lines: np.ndarray
    generated: pa.Array | None = None

    def batch(self, with_pk: bool) -> TableBatch:
        arrays = {"id": self.ids, **self.columns}
        if self.ends is not None:
            arrays["src"], arrays["dst"] = self.ends
        schema = self.table.arrow_schema(with_pk)
        rows = pa.Table.from_arrays([compact(arrays[field.name]) for field in schema], schema=schema)
        return TableBatch(self.table.table_key, rows, pa.array(self.lines, pa.int64()), self.generated)


def _convert(table: TableDef, read: pa.Table, lines: np.ndarray) -> _Pending:
    data = read.column("data").combine_chunks()
    fields = dict(zip((field.name for field in data.type), data.flatten(), strict=True))
    explicit = fields["id"]
    if pc.any(pc.equal(pc.binary_length(explicit), 0)).as_py():
        raise Declined("an empty data.id")
    columns = {prop.name: coerce_column(prop, fields[prop.name]) for prop in table.properties}
    ends = None
    if table.kind == "edge":
        src, dst = read.column("from").combine_chunks(), read.column("to").combine_chunks()
        for end in (src, dst):
            if end.null_count or pc.any(pc.equal(pc.binary_length(end), 0)).as_py():
                raise Declined("a missing or empty endpoint")
        ends = (src, dst)
    if table.key is None:
        return _Pending(table, explicit, ends, columns, lines)
    derived = derive_ids(table, columns)
    if explicit.null_count < len(explicit) and not pc.all(pc.or_kleene(explicit.is_null(), pc.equal(explicit, derived))).as_py():
        raise Declined("a data.id that differs from the key")
    return _Pending(table, derived, ends, columns, lines)


def _generate_ids(pending: list[_Pending]) -> None:
    """Fill the missing ids of unkeyed tables with ULIDs minted in input line order."""
    wanting = [(item, item.ids.is_null()) for item in pending if item.ids.null_count]
    if not wanting:
        return
    lines = np.concatenate([item.lines[mask.to_numpy(zero_copy_only=False)] for item, mask in wanting])
    rank = np.empty(len(lines), dtype=np.int64)
    rank[np.argsort(lines, kind="stable")] = np.arange(len(lines))
    ulids = new_ulids(len(lines))
    start = 0
    for item, mask in wanting:
        count = item.ids.null_count
        item.ids = pc.replace_with_mask(item.ids, mask, ulids.take(pa.array(rank[start : start + count])))
        item.generated = mask
        start += count
