"""[omnigraph.engine.records.read]
JSONL input cut into bounded blocks of whole lines, each line with its number.

The line rules are those of :func:`omnigraph.engine.records.parse.parse_jsonl`: lines are split on ``\n`` and
numbered from 1, a final newline does not start a line, and a UTF-8 byte-order mark at the very
start of the input is not part of line 1. A block holds whole lines only; it is about
``block_bytes`` long (longer only when one line is). The input is bytes already in memory or a
binary file object read ``block_bytes`` at a time, so a file is never held in memory whole.


[omnigraph.engine.records.read]
Read and validate a whole JSONL input into a :class:`RecordSet`: columnar first, rows if need be.

:func:`read_records` accepts exactly what :func:`omnigraph.engine.records.parse.parse_jsonl` accepts, yields
the same rows, ids (generated ones aside, which are fresh ULIDs in input line order either way)
and line numbers, and refuses with the same error. It reads the input in bounded blocks
(:mod:`omnigraph.engine.records.read`):

1. each block goes through the columnar fast path (:func:`omnigraph.engine.records.columnar.parse_block`);
2. a block the fast path declines is parsed row by row (:func:`omnigraph.engine.records.parse.parse_lines`);
3. if that refuses a line, or once every block is in, some table repeats an id or an
   ``@unique`` value, the whole input is parsed row by row from its start, which raises the
   first refusal of the file exactly as ``parse_jsonl`` does.

Memory: one block at a time, plus the :class:`RecordSet` (rows spooled within a budget).

"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.records.columnar import Declined, TableBatch, parse_block
from omnigraph.engine.records.parse import ParsedFile, parse_jsonl, parse_lines, rows_to_arrow
from omnigraph.engine.records.record_set import RecordSet, RowSpool
from omnigraph.engine.schema.catalog import Catalog

JsonlSource = bytes | BinaryIO
"""JSONL input: the bytes of a document, or a readable (and, for the row path, seekable) binary file."""

BLOCK_BYTES = 2 * 1024 * 1024
BOM = b"\xef\xbb\xbf"
NEWLINE = 10


@dataclass(frozen=True)
class JsonlBlock:
    """Consecutive whole lines of the input: line ``i`` of ``data`` is line ``first_line + i``.

    ``data`` ends with ``\\n`` unless it holds the input's last line and that line has none.
    """

    data: bytes
    first_line: int
    line_count: int

    @functools.cached_property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """int64 byte offsets of each line's start and end (the end excludes the ``\\n``)."""
        newlines = np.flatnonzero(np.frombuffer(self.data, dtype=np.uint8) == NEWLINE).astype(np.int64)
        ends = newlines if len(newlines) == self.line_count else np.append(newlines, np.int64(len(self.data)))
        starts = np.concatenate([np.zeros(1, dtype=np.int64), newlines + 1])[: len(ends)]
        return starts, ends

    def line_numbers(self) -> np.ndarray:
        """The input line number of every line of the block (int64)."""
        return np.arange(self.first_line, self.first_line + self.line_count, dtype=np.int64)

    def first(self) -> bytes:
        """The block's first line (without its ``\\n``)."""
        end = self.data.find(b"\n")
        return self.data if end < 0 else self.data[:end]

    def lines(self) -> list[bytes]:
        """Each line's bytes (without its ``\\n``), for the row-by-row parser."""
        lines = self.data.split(b"\n")
        return lines[: self.line_count]


def _block(data: bytes, first_line: int) -> JsonlBlock:
    """A block of ``data``: whole lines, the last one without ``\\n`` only at the input's end."""
    newlines = int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == NEWLINE))
    count = newlines + (0 if data.endswith(b"\n") else 1)
    return JsonlBlock(data, first_line, count)


def iter_blocks(source: JsonlSource, block_bytes: int | None = None) -> Iterator[JsonlBlock]:
    """The input's lines as consecutive blocks (none for an empty input); ``block_bytes``
    defaults to :data:`BLOCK_BYTES` (read at the call)."""
    block_bytes = BLOCK_BYTES if block_bytes is None else block_bytes
    if isinstance(source, (bytes, bytearray, memoryview)):
        yield from _blocks_of_bytes(bytes(source), block_bytes)
    else:
        yield from _blocks_of_file(source, block_bytes)


def _blocks_of_bytes(raw: bytes, block_bytes: int) -> Iterator[JsonlBlock]:
    start = len(BOM) if raw.startswith(BOM) else 0
    line = 1
    while start < len(raw):
        cut = raw.rfind(b"\n", start, start + block_bytes)
        if cut < 0:  # one line longer than a block: the block is that line
            cut = raw.find(b"\n", start + block_bytes)
        end = len(raw) if cut < 0 else cut + 1
        block = _block(raw[start:end], line)
        yield block
        start, line = end, line + block.line_count


def _blocks_of_file(stream: BinaryIO, block_bytes: int) -> Iterator[JsonlBlock]:
    head = _read(stream, block_bytes)
    while 0 < len(head) < len(BOM):  # settle whether the input starts with a BOM
        more = _read(stream, block_bytes)
        if not more:
            break
        head += more
    pending: list[bytes] = []  # the start of a line no newline has ended yet, joined once
    chunk, line = head.removeprefix(BOM), 1
    last_read = head  # empty only at the end of the input (``chunk`` may be empty after the BOM)
    while last_read:
        cut = chunk.rfind(b"\n")
        if cut < 0:
            pending.append(chunk)
        else:
            block = _block(b"".join([*pending, chunk[: cut + 1]]), line)
            yield block
            line += block.line_count
            pending = [chunk[cut + 1 :]]
        last_read = chunk = _read(stream, block_bytes)
    rest = b"".join(pending)
    if rest:
        yield _block(rest, line)


def _read(stream: BinaryIO, size: int) -> bytes:
    try:
        return stream.read(size)
    except OSError as error:
        raise BadRequest(f"cannot read the JSONL input: {error.strerror or error}") from error


def read_all(source: JsonlSource) -> bytes:
    """The whole input (a file is read again from its start), for the row-by-row parser."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    try:
        source.seek(0)
    except OSError as error:
        raise BadRequest(f"cannot re-read the JSONL input: {error.strerror or error}") from error
    return _read(source, -1)


def read_records(
    source: JsonlSource,
    catalog: Catalog,
    with_pk: bool,
    *,
    block_bytes: int | None = None,
    spool_budget: int | None = None,
    fallback: bool = True,
) -> RecordSet:
    """The validated records of ``source`` (see the module docstring); the caller closes them.

    ``with_pk`` selects the physical schema (``TableDef.arrow_schema``); ``block_bytes`` is the
    input read at a time (default :data:`omnigraph.engine.records.read.BLOCK_BYTES`); ``spool_budget``
    bounds the rows held in memory (default :data:`omnigraph.engine.records.record_set.SPOOL_BUDGET_BYTES`). With
    ``fallback=False`` nothing is parsed row by row: where the fast path does not vouch for the
    input, :class:`Declined` is raised instead (this is how the fast path alone is checked
    against the row path).
    """
    records = RecordSet(catalog, RowSpool(spool_budget))
    try:
        line_count = 0
        for block in iter_blocks(source, block_bytes):
            try:
                batches = parse_block(block, catalog, with_pk)
            except Declined:
                if not fallback:
                    raise
                batches = _row_block(source, block, catalog, with_pk)
            for batch in batches:
                records.add(batch)
            line_count = block.first_line + block.line_count - 1
        records.seal(line_count)
        if records.has_duplicates():
            if not fallback:
                raise Declined("a table repeats an id or a @unique value")
            records.close()
            return records_of(_whole_by_rows(source, catalog), catalog, with_pk, spool_budget)
        return records
    except BaseException:
        records.close()
        raise


def _whole_by_rows(source: JsonlSource, catalog: Catalog) -> ParsedFile:
    return parse_jsonl(read_all(source), catalog)


def _row_block(source: JsonlSource, block: JsonlBlock, catalog: Catalog, with_pk: bool) -> list[TableBatch]:
    """The block parsed row by row; a refusal is re-derived from the whole input, so that the
    error names the first refused line of the file (a duplicate may start in an earlier block).

    A value the row parser accepts but Arrow cannot store (a string with a lone surrogate
    escape) fails the conversion; that failure, too, is re-derived from the whole input: a
    refused line anywhere comes first, then the conversion of the tables in table-key order.
    """
    try:
        parsed = parse_lines(block.lines(), block.first_line, catalog)
    except BadRequest:
        _whole_by_rows(source, catalog)  # raises the file's first refusal
        raise
    try:
        return batches_of(parsed, catalog, with_pk)
    except Exception:
        records_of(_whole_by_rows(source, catalog), catalog, with_pk).close()
        raise


def batches_of(parsed: ParsedFile, catalog: Catalog, with_pk: bool) -> list[TableBatch]:
    """Row-path results as table batches (table-key order)."""
    by_key = {f"node:{name}": rows for name, rows in parsed.nodes.items()}
    by_key.update({f"edge:{name}": rows for name, rows in parsed.edges.items()})  # type: ignore[misc]
    batches = []
    for table_key in sorted(by_key):
        table, rows = catalog.table(table_key), by_key[table_key]
        lines = pa.array([row.line for row in rows], pa.int64())
        batches.append(TableBatch(table_key, rows_to_arrow(table, rows, with_pk), lines))  # type: ignore[arg-type]
    return batches


def records_of(parsed: ParsedFile, catalog: Catalog, with_pk: bool, spool_budget: int | None = None) -> RecordSet:
    """A :class:`RecordSet` of row-path results."""
    records = RecordSet(catalog, RowSpool(spool_budget))
    for batch in batches_of(parsed, catalog, with_pk):
        records.add(batch)
    records.seal(parsed.line_count)
    return records
