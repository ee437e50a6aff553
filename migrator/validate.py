"""Validate one pinned table image: every ``id`` non-null and unique, in bounded memory.

The ``id`` column is streamed in batches. Small images (at most :data:`PARTITION_ROWS` rows) are
checked in memory; larger ones are spread by a 64-bit hash of the id over
``ceil(rows / PARTITION_ROWS)`` partitions spilled to a local temporary directory, and each
partition is checked on its own, so peak memory is bounded by the partition size, not by the
table size. At most :data:`MAX_OPEN_PARTITIONS` spill files are open at a time; an image with
more partitions is scanned once per group of them. The report carries a logical digest (row count and an order-independent combination
of the id hashes) and the physical fingerprint of the image.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from migrator.fingerprint import physical_fingerprint
from migrator.id_hash import hash_strings

PARTITION_ROWS = 131_072
MAX_OPEN_PARTITIONS = 256
BATCH_ROWS = 32_768
_ID_SCHEMA = pa.schema([pa.field("id", pa.large_utf8(), nullable=False)])


@dataclass(frozen=True)
class ImageReport:
    """What validating one image found."""

    rows: int
    null_ids: int
    duplicates: list[tuple[str, int]]
    digest: str
    fingerprint: str

    @property
    def clean(self) -> bool:
        return self.null_ids == 0 and not self.duplicates


class _IdDigest:
    """Order-independent digest of an id multiset: count, wrapping sum and xor of id hashes."""

    def __init__(self) -> None:
        self.rows = 0
        self.total = np.uint64(0)
        self.xor = np.uint64(0)

    def add(self, hashes: np.ndarray, rows: int) -> None:
        self.rows += rows
        with np.errstate(over="ignore"):
            self.total = np.uint64(self.total + hashes.sum(dtype=np.uint64))
        if hashes.size:
            self.xor = np.uint64(self.xor ^ np.bitwise_xor.reduce(hashes))

    def hexdigest(self, null_ids: int) -> str:
        text = f"rows={self.rows};nulls={null_ids};sum={int(self.total)};xor={int(self.xor)}"
        return hashlib.sha256(text.encode()).hexdigest()


def _duplicates_in(ids: pa.Array) -> list[tuple[str, int]]:
    if len(ids) == 0:
        return []
    counts = pc.value_counts(ids)
    repeated = counts.filter(pc.greater(counts.field("counts"), 1))
    return [(str(item["values"]), int(item["counts"])) for item in repeated.to_pylist()]


class _Partitions:
    """Hash partitions ``[first, first + len)`` of ``count`` spilled to Arrow IPC stream files."""

    def __init__(self, directory: Path, count: int, first: int, length: int):
        self.count, self.first, self.length = count, first, length
        self.paths = [directory / f"part-{first + i:06d}.arrows" for i in range(length)]
        self.writers = [pa.ipc.new_stream(str(path), _ID_SCHEMA) for path in self.paths]

    def add(self, ids: pa.Array, hashes: np.ndarray) -> None:
        parts = (hashes % np.uint64(self.count)).astype(np.int64) - self.first
        keep = np.flatnonzero((parts >= 0) & (parts < self.length))
        order = keep[np.argsort(parts[keep], kind="stable")]
        bounds = np.searchsorted(parts[order], np.arange(self.length + 1))
        ordered = ids.take(pa.array(order))
        for part in range(self.length):
            low, high = int(bounds[part]), int(bounds[part + 1])
            if high > low:
                self.writers[part].write_batch(pa.record_batch([ordered.slice(low, high - low)], schema=_ID_SCHEMA))

    def duplicates(self) -> list[tuple[str, int]]:
        for writer in self.writers:
            writer.close()
        found: list[tuple[str, int]] = []
        for path in self.paths:
            with pa.OSFile(str(path), "rb") as source:
                table = pa.ipc.open_stream(source).read_all()
            found.extend(_duplicates_in(table.column("id").combine_chunks()))
            del table
            path.unlink()
        return found


def _id_batches(dataset: lance.LanceDataset) -> Iterator[tuple[pa.Array, np.ndarray, int, int]]:
    """(non-null ids as large_utf8, their hashes, nulls in the batch, batch rows) per batch."""
    for batch in dataset.to_batches(columns=["id"], batch_size=BATCH_ROWS):
        column = batch.column(0)
        ids = pc.drop_null(column).cast(pa.large_utf8())
        yield ids, hash_strings(ids), column.null_count, len(column)


def validate_image(dataset: lance.LanceDataset, progress: Callable[[int], None] | None = None) -> ImageReport:
    """Validate the checked-out version of ``dataset`` (see the module docstring)."""
    partition_count = max(1, math.ceil(dataset.count_rows() / PARTITION_ROWS))
    digest = _IdDigest()
    null_ids = 0
    duplicates: list[tuple[str, int]] = []
    if partition_count == 1:
        in_memory: list[pa.Array] = []
        for ids, hashes, nulls, rows in _id_batches(dataset):
            digest.add(hashes, rows)
            null_ids += nulls
            in_memory.append(ids)
            if progress is not None:
                progress(rows)
        duplicates = _duplicates_in(pa.concat_arrays(in_memory) if in_memory else pa.array([], pa.large_utf8()))
    else:
        with tempfile.TemporaryDirectory(prefix="omnigraph-validate-") as temp:
            # At most MAX_OPEN_PARTITIONS spill files are open at once: one scan per group.
            for first in range(0, partition_count, MAX_OPEN_PARTITIONS):
                group = _Partitions(Path(temp), partition_count, first, min(MAX_OPEN_PARTITIONS, partition_count - first))
                for ids, hashes, nulls, rows in _id_batches(dataset):
                    if first == 0:
                        digest.add(hashes, rows)
                        null_ids += nulls
                        if progress is not None:
                            progress(rows)
                    group.add(ids, hashes)
                duplicates.extend(group.duplicates())
    return ImageReport(
        rows=digest.rows,
        null_ids=null_ids,
        duplicates=sorted(duplicates),
        digest=digest.hexdigest(null_ids),
        fingerprint=physical_fingerprint(dataset),
    )
