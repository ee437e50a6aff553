r"""JSONL input cut into bounded blocks of whole lines, each line with its number.

The line rules are those of :func:`omnigraph.engine.records.parse.parse_jsonl`: lines are split on ``\n`` and
numbered from 1, a final newline does not start a line, and a UTF-8 byte-order mark at the very
start of the input is not part of line 1. A block holds whole lines only; it is about
``block_bytes`` long (longer only when one line is). The input is bytes already in memory or a
binary file object read ``block_bytes`` at a time, so a file is never held in memory whole.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import BinaryIO

import msgspec
import numpy as np

from omnigraph.engine.errors import BadRequest

JsonlSource = bytes | BinaryIO
"""JSONL input: the bytes of a document, or a readable (and, for the row path, seekable) binary file."""

BLOCK_BYTES = 2 * 1024 * 1024
BOM = b"\xef\xbb\xbf"
NEWLINE = 10


class JsonlBlock(msgspec.Struct, frozen=True, dict=True):
    r"""Consecutive whole lines of the input: line ``i`` of ``data`` is line ``first_line + i``.

    ``data`` ends with ``\n`` unless it holds the input's last line and that line has none.
    """

    data: bytes
    first_line: int
    line_count: int

    @functools.cached_property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        r"""int64 byte offsets of each line's start and end (the end excludes the ``\n``)."""
        newlines = np.flatnonzero(np.frombuffer(self.data, dtype=np.uint8) == NEWLINE).astype(np.int64)
        ends = newlines if len(newlines) == self.line_count else np.append(newlines, np.int64(len(self.data)))
        starts = np.concatenate([np.zeros(1, dtype=np.int64), newlines + 1])[: len(ends)]
        return starts, ends

    def line_numbers(self) -> np.ndarray:
        """The input line number of every line of the block (int64)."""
        return np.arange(self.first_line, self.first_line + self.line_count, dtype=np.int64)

    def first(self) -> bytes:
        r"""The block's first line (without its ``\n``)."""
        end = self.data.find(b"\n")
        return self.data if end < 0 else self.data[:end]

    def lines(self) -> list[bytes]:
        r"""Each line's bytes (without its ``\n``), for the row-by-row parser."""
        lines = self.data.split(b"\n")
        return lines[: self.line_count]


def _block(data: bytes, first_line: int) -> JsonlBlock:
    r"""A block of ``data``: whole lines, the last one without ``\n`` only at the input's end."""
    newlines = int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == NEWLINE))
    count = newlines + (0 if data.endswith(b"\n") else 1)
    return JsonlBlock(data, first_line, count)


def iter_blocks(source: JsonlSource, block_bytes: int | None = None) -> Iterator[JsonlBlock]:
    """The input's lines as consecutive blocks (none for an empty input).

    ``block_bytes`` defaults to :data:`BLOCK_BYTES` (read at the call).
    """
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
