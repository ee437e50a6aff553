"""Variable-length traversals over an in-memory adjacency of an edge table image, cached per process.

Adjacency (:class:`Adjacency`): the edges of one pinned Lance image, read once (the ``src`` and
``dst`` columns only), with each endpoint id replaced by a dense integer *position*: row ``i``
of :attr:`Adjacency.sources` is the id at position ``i``. Ids are unique per node type only, so
when the edge's endpoints are of one type, sources and destinations share one space of
positions (:attr:`Adjacency.targets` is :attr:`Adjacency.sources`); when they differ, each side
has its own and only hop 1 exists. Two CSR arrays (:class:`Csr`, ``offsets`` int64 and
``neighbours`` int32) hold each position's distinct neighbours forward (src → dst) and backward
(dst → src); parallel edges count once, and a self-loop is not a neighbour but a flag of its
node (:attr:`Adjacency.loops`, one space only). An endpoint missing from its node table is a
position like any other: the statement that joins the pairs with the node tables drops it.

Cache (:class:`AdjacencyCache`, :func:`adjacency_cache`): one per process, holding the
adjacencies of edge images and the id indexes of node images
(:mod:`omnigraph.engine.query.node_ids`), each keyed by its image
(:func:`image_key`: the dataset's URI, Lance branch and version, and the names of its data and
deletion files, so a branch deleted and created again under the same name, whose versions are
numbered again from its fork point, is never mistaken for the old one). An image never changes,
so an entry is never stale; a new version is a new entry. The entries hold at most
:func:`cache_limit_bytes` bytes together: ``OMNIGRAPH_QUERY_ADJACENCY_MB`` MiB, by default a
quarter (1/:data:`ADJACENCY_SHARE`) of ``OMNIGRAPH_QUERY_MEMORY_MB``: the adjacency lives outside
DuckDB's memory limit, next to the queries that use it, so it takes a share of the same budget.
The least recently used entries are evicted to make room. An image with more rows than the bound
allows at :data:`EDGE_BYTES` bytes a row is not read at all; one whose adjacency turns out larger
than the bound is built once, measured, not kept (its size is remembered) and not used. The
traversals of such images run in DuckDB (:mod:`omnigraph.engine.query.session`), as do all of
them with ``OMNIGRAPH_QUERY_ADJACENCY_MB=0``. Two threads that ask for one missing entry build it
once: the second waits for the first. Counted: entries and bytes held, hits, builds, evictions
(:meth:`AdjacencyCache.stats`); a listener (:meth:`AdjacencyCache.listen`, the server's
metrics) is told of each change.

Search (:func:`search`): from a set of seed positions, the traversal's documented rule
(:mod:`omnigraph.engine.query.session`): a pair is reported when the shortest distance lies in
``min..max``, or when the node that carries the self-loop that counts (the destination forward,
the seed backwards) has one and the distance is ``min - 1``. The seeds are searched together,
in chunks whose visited bitmaps (one byte per node and seed) take at most :data:`VISITED_BYTES`
bytes; a hop expands the frontier through the CSR in slices of at most :data:`EXPAND_ITEMS`
neighbours. ``check`` (the query's time limit and cancellation) runs before every hop. A search
whose pairs would take more than ``limit_bytes`` (1/:data:`PAIRS_SHARE` of the query memory)
gives up, and the traversal runs in DuckDB instead, which can spill.
"""

from __future__ import annotations

import bisect
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar, cast, overload

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.storage.lance_io import content_digest

if TYPE_CHECKING:
    import lance

MIB = 1024 * 1024
ADJACENCY_ENV = "OMNIGRAPH_QUERY_ADJACENCY_MB"
ADJACENCY_SHARE = 4
"""By default the cache holds this fraction (1/N) of the query memory limit."""
PAIRS_SHARE = 4
"""A search's reported pairs may take this fraction (1/N) of the query memory limit."""
VISITED_BYTES = 16 * MIB
"""The most one chunk of seeds' visited bitmaps take (at least one seed per chunk)."""
EXPAND_ITEMS = 1 << 20
"""The most neighbours one slice of a hop's expansion gathers at once (a larger single node's are gathered whole)."""
EDGE_BYTES = 8
"""What one edge row takes in an adjacency at least (its neighbour entry each way), parallel edges aside."""
BUILD_SECONDS_PER_EDGE = 1e-6
"""About what building an adjacency costs per edge row (5 to 6 s for 5M edges on 2 cores): lookups
of an edge image through its BTREE that have spent that much time, together, pay for its adjacency
(:func:`charge_lookup`)."""
REMEMBERED = 256
"""How many keys the cache remembers a fact about without holding their entry (too large, asked for,
time spent), the least recently noted forgotten first."""

Positions = npt.NDArray[np.int64]
ImageKey = tuple[str, str | None, int, str]
CacheKey = ImageKey | tuple[ImageKey, str] | tuple[ImageKey, ImageKey, str]
"""An entry's key: an edge image's adjacency is keyed by the image; a node image's id index by the
image and ``"index"``, its columns by the image and ``"column:"`` and the column's name; where an
adjacency's ids are in a node image by both images and the side."""
Event = Literal["hit", "build", "eviction"]


def cache_limit_bytes(memory_mb: int) -> int:
    """The cache's bound in bytes: ``OMNIGRAPH_QUERY_ADJACENCY_MB`` MiB, else ``memory_mb`` / :data:`ADJACENCY_SHARE` MiB."""
    raw = os.environ.get(ADJACENCY_ENV)
    if raw is None:
        return memory_mb * MIB // ADJACENCY_SHARE
    if not raw.isdigit():
        raise BadRequest(f"{ADJACENCY_ENV}={raw!r}: expected a whole number of MiB, 0 for none", {"value": raw})
    return int(raw) * MIB


def image_key(uri: str, branch: str | None, version: int, dataset: lance.LanceDataset) -> ImageKey:
    """The cache key of the image ``dataset`` is checked out at (the module docstring)."""
    return (uri, branch, version, content_digest(dataset))


class PinnedImage(msgspec.Struct, frozen=True, dict=True):
    """One table's pinned image as a query reads it: where it is, the open dataset, its row count (the manifest's)."""

    uri: str
    branch: str | None
    version: int
    dataset: lance.LanceDataset
    rows: int

    @functools.cached_property
    def key(self) -> ImageKey:
        """Its cache key (:func:`image_key`), computed once."""
        return image_key(self.uri, self.branch, self.version, self.dataset)


class Csr(msgspec.Struct, frozen=True, eq=False):
    """Each position's distinct neighbours: ``neighbours[offsets[p]:offsets[p + 1]]``, ascending."""

    offsets: npt.NDArray[np.int64]
    neighbours: npt.NDArray[np.int32]

    @property
    def nbytes(self) -> int:
        """The bytes the arrays hold."""
        return int(self.offsets.nbytes + self.neighbours.nbytes)

    def degrees(self) -> npt.NDArray[np.int64]:
        """How many neighbours each position has."""
        return np.diff(self.offsets)


def distinct(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The distinct ``values``, ascending (a sort: numpy's ``unique`` hashes, several times slower on integers)."""
    return distinct_sorted(np.sort(values))


def distinct_sorted(ordered: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The distinct values of ``ordered`` (ascending), ascending."""
    first = np.ones(len(ordered), dtype=np.bool_)
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]


def _csr(near: npt.NDArray[np.int32], far: npt.NDArray[np.int32], near_size: int, far_size: int) -> Csr:
    """The CSR of the distinct pairs ``(near[i], far[i])`` over ``near_size`` positions (one key array, sorted in place)."""
    width = max(far_size, 1)
    keys = near.astype(np.int64)
    keys *= width
    keys += far
    keys.sort()
    joined = distinct_sorted(keys)  # by near, then far
    del keys
    offsets = np.zeros(near_size + 1, dtype=np.int64)
    np.cumsum(np.bincount(joined // width, minlength=near_size), out=offsets[1:])
    np.remainder(joined, width, out=joined)
    return Csr(offsets, joined.astype(np.int32))


def _encode(chunks: list[pa.Array], id_type: pa.DataType) -> tuple[pa.Array, npt.NDArray[np.int32]]:
    """The distinct ids of ``chunks`` (first-seen order) and each id's position; ``chunks`` is emptied.

    One hash table of the distinct ids (``unique``), then one lookup of every id in it; the ids
    are released before the positions are gathered. (A chunked ``dictionary_encode`` gives every
    chunk the whole dictionary so far, and combining the chunks first copies every id: either
    takes far more memory at its peak.)
    """
    ids = pa.chunked_array(chunks, id_type)
    chunks.clear()
    space = pc.unique(ids)
    found = pc.index_in(ids, value_set=space)
    del ids
    gathered = [chunk.to_numpy(zero_copy_only=False).astype(np.int32, copy=False) for chunk in found.chunks]
    return space, np.concatenate(gathered) if gathered else np.zeros(0, dtype=np.int32)


BISECT_IDS = 1024
"""Up to this many ids are found by binary search in a side's sorted ids; more by one hash lookup of them all."""


class _SortedView(Sequence[str]):
    """The ids of a side in ascending order, read one at a time (for :func:`bisect.bisect_left`)."""

    def __init__(self, ids: pa.Array) -> None:
        self._ids = ids

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [str(value) for value in self._ids[index].to_pylist()]
        return str(self._ids[index].as_py())


class SortedIds(msgspec.Struct, frozen=True, eq=False):
    """One side's ids in ascending order and the position of each: a few ids are found without hashing the whole side."""

    ids: pa.Array
    positions: npt.NDArray[np.int64]

    @classmethod
    def of(cls, space: pa.Array) -> SortedIds:
        """The sorted ids of the side whose position ``i`` holds ``space[i]``."""
        order = pc.sort_indices(space)
        return cls(space.take(order), order.to_numpy(zero_copy_only=False).astype(np.int64))

    def find(self, wanted: list[str]) -> list[int]:
        """The positions of those of ``wanted`` the side holds."""
        view = _SortedView(self.ids)
        found = []
        for value in wanted:
            at = bisect.bisect_left(view, value)
            if at < len(view) and view[at] == value:
                found.append(int(self.positions[at]))
        return found

    @property
    def nbytes(self) -> int:
        """The bytes the sorted copy and the positions hold."""
        return int(self.ids.nbytes + self.positions.nbytes)


class Adjacency(msgspec.Struct, frozen=True, eq=False):
    """The adjacency of one edge table image (the module docstring)."""

    sources: pa.Array
    """The id at each source-side position."""
    targets: pa.Array
    """The id at each destination-side position (the same array when the endpoints share one type)."""
    forward: Csr
    backward: Csr
    loops: npt.NDArray[np.bool_] | None
    """Whether each position has a self-loop; None when the endpoints' types differ."""
    sorted_sources: SortedIds
    sorted_targets: SortedIds
    """The sides' ids sorted (one object when the endpoints share one type)."""

    @property
    def one_space(self) -> bool:
        """Whether sources and destinations share one space of positions."""
        return self.loops is not None

    @property
    def nbytes(self) -> int:
        """The bytes the arrays hold."""
        ids = self.sources.nbytes + self.sorted_sources.nbytes
        ids += 0 if self.one_space else self.targets.nbytes + self.sorted_targets.nbytes
        loops = 0 if self.loops is None else self.loops.nbytes
        return int(ids + self.forward.nbytes + self.backward.nbytes + loops)

    def positions(self, ids: pa.Array, side: Literal["sources", "targets"]) -> Positions:
        """The distinct positions of ``ids`` on ``side``, ascending (ids without an edge have none)."""
        space = self.sources if side == "sources" else self.targets
        if len(ids) <= BISECT_IDS:
            ordered = self.sorted_sources if side == "sources" else self.sorted_targets
            wanted = [str(value) for value in ids.drop_null().to_pylist()]
            return distinct(np.asarray(ordered.find(wanted), dtype=np.int64))
        found = pc.index_in(ids.cast(space.type), value_set=space).drop_null()
        return distinct(found.to_numpy(zero_copy_only=False).astype(np.int64))

    def every_source(self, undirected: bool) -> Positions:
        """The positions with an outgoing edge (either way when ``undirected``), a self-loop included."""
        has = self.forward.degrees() > 0
        if undirected:
            has |= self.backward.degrees() > 0
        if self.loops is not None:
            has |= self.loops
        return np.flatnonzero(has).astype(np.int64)

    def pair_bytes(self) -> int:
        """About how many bytes one reported pair takes, held and then as a row of the pair table."""
        ids = len(self.sources) + len(self.targets)
        mean_id = int(self.sources.nbytes + self.targets.nbytes) // max(ids, 1)
        return 16 + 2 * (4 + mean_id)


def build_adjacency(dataset: lance.LanceDataset, one_space: bool, check: Callable[[], None]) -> Adjacency:
    """The adjacency of the image ``dataset``, reading its ``src`` and ``dst`` columns only.

    ``one_space``: the edge's endpoints are of one node type (one space of positions).
    ``check`` (the time limit and cancellation of the query that builds it) runs between batches.
    The ids read are released once every edge has its positions, before the CSRs are built.
    """
    src_chunks, dst_chunks = [], []
    for batch in dataset.to_batches(columns=["src", "dst"]):
        check()
        src_chunks.append(batch.column("src"))
        dst_chunks.append(batch.column("dst"))
    return _adjacency(src_chunks, dst_chunks, dataset.schema.field("src").type, one_space)


def adjacency_of(edges: pa.Table, one_space: bool) -> Adjacency:
    """The adjacency of the edges ``(src, dst)`` (string ids), as :func:`build_adjacency`."""
    return _adjacency(list(edges.column("src").chunks), list(edges.column("dst").chunks), edges.schema.field("src").type, one_space)


def _adjacency(src_chunks: list[pa.Array], dst_chunks: list[pa.Array], id_type: pa.DataType, one_space: bool) -> Adjacency:
    """The adjacency of the edges whose ids are ``src_chunks`` and ``dst_chunks`` (both lists are emptied)."""
    sources, targets, near, far = _positions(src_chunks, dst_chunks, id_type, one_space)
    loops = None
    if one_space:
        loops = np.zeros(len(sources), dtype=np.bool_)
        loops[near[near == far]] = True
        kept = near != far
        near, far = near[kept], far[kept]
    sorted_sources = SortedIds.of(sources)
    sorted_targets = sorted_sources if one_space else SortedIds.of(targets)
    forward, backward = _csr(near, far, len(sources), len(targets)), _csr(far, near, len(targets), len(sources))
    return Adjacency(sources, targets, forward, backward, loops, sorted_sources, sorted_targets)


def _positions(
    src_chunks: list[pa.Array], dst_chunks: list[pa.Array], id_type: pa.DataType, one_space: bool
) -> tuple[pa.Array, pa.Array, npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """Each side's distinct ids and every edge's source and destination positions (one space: one id array for both sides)."""
    if one_space:
        edges = sum(len(chunk) for chunk in src_chunks)
        both = src_chunks + dst_chunks
        src_chunks.clear()
        dst_chunks.clear()
        ids, positions = _encode(both, id_type)
        return ids, ids, positions[:edges], positions[edges:]
    sources, near = _encode(src_chunks, id_type)
    targets, far = _encode(dst_chunks, id_type)
    return sources, targets, near, far


class Cached(Protocol):
    """What the cache holds: an index of one image that says how many bytes it takes."""

    @property
    def nbytes(self) -> int:
        """The bytes it holds."""
        ...


CachedT = TypeVar("CachedT", bound=Cached)
NoteT = TypeVar("NoteT", int, float)


class Oversize(Exception):
    """Raised by a build that found, before making it, that its entry would not fit (it takes at least ``size`` bytes).

    The cache remembers the entry as larger than its bound, and does not build it again while the
    bound stays the same.
    """

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


class CacheStats(msgspec.Struct, frozen=True):
    """What the cache holds and has done since the process started."""

    entries: int
    bytes: int
    hits: int
    builds: int
    evictions: int


Listener = Callable[[Event, CacheStats], None]


class AdjacencyCache:
    """The process's adjacencies and node id indexes, bounded in bytes, least recently used evicted first (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[CacheKey, Cached] = OrderedDict()
        self._building: dict[CacheKey, threading.Event] = {}
        self._oversize: OrderedDict[CacheKey, int] = OrderedDict()
        self._asked: OrderedDict[CacheKey, int] = OrderedDict()
        self._spent: OrderedDict[CacheKey, float] = OrderedDict()
        self._bytes = 0
        self._hits = 0
        self._builds = 0
        self._evictions = 0
        self._listener: Listener | None = None

    def listen(self, listener: Listener | None) -> None:
        """Tell ``listener`` of every hit, build and eviction, with the counts after it (replaces the previous one)."""
        with self._lock:
            self._listener = listener

    def stats(self) -> CacheStats:
        """The counts now."""
        with self._lock:
            return self._stats()

    def _stats(self) -> CacheStats:
        return CacheStats(len(self._entries), self._bytes, self._hits, self._builds, self._evictions)

    def _tell(self, event: Event) -> None:
        if self._listener is not None:
            self._listener(event, self._stats())

    def spend(self, key: CacheKey, seconds: float) -> float:
        """Add ``seconds`` to the time spent reading image ``key`` without its entry; the total so far."""
        with self._lock:
            return _note(self._spent, key, self._spent.get(key, 0.0) + seconds)

    def held_bytes(self, key: CacheKey) -> int | None:
        """The bytes the entry of ``key`` takes if the cache holds it, else None; not counted as a hit."""
        with self._lock:
            found = self._entries.get(key)
            return None if found is None else found.nbytes

    def peek(self, key: CacheKey) -> Cached | None:
        """The entry of image ``key`` if the cache holds it (a hit), else None; never builds."""
        with self._lock:
            return self._hit(key)

    def _hit(self, key: CacheKey) -> Cached | None:
        """The entry of ``key``, counted as a hit and made the most recently used; None when not held (lock held)."""
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            self._hits += 1
            self._tell("hit")
        return found

    def get(self, key: CacheKey, build: Callable[[], CachedT], limit: int, least_bytes: int, *, after: int = 1) -> CachedT | None:
        """The entry of image ``key``, built by ``build`` when missing; None when it does not fit in ``limit`` bytes.

        An entry that takes at least ``least_bytes`` (what building it reads, at the least) more
        than ``limit`` is not built at all, nor one whose ``build`` raised :class:`Oversize`. The
        entries are evicted down to ``limit`` (the bound may change between calls). ``after``:
        a missing entry is built on the ``after``-th call for its key (None before: a
        single read of an image does not pay for its index).
        """
        while True:
            with self._lock:
                self._shrink(limit)
                found = self._hit(key)
                if found is not None:
                    return cast(CachedT, found)
                if least_bytes > limit or self._oversize.get(key, -1) > limit:
                    return None
                if after > 1 and _note(self._asked, key, self._asked.get(key, 0) + 1) < after:
                    return None
                self._asked.pop(key, None)
                waiting = self._building.get(key)
                if waiting is None:
                    building = self._building[key] = threading.Event()
                    break
            waiting.wait()  # another thread builds it; then look again (it may have failed, or not fit)
        built: CachedT | None = None
        try:
            built = build()
            size = built.nbytes
        except Oversize as error:
            size = max(error.size, limit + 1)  # it does not fit: remembered so, whatever it measured
        finally:
            with self._lock:
                del self._building[key]
                building.set()
        with self._lock:
            self._builds += 1
            if built is None or size > limit:
                _note(self._oversize, key, size)
                self._tell("build")
                return None
            self._entries[key] = built
            self._bytes += size
            self._tell("build")
            self._shrink(limit)
            return built

    def _shrink(self, limit: int) -> None:
        """Evict the least recently used entries until they hold at most ``limit`` bytes."""
        while self._bytes > limit:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.nbytes
            self._evictions += 1
            self._tell("eviction")


def _note(facts: OrderedDict[CacheKey, NoteT], key: CacheKey, value: NoteT) -> NoteT:
    """Set ``facts[key]`` to ``value`` as the most recently noted, keeping at most :data:`REMEMBERED`; ``value``."""
    facts.pop(key, None)
    facts[key] = value
    while len(facts) > REMEMBERED:
        facts.popitem(last=False)
    return value


_CACHE = AdjacencyCache()


def adjacency_cache() -> AdjacencyCache:
    """The process's cache."""
    return _CACHE


def charge_lookup(image: PinnedImage, seconds: float, one_space: bool, limit: int, check: Callable[[], None]) -> None:
    """Count ``seconds`` a lookup of the edge image ``image`` spent in its BTREE; build its adjacency once they pay for it.

    Once the lookups of an image have spent, together, what building its adjacency costs
    (:data:`BUILD_SECONDS_PER_EDGE` a row), the adjacency is built (within ``limit`` bytes) and later
    lookups read it: a process never spends more than about twice what the better of the two
    choices would have cost it, whether the image is looked up a few times or many.
    """
    cache = adjacency_cache()
    if cache.spend(image.key, seconds) >= image.rows * BUILD_SECONDS_PER_EDGE:
        cache.get(image.key, lambda: build_adjacency(image.dataset, one_space, check), limit, image.rows * EDGE_BYTES)


class Walk(msgspec.Struct, frozen=True):
    """What one search walks: hop bounds, direction, and whether each edge is also taken backwards."""

    min_hops: int
    max_hops: int
    backwards: bool
    undirected: bool


class Pairs(msgspec.Struct, frozen=True):
    """Reported pairs as positions: ``seeds[i]`` (a seed) with ``reached[i]`` (a node of the far side)."""

    seeds: npt.NDArray[np.int64]
    reached: npt.NDArray[np.int64]


def _expand(csrs: tuple[Csr, ...], front_seed: Positions, front_node: Positions, size: int, visited: npt.NDArray[np.bool_]) -> Positions:
    """The keys ``seed * size + node`` first reached from the frontier, each once, marked visited."""
    found: list[Positions] = []
    for csr in csrs:
        starts = csr.offsets[front_node]
        counts = csr.offsets[front_node + 1] - starts
        ends = np.cumsum(counts)
        begin = 0
        while begin < len(front_node):
            before = int(ends[begin - 1]) if begin else 0
            stop = max(begin + 1, int(np.searchsorted(ends, before + EXPAND_ITEMS, side="right")))
            count = counts[begin:stop]
            total = int(ends[stop - 1]) - before
            if total:
                owner = np.repeat(front_seed[begin:stop], count)
                index = np.repeat(starts[begin:stop] - (ends[begin:stop] - count - before), count) + np.arange(total)
                keys = owner * size + csr.neighbours[index]
                keys = distinct(keys[~visited[keys]])
                visited[keys] = True
                found.append(keys)
            begin = stop
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def search(
    adjacency: Adjacency,
    seeds: Positions,
    walk: Walk,
    *,
    check: Callable[[], None],
    enough: int | None,
    limit_bytes: int,
) -> Pairs | None:
    """The pairs ``walk`` reports from ``seeds`` (distinct positions on the near side), or None past ``limit_bytes``.

    ``enough``: the search may stop once this many pairs are reported (each is a pair of the
    complete answer). The near side is the sources forward and the destinations backwards.
    """
    one = adjacency.loops is not None
    if walk.undirected:
        csrs: tuple[Csr, ...] = (adjacency.forward, adjacency.backward)
    else:
        csrs = (adjacency.backward,) if walk.backwards else (adjacency.forward,)
    size = len(adjacency.sources if walk.backwards else adjacency.targets)
    last = walk.max_hops if one else 1
    most = limit_bytes // adjacency.pair_bytes()
    found_seeds: list[Positions] = []
    found_nodes: list[Positions] = []
    reported = 0
    chunk = max(1, VISITED_BYTES // max(size, 1))
    visited = np.zeros(min(chunk, len(seeds)) * size, dtype=np.bool_)

    def report(chunk_seeds: Positions, local: Positions, nodes: Positions) -> None:
        nonlocal reported
        found_seeds.append(chunk_seeds[local])
        found_nodes.append(nodes)
        reported += len(nodes)

    for start in range(0, len(seeds) if walk.min_hops <= last else 0, chunk):
        if enough is not None and reported >= enough:
            break
        chunk_seeds = seeds[start : start + chunk]
        front_seed = np.arange(len(chunk_seeds), dtype=np.int64)
        front_node = chunk_seeds
        touched = [front_seed * size + front_node] if one else []
        if one:  # a seed is visited (in the other space, a destination with the same id is another node)
            visited[touched[0]] = True
        for depth in range(1, last + 1):
            if one and depth == walk.min_hops:  # reached at min - 1 with the self-loop that counts: reported at min
                assert adjacency.loops is not None
                looped = adjacency.loops[chunk_seeds[front_seed] if walk.backwards else front_node]
                report(chunk_seeds, front_seed[looped], front_node[looped])
            if (enough is not None and reported >= enough) or reported > most:
                break
            check()
            keys = _expand(csrs, front_seed, front_node, size, visited)
            touched.append(keys)
            front_seed, front_node = np.divmod(keys, size)
            if depth >= walk.min_hops:
                report(chunk_seeds, front_seed, front_node)
            if not len(keys):
                break
        visited[np.concatenate(touched)] = False
        if reported > most:
            return None
    if not found_seeds:
        return Pairs(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    return Pairs(np.concatenate(found_seeds), np.concatenate(found_nodes))


def pair_table(adjacency: Adjacency, pairs: Pairs, backwards: bool) -> pa.Table:
    """The pairs as ids: ``a`` a source-side id, ``b`` a destination-side id."""
    sources, targets = (pairs.reached, pairs.seeds) if backwards else (pairs.seeds, pairs.reached)
    return pa.table({"a": adjacency.sources.take(pa.array(sources)), "b": adjacency.targets.take(pa.array(targets))})
