"""A spool of Arrow rows per table: in memory up to a budget, in temporary IPC files beyond it.

A load must validate its whole input before it writes anything, so it keeps the validated rows
until the commit. :class:`RowSpool` keeps them in memory while their Arrow size stays within
``budget_bytes`` (all tables together); beyond it, the oldest in-memory segments are written to
Arrow IPC files in a private temporary directory and dropped from memory. Reading back streams
one segment at a time (the last one read is cached, for the sequential reads a chunked load
makes), so memory stays near the budget whatever the input size. ``close`` removes the files.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

SPOOL_BUDGET_BYTES = 64 * 1024 * 1024


@dataclass
class _Segment:
    """``rows`` rows of one table: ``table`` while in memory, else the IPC file at ``path``."""

    rows: int
    nbytes: int
    table: pa.Table | None
    path: str | None = None


class RowSpool:
    """Append-only Arrow rows per key, read back by row range or as a stream (module docstring).

    ``budget_bytes`` defaults to :data:`SPOOL_BUDGET_BYTES` (read when the spool is made).
    """

    def __init__(self, budget_bytes: int | None = None) -> None:
        self._budget = SPOOL_BUDGET_BYTES if budget_bytes is None else budget_bytes
        self._segments: dict[str, list[_Segment]] = {}
        self._schemas: dict[str, pa.Schema] = {}
        self._resident: deque[_Segment] = deque()
        self._resident_bytes = 0
        self._directory: str | None = None
        self._cached: tuple[_Segment, pa.Table] | None = None
        self.peak_resident_bytes = 0
        self.spilled_segments = 0

    def append(self, key: str, rows: pa.Table) -> None:
        """Add ``rows`` (the key's schema, fixed by its first append) after the key's rows."""
        if not rows.num_rows:
            return
        self._schemas.setdefault(key, rows.schema)
        segment = _Segment(rows.num_rows, rows.nbytes, rows)
        self._segments.setdefault(key, []).append(segment)
        self._resident.append(segment)
        self._resident_bytes += segment.nbytes
        self.peak_resident_bytes = max(self.peak_resident_bytes, self._resident_bytes)
        while self._resident_bytes > self._budget and self._resident:
            self._spill(self._resident.popleft())

    def _spill(self, segment: _Segment) -> None:
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="omnigraph-load-")
        assert segment.table is not None
        path = os.path.join(self._directory, f"{self.spilled_segments:08d}.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, segment.table.schema) as writer:
            writer.write_table(segment.table)
        segment.path, segment.table = path, None
        self._resident_bytes -= segment.nbytes
        self.spilled_segments += 1

    def _load(self, segment: _Segment) -> pa.Table:
        if segment.table is not None:
            return segment.table
        if self._cached is not None and self._cached[0] is segment:
            return self._cached[1]
        assert segment.path is not None
        with pa.OSFile(segment.path, "rb") as source:
            table = pa.ipc.open_file(source).read_all()
        self._cached = (segment, table)
        return table

    def row_count(self, key: str) -> int:
        """Rows held for ``key`` (0 for a key never added)."""
        return sum(segment.rows for segment in self._segments.get(key, ()))

    def batches(self, key: str, start: int = 0, stop: int | None = None) -> Iterator[pa.RecordBatch]:
        """The key's rows ``[start, stop)`` in order, one segment in memory at a time."""
        stop = self.row_count(key) if stop is None else stop
        position = 0
        for segment in self._segments.get(key, ()):
            low, high = max(start, position), min(stop, position + segment.rows)
            if low < high:
                yield from self._load(segment).slice(low - position, high - low).to_batches()
            position += segment.rows
            if position >= stop:
                return

    def table(self, key: str, start: int, stop: int) -> pa.Table:
        """The key's rows ``[start, stop)`` as one table."""
        return pa.Table.from_batches(list(self.batches(key, start, stop)), schema=self._schemas[key])

    def reader(self, key: str) -> pa.RecordBatchReader:
        """All of the key's rows as a stream (read lazily: for a write of the whole table)."""
        return pa.RecordBatchReader.from_batches(self._schemas[key], self.batches(key))

    def close(self) -> None:
        """Drop every row and remove the spill files."""
        self._segments.clear()
        self._resident.clear()
        self._cached = None
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
