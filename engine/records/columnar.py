"""The fast path of JSONL parsing: one block of lines to physical Arrow tables, columnar.

:func:`parse_block` reads a block with ``pyarrow.json`` against an explicit schema per record
type (derived from the catalog, see :mod:`omnigraph.engine.records.columns`) and validates and converts the
columns with Arrow compute. It vouches for a result only when the row-by-row parser
(:func:`omnigraph.engine.records.parse.parse_lines`) would accept the same lines and produce the same rows, ids
and line numbers; in every other case it raises :class:`Declined`, and the caller uses the row
path, which produces the precise refusal. Duplicates across rows (ids, ``@unique`` values) are
not looked for here: the caller checks them over the whole input.

What makes a block decline (all rare in generated or exported files, all legal to decline):

- a non-blank line that does not start with ``{`` and end with ``}`` (optionally ``}\\r``), or
  a line count that differs from the number of records read (two objects on one line);
- invalid UTF-8, an escaped ASCII character (``\\u00XX``: it could spell a member name), or a
  ``type``/``edge``/``data``/``id`` member whose value is ``null`` (JSON null and absence read the
  same in Arrow, but the row path tells them apart);
- anything the reader refuses (malformed JSON, duplicate members, unknown members, wrong JSON
  types, out-of-range integers), an unknown type, a record with both or neither of
  ``type``/``edge``, every value :mod:`omnigraph.engine.records.columns` declines, and a value outside
  the type's ``@range``/``@check`` rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from omnigraph.engine.records.columns import DATE, Declined, coerce_column, compact, derive_ids, read_type
from omnigraph.engine.records.jsonl_blocks import JsonlBlock
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.ids import new_ulids
from omnigraph.engine.schema.rule_check import table_violations
from omnigraph.engine.schema.tables import TableDef

__all__ = ["Declined", "TableBatch", "parse_block", "read_schema"]

_OPEN, _CLOSE, _CR = ord("{"), ord("}"), ord("\r")
_SUSPICIOUS = r'\\u00[0-7]|"(?:type|edge|data|id)"\s*:\s*null'
_DISCRIMINATOR = pa.schema([pa.field("type", pa.utf8()), pa.field("edge", pa.utf8())])
_READ_BLOCK = 512 * 1024
"""``pyarrow.json``'s own block size inside one of our blocks (its unit of parallel parsing)."""


@dataclass(frozen=True)
class TableBatch:
    """Validated rows of one table: ``rows`` has the physical schema; ``lines`` (int64) gives
    each row's input line. Rows are in input order."""

    table_key: str
    rows: pa.Table
    lines: pa.Array


def read_schema(table: TableDef, text_dates: frozenset[str] = frozenset()) -> pa.Schema:
    """The ``pyarrow.json`` schema of one record type's lines (no other member is accepted);
    the Date properties named in ``text_dates`` are read as ``"YYYY-MM-DD"`` text."""
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
    """Indices of the block's non-blank lines; declines a line that is not one JSON object.

    Most blocks have no blank line: then counting ``}\\n{`` (and ``}\\r\\n{``) proves every
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
    """``payload`` (JSONL) read with ``schema``; the reader's block (its unit of parallel
    parsing) is widened to hold the longest line, which it cannot split. A payload of one block
    is parsed on the calling thread: there is nothing to parse in parallel, and handing it to
    Arrow's thread pool costs more than parsing it."""
    block = max(_READ_BLOCK, _longest_line(payload) + 2)
    options = pj.ReadOptions(use_threads=len(payload) > block, block_size=block)
    parse = pj.ParseOptions(explicit_schema=schema, newlines_in_values=False, unexpected_field_behavior=unexpected)
    try:
        return pj.read_json(pa.BufferReader(payload), read_options=options, parse_options=parse)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise Declined(f"pyarrow.json: {error}") from None


def _longest_line(payload: bytes) -> int:
    """The length of the longest line of ``payload`` if it is at least the reader's block,
    else 0 (found by jumping from one reader block's last newline to the next)."""
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
    """The table of one record, read with the standard library, and its Date properties
    spelled as strings there (the columns to read as text for its run of records)."""
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
    return table, frozenset(p.name for p in table.properties if p.type == DATE and isinstance(data.get(p.name), str))


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
    """Each record line as a binary value running to the next record line (newline and blank
    lines included), so that any selection of them, concatenated, is JSONL again."""
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

    def batch(self, with_pk: bool) -> TableBatch:
        arrays = {"id": self.ids, **self.columns}
        if self.ends is not None:
            arrays["src"], arrays["dst"] = self.ends
        schema = self.table.arrow_schema(with_pk)
        rows = pa.Table.from_arrays([compact(arrays[field.name]) for field in schema], schema=schema)
        return TableBatch(self.table.table_key, rows, pa.array(self.lines, pa.int64()))


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
        start += count
