"""Reading the rows of given node ids from a pinned node image: from memory, else by a Lance filter.

Id index (:class:`NodeIds`): the ``id`` column of one node image, read once, as fixed-width byte
strings (the width of the longest id, shorter ones padded with NUL bytes) sorted ascending, with
each one's row offset in the image (its position in a scan of the image, deleted rows skipped).
Finding an id is a binary search. Padding makes an id and the same id followed by NUL bytes
look alike: when the image holds an id that ends with a NUL byte, every row found is read with
its id and checked against the ids asked for; otherwise (:attr:`NodeIds.exact`) a match is the
id asked for.

Columns (:class:`NodeColumn`): one scalar column of the image (numbers, booleans, strings, dates,
timestamps; never a list or a vector), read whole into memory, in scan order.
The rows of the ids found are then taken from the cached columns (microseconds) when the index is
exact and every column asked for is cached; else they are read with Lance's ``take`` (about a
third of a millisecond). Without an index, they are read by a scan filtered on ``id``, which
plans and runs a scan (about a millisecond, whatever index serves it).

Index and columns live in the process's cache of image indexes
(:class:`omnigraph.engine.query.adjacency.AdjacencyCache`), keyed by the image (and the column),
within the same bound as the adjacencies: an image never changes, so an entry is never stale. The
index is built the second time the image's rows are read by id (:data:`BUILD_AFTER`), and a
column the first time a lookup reads it once the index is held: a process that reads an image
once (a command line query) never pays for them, a long-lived one (a ``Graph``, a server worker)
pays once: about 0.1 s per million nodes for the index, a read of the column for a column. One
that would take more than the bound is not kept (:class:`omnigraph.engine.query.adjacency.Oversize`:
ids and columns are read in batches and given up once they pass it), nor is a column that does
not fit beside its image's index and the lookup's other columns (they would evict each other in
turn, and every lookup would read them again); the rows are then read from Lance, as they all
are with ``OMNIGRAPH_QUERY_ADJACENCY_MB=0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.query.adjacency import Oversize, PinnedImage, adjacency_cache

if TYPE_CHECKING:
    import lance

BUILD_AFTER = 2
"""An image's id index is built on this read by id of its rows (the first reads filter on ``id``)."""
PAD_ROWS = 1 << 16
"""Ids of unequal lengths are padded this many at a time (bounds the scatter's temporary arrays)."""


class NodeIds(msgspec.Struct, frozen=True, eq=False):
    """The sorted fixed-width ids of one node image and each one's row offset (module docstring)."""

    ids: npt.NDArray[np.bytes_]
    offsets: npt.NDArray[np.int64]
    exact: bool
    """No id of the image ends with a NUL byte: a padded match is the id asked for."""

    @property
    def nbytes(self) -> int:
        """The bytes the arrays hold."""
        return int(self.ids.nbytes + self.offsets.nbytes)

    def find(self, wanted: Sequence[str]) -> list[tuple[int, str]]:
        """(row offset, id asked for) of each row whose id may be one of ``wanted``, by offset.

        Each is the id asked for when :attr:`exact`; otherwise check each row's own id.
        """
        width = self.ids.dtype.itemsize
        asked = sorted({value for value in wanted if len(value.encode()) <= width and not (self.exact and value.endswith("\0"))})
        if not asked:
            return []
        needles = np.array([value.encode() for value in asked], dtype=self.ids.dtype)
        left = np.searchsorted(self.ids, needles, side="left").tolist()
        right = np.searchsorted(self.ids, needles, side="right").tolist()
        found = {(int(offset), value) for value, start, stop in zip(asked, left, right, strict=True) for offset in self.offsets[start:stop]}
        return sorted(found)


class NodeColumn(msgspec.Struct, frozen=True, eq=False):
    """One column of a node image, whole, in scan order (module docstring)."""

    values: pa.Array

    @property
    def nbytes(self) -> int:
        """The bytes the array holds."""
        return int(self.values.nbytes)


def cacheable(column_type: pa.DataType) -> bool:
    """Whether a column of ``column_type`` is held in memory: a scalar (number, boolean, string, date, timestamp)."""
    return bool(
        pa.types.is_integer(column_type)
        or pa.types.is_floating(column_type)
        or pa.types.is_boolean(column_type)
        or pa.types.is_string(column_type)
        or pa.types.is_large_string(column_type)
        or pa.types.is_date(column_type)
        or pa.types.is_timestamp(column_type)
    )


def build_node_column(dataset: lance.LanceDataset, column: str, limit: int) -> NodeColumn:
    """``column`` of the image ``dataset`` in memory; :class:`Oversize` once it passes ``limit`` bytes."""
    chunks: list[pa.Array] = []
    size = 0
    for batch in dataset.to_batches(columns=[column]):
        chunks.append(batch.column(0))
        size += batch.nbytes
        if size > limit:
            raise Oversize(size)
    if not chunks:
        return NodeColumn(pa.array([], dataset.schema.field(column).type))
    return NodeColumn(pa.concat_arrays(chunks))


def fixed_width(ids: pa.Array, limit: int | None = None) -> npt.NDArray[np.bytes_]:
    """``ids`` (a string array without nulls) as byte strings of the longest one's width, NUL-padded.

    :class:`Oversize` when they would take more than ``limit`` bytes (with an offset each).
    """
    count = len(ids)
    lengths = pc.binary_length(ids).to_numpy(zero_copy_only=False).astype(np.int64)
    width = max(int(lengths.max()) if count else 0, 1)
    if limit is not None and count * (width + 8) > limit:
        raise Oversize(count * (width + 8))
    offset_type = np.int64 if pa.types.is_large_string(ids.type) else np.int32
    starts = np.frombuffer(ids.buffers()[1], dtype=offset_type)[ids.offset : ids.offset + count + 1].astype(np.int64)
    data = np.frombuffer(ids.buffers()[2], dtype=np.uint8) if count else np.zeros(0, dtype=np.uint8)
    if count and (lengths == width).all():
        return data[starts[0] : starts[-1]].view(f"S{width}")
    padded = np.zeros(count * width, dtype=np.uint8)
    for first in range(0, count, PAD_ROWS):
        last = min(first + PAD_ROWS, count)
        size = lengths[first:last]
        total = int(size.sum())
        shift = np.repeat(np.arange(first, last, dtype=np.int64) * width - starts[first:last], size)
        padded[np.arange(starts[first], starts[first] + total, dtype=np.int64) + shift] = data[starts[first] : starts[first] + total]
    return padded.view(f"S{width}")


def cached_column(image: PinnedImage, name: str, cache_limit: int, budget: int) -> NodeColumn | None:
    """Column ``name`` of the node image ``image`` from the cache (``cache_limit`` bytes), read whole if it is missing.

    Not kept (None) when it takes more than ``budget`` bytes: it is then remembered as too large
    for the cache as it is bounded now, and not read again.
    """
    build = partial(build_node_column, image.dataset, name, budget)
    return adjacency_cache().get((image.key, f"column:{name}"), build, cache_limit, image.rows)


def build_node_ids(dataset: lance.LanceDataset, limit: int) -> NodeIds:
    """The id index of the image ``dataset`` (module docstring); :class:`Oversize` when it would take more than ``limit`` bytes.

    The ids are read in batches and given up once they pass ``limit`` bytes.
    """
    ids = build_node_column(dataset, "id", limit).values
    exact = not pc.any(pc.ends_with(ids, "\0")).as_py() if len(ids) else True
    fixed = fixed_width(ids, limit)
    del ids
    order = np.argsort(fixed, kind="stable")
    return NodeIds(fixed[order], order.astype(np.int64), exact)


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


def node_rows(image: PinnedImage, columns: list[str], ids: Sequence[str], cache_limit: int) -> pa.Table:
    """The rows of the node image ``image`` whose id is one of ``ids``, with ``columns`` (``id`` first).

    Read from memory, through the image's id index and cached columns, when the cache holds or
    builds them within ``cache_limit`` bytes (module docstring), else from Lance. Rows in no
    particular order. An image whose rows would take more than the bound at one byte a value
    (nine for the index) is not read whole at all.
    """
    assert columns[0] == "id"
    dataset, key = image.dataset, image.key
    image_schema = dataset.schema  # built anew on every access
    schema = pa.schema([image_schema.field(name) for name in columns])
    if not ids:
        return schema.empty_table()
    cache = adjacency_cache()
    index = cache.get((key, "index"), partial(build_node_ids, dataset, cache_limit), cache_limit, 9 * image.rows, after=BUILD_AFTER)
    if index is None:
        rows = read_where_in(dataset, columns, "id", ids, None)
        assert rows is not None  # no limit
        return rows
    found = index.find(ids)
    if index.exact and all(cacheable(schema.field(name).type) for name in columns[1:]):
        held: dict[str, NodeColumn | None] = {}
        budget = cache_limit - index.nbytes  # the columns must fit beside the index, or each would evict it in turn
        for name in columns[1:]:  # built with the index: the image has been read by id before
            column = held[name] = cached_column(image, name, cache_limit, budget)
            budget -= 0 if column is None else column.nbytes
        if all(column is not None for column in held.values()):
            offsets = pa.array([offset for offset, _ in found], pa.int64())  # each row the match of one id
            found_ids = pa.array([node_id for _, node_id in found], schema.field("id").type)
            taken = [column.values.take(offsets) for column in held.values() if column is not None]
            return pa.table([found_ids, *taken], schema=schema)
    rows = dataset.take(sorted({offset for offset, _ in found}), columns=columns)  # a row may be the candidate of several ids
    return rows.filter(pc.is_in(rows.column("id"), value_set=pa.array(list(ids), schema.field("id").type)))
