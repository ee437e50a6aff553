"""Reading the rows of given node ids from a pinned node image: by an in-memory id index, else by a Lance filter.

Id index (:class:`NodeIds`): the ``id`` column of one node image, read once, as fixed-width byte
strings (the width of the longest id, shorter ones padded with NUL bytes) sorted ascending, with
each one's row offset in the image (its position in a scan of the image, which is what Lance's
``take`` reads). Finding an id is a binary search; its rows are then read with ``take`` (a few
tenths of a millisecond) instead of a scan filtered on ``id`` (which plans and runs a scan, about
a millisecond whatever the index behind it). Padding makes an id and the same id followed by NUL bytes look alike, so
every row found is checked against the ids asked for.

The indexes live in the process's cache of image indexes
(:class:`omnigraph.engine.query.adjacency.AdjacencyCache`), keyed by the image, within the same
bound as the adjacencies: an image never changes, so an index is never stale. An image's index
is built the second time its rows are read by id (:data:`BUILD_AFTER`): a process that reads an
image once (a command line query) never pays for it, a long-lived one (a ``Graph``, a server
worker) pays once (about 0.1 s per million nodes). One whose ids would take more than the bound
is not built (:class:`omnigraph.engine.query.adjacency.Oversize`), and its rows are read by a
filter on ``id``, as with ``OMNIGRAPH_QUERY_ADJACENCY_MB=0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.query.adjacency import ImageKey, Oversize, adjacency_cache

if TYPE_CHECKING:
    import lance

BUILD_AFTER = 2
"""An image's id index is built on this read by id of its rows (the first reads filter on ``id``)."""
PAD_ROWS = 1 << 16
"""Ids of unequal lengths are padded this many at a time (bounds the scatter's temporary arrays)."""


@dataclass(frozen=True, eq=False)
class NodeIds:
    """The sorted fixed-width ids of one node image and each one's row offset (module docstring)."""

    ids: npt.NDArray[np.bytes_]
    offsets: npt.NDArray[np.int64]

    @property
    def nbytes(self) -> int:
        """The bytes the arrays hold."""
        return int(self.ids.nbytes + self.offsets.nbytes)

    def find(self, wanted: Sequence[str]) -> npt.NDArray[np.int64]:
        """The row offsets, ascending and distinct, of the rows whose id may be one of ``wanted`` (check each row's id)."""
        width = self.ids.dtype.itemsize
        encoded = [value.encode() for value in wanted]
        needles = np.array([value for value in encoded if len(value) <= width], dtype=self.ids.dtype)
        if not len(needles):
            return np.zeros(0, dtype=np.int64)
        left = np.searchsorted(self.ids, needles, side="left")
        right = np.searchsorted(self.ids, needles, side="right")
        found = [self.offsets[start:stop] for start, stop in zip(left.tolist(), right.tolist(), strict=True) if stop > start]
        return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


def _fixed_width(ids: pa.Array, limit: int) -> npt.NDArray[np.bytes_]:
    """``ids`` (a string array without nulls) as one fixed-width byte string each; :class:`Oversize` past ``limit`` bytes."""
    count = len(ids)
    lengths = pc.binary_length(ids).to_numpy(zero_copy_only=False).astype(np.int64)
    width = max(int(lengths.max()) if count else 0, 1)
    if count * (width + 8) > limit:
        raise Oversize(count * (width + 8))
    offset_type = np.int64 if pa.types.is_large_string(ids.type) else np.int32
    starts = np.frombuffer(ids.buffers()[1], dtype=offset_type)[ids.offset : ids.offset + count + 1].astype(np.int64)
    data = np.frombuffer(ids.buffers()[2], dtype=np.uint8) if count else np.zeros(0, dtype=np.uint8)
    if count and (lengths == width).all():
        return np.frombuffer(data[starts[0] : starts[-1]].tobytes(), dtype=f"S{width}")
    padded = np.zeros(count * width, dtype=np.uint8)
    for first in range(0, count, PAD_ROWS):
        last = min(first + PAD_ROWS, count)
        size = lengths[first:last]
        total = int(size.sum())
        shift = np.repeat(np.arange(first, last, dtype=np.int64) * width - starts[first:last], size)
        padded[np.arange(starts[first], starts[first] + total, dtype=np.int64) + shift] = data[starts[first] : starts[first] + total]
    return padded.view(f"S{width}")


def build_node_ids(dataset: lance.LanceDataset, limit: int) -> NodeIds:
    """The id index of the image ``dataset`` (module docstring); :class:`Oversize` when it would take more than ``limit`` bytes."""
    ids = dataset.to_table(columns=["id"]).column("id").combine_chunks()
    fixed = _fixed_width(ids.cast(pa.string()) if pa.types.is_large_string(ids.type) and len(ids) < 2**31 else ids, limit)
    del ids
    order = np.argsort(fixed, kind="stable")
    return NodeIds(fixed[order], order.astype(np.int64))


def _id_filter(column: str, ids: Sequence[str]) -> str:
    """A Lance filter: ``column`` is one of ``ids`` (never empty)."""
    return f"{column} IN ({', '.join(chr(39) + value.replace(chr(39), chr(39) * 2) + chr(39) for value in ids)})"


def read_where_in(dataset: Any, columns: list[str] | None, column: str, values: Sequence[str], limit: int | None) -> pa.Table | None:
    """The rows of ``dataset`` whose ``column`` is one of ``values`` (``columns`` of them, all when None); None past ``limit`` rows.

    A scan filtered on ``column`` (the engine's BTREE on ``id``, ``src`` and ``dst`` serves it).
    """
    if not values:
        schema = dataset.schema if columns is None else pa.schema([dataset.schema.field(name) for name in columns])
        return schema.empty_table()
    scanner = dataset.scanner(columns=columns, filter=_id_filter(column, values), limit=None if limit is None else limit + 1)
    table = scanner.to_table()
    return None if limit is not None and table.num_rows > limit else table


def node_rows(dataset: Any, key: ImageKey, columns: list[str], ids: Sequence[str], cache_limit: int) -> pa.Table:
    """The rows of the node image ``dataset`` (cache key ``key``) whose id is one of ``ids``, with ``columns`` (``id`` among them).

    Read through the image's id index when the cache holds or builds one within ``cache_limit``
    bytes (module docstring), else by a filter on ``id``. Rows in no particular order.
    """
    if not ids:
        return pa.schema([dataset.schema.field(name) for name in columns]).empty_table()
    index = adjacency_cache().get(key, lambda: build_node_ids(dataset, cache_limit), cache_limit, 0, after=BUILD_AFTER)
    if index is None:
        rows = read_where_in(dataset, columns, "id", ids, None)
        assert rows is not None  # no limit
        return rows
    rows = dataset.take(index.find(ids).tolist(), columns=columns)
    return rows.filter(pc.is_in(rows.column("id"), value_set=pa.array(list(ids), rows.schema.field("id").type)))
