"""Degree aggregates: counts of a one-hop match over the whole graph, read off the edge image's adjacency.

A query is a degree aggregate (:func:`degree_plan`) when its match is two node variables joined by
one directed ``{1,1}`` hop (no edge variable) and nothing else (no condition, negation, text match
or score) but comparisons between two columns of those variables (:func:`pair_compare`: one Arrow
type, an integer, string, boolean or date, ``= != < <= > >=``), and it returns counts of the
match's rows (``count($p)``, ``count($f)``: every row binds both) and, optionally, group keys that
are columns of one of the two variables, ordered by returned items, with or without a limit: the
number of edges of the graph (``$p knows $f`` ... ``count($f)``), each node's degree, the top-k by
degree, and the same with ``$p.age > $f.age``.

A row of the match is a distinct pair of nodes joined by an edge, both present in their node
tables. The edge image's adjacency (:mod:`omnigraph.engine.query.adjacency`) holds exactly the
distinct pairs (a self-loop as a flag of its node), so a node's row count is the number of its
distinct neighbours present in the other node table, plus one for its self-loop (the node is its
own neighbour, present when it is). With comparisons, a pair counts when every comparison holds
for its two nodes' values (read from the node images' cached columns; a null side never holds), so
the pairs are listed once (:data:`COMPARED_PAIR_BYTES` a pair besides the values compared, within
the cache's bound, else the statement runs). Where each side's ids are in the node images
(:class:`NodeOffsets`: one hash lookup of them all, about 0.5 s for 1M ids, kept in the cache with
the adjacency, 8 bytes an id) tells presence and gives the row of each group key, read from the
node image's cached column (:mod:`omnigraph.engine.query.node_ids`). Groups are made and ordered
as the statement does (:mod:`omnigraph.engine.query.plan`): the ``order`` keys (ascending puts
NULL first, descending last), then the group keys ascending, NULL first. A float group key is
left to the statement (NaN and ``-0.0`` would need DuckDB's own grouping rules).

Without the adjacency in the cache (a degree aggregate never builds one itself: a
variable-length traversal of the same table version does), an edge image of at most
:data:`COUNTED_EDGES` rows is counted from its columns (:func:`_column_degrees`): its ``src`` and
``dst`` read whole, each id looked up among its node image's ids (the node image's cached ``id``
column, one hash lookup of them all), and the distinct pairs of node rows sorted out. That costs
about what the statement costs on such a table (some 0.1 s for 500K edges) without loading
DuckDB or its working memory; the time counts towards building the adjacency
(:func:`omnigraph.engine.query.adjacency.charge_lookup`), so a process that keeps counting one
table version builds it once the counts have cost as much. Past that size the statement, whose
joins run on every core, is faster. :func:`degree_rows` gives up (None: the statement runs in
DuckDB) when neither applies, or when the offsets or a group key's column do not fit the cache's bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.gq.read_checker import BoundRead, Column, Compare, Hop
from omnigraph.engine.query.adjacency import Adjacency, ImageKey, PinnedImage, adjacency_cache, charge_lookup, distinct_sorted
from omnigraph.engine.query.node_ids import build_node_column, cacheable, cached_column

if TYPE_CHECKING:
    import lance

Side = Literal["src", "dst"]
Rows = npt.NDArray[np.int64]
Degrees = tuple[pa.Array, Rows, Rows]
"""Per position of the near side: its id, its row in the near node image (-1: none) and its row count (0 without a node)."""
PairFilter = Callable[[Rows, Rows], npt.NDArray[np.bool_]]
"""Given the rows of pairs' source nodes and destination nodes in their node images: whether each pair passes the comparisons."""

COMPARISONS: dict[str, Callable[[pa.Array, pa.Array], pa.Array]] = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}
COMPARED_PAIR_BYTES = 48
"""What listing one pair for its comparisons holds besides two of the compared values: its near
position and both node rows (8 bytes each), a copy of one, the masks."""

COUNTED_EDGES = 1 << 20
"""Up to this many rows, an edge image whose adjacency is not held is counted from its columns (module docstring)."""
COUNTED_EDGE_BYTES = 40
"""What counting from the columns holds per edge row at its peak besides two copies of one end's id (its
lookup's result and copies, the far end's node rows, the pair keys): an image of more rows than the cache's
bound allows at this size plus twice the node ids' mean length is left to the statement."""


class DegreePlan(msgspec.Struct, frozen=True):
    """A degree aggregate's hop, the side whose variable holds the group keys (``src`` when there are none), its comparisons."""

    hop: Hop
    side: Side
    compares: tuple[Compare, ...] = ()


def pair_compare(compare: Compare, hop: Hop) -> bool:
    """Whether counting applies ``compare``: two columns of ``hop``'s ends of one integer, string, boolean or date type.

    Floats are left to the statement (NaN compares by DuckDB's rules), and so are comparisons
    with a constant (a filter of one variable, which the statement pushes into its scan).
    """
    left, right = compare.left, compare.right
    if compare.op not in COMPARISONS or not isinstance(left, Column) or not isinstance(right, Column):
        return False
    if not {left.var, right.var} <= {hop.src, hop.dst}:
        return False
    kind = left.type.arrow_type()
    if kind != right.type.arrow_type() or not cacheable(kind):
        return False
    return bool(pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_boolean(kind) or pa.types.is_date(kind))


def degree_plan(bound: BoundRead) -> DegreePlan | None:
    """The plan of ``bound`` as a degree aggregate; None when it is not one (module docstring)."""
    block = bound.block
    if not bound.grouped or block.conditions or block.negations or block.text_matches or len(block.hops) != 1:
        return None
    (hop,) = block.hops
    if hop.min_hops != 1 or hop.max_hops != 1 or hop.undirected or hop.edge_var is not None or hop.src == hop.dst:
        return None
    if not all(pair_compare(compare, hop) for compare in block.compares):
        return None
    if len(block.variables) != 2 or any(var.is_edge for var in block.variables):
        return None
    keys: set[int] = set()
    for output in bound.outputs:
        if output.score is not None:
            return None
        if output.func is None and output.column is not None:
            kind = output.type.arrow_type()
            if pa.types.is_floating(kind) or not cacheable(kind):  # NaN and -0.0 need DuckDB's grouping rules; lists are not held
                return None
            keys.add(output.column.var)
        elif output.func != "count" or output.column is not None:
            return None
    if len(keys) > 1 or any(key.output is None or key.score is not None for key in bound.order):
        return None
    return DegreePlan(hop, "dst" if keys == {hop.dst} else "src", block.compares)


class NodeOffsets(msgspec.Struct, frozen=True, eq=False):
    """Where each position of one side of an adjacency is in a node image: its row offset, -1 for no node."""

    offsets: npt.NDArray[np.int64]

    @property
    def nbytes(self) -> int:
        """The bytes the array holds."""
        return int(self.offsets.nbytes)


def build_node_offsets(ids: pa.Array, node: lance.LanceDataset, limit: int, check: Callable[[], None]) -> NodeOffsets:
    """The row offset in the node image ``node`` of each of ``ids`` (-1 where it has no such node): one hash lookup of them all.

    The node ids are read in batches and given up (:class:`omnigraph.engine.query.adjacency.Oversize`)
    once they pass ``limit`` bytes.
    """
    node_ids = build_node_column(node, "id", limit).values
    check()
    found = pc.index_in(ids.cast(node_ids.type), value_set=node_ids).fill_null(-1)
    return NodeOffsets(found.to_numpy(zero_copy_only=False).astype(np.int64))


def _node_offsets(
    adjacency_key: ImageKey, ids: pa.Array, side: Side, image: PinnedImage, limit: int, check: Callable[[], None]
) -> NodeOffsets | None:
    """The cached :class:`NodeOffsets` of one side of an adjacency in ``image`` (built on first use within ``limit`` bytes)."""
    key = (adjacency_key, image.key, side)
    return adjacency_cache().get(key, partial(build_node_offsets, ids, image.dataset, limit, check), limit, 8 * len(ids) + image.rows)


def degree_rows(
    bound: BoundRead, plan: DegreePlan, images: Mapping[str, PinnedImage], cache_limit: int, check: Callable[[], None]
) -> list[tuple[Any, ...]] | None:
    """The answer's rows (each value as DuckDB would give it), or None when the statement must run (module docstring)."""
    hop = plan.hop
    edge_image = images[hop.edge.table_key]
    near_var, far_var = (hop.src, hop.dst) if plan.side == "src" else (hop.dst, hop.src)
    near_image = images[bound.variables[near_var].table.table_key]
    far_image = images[bound.variables[far_var].table.table_key]
    passes = None
    if plan.compares:
        passes = _pair_filter(bound, plan, images, edge_image.rows, cache_limit)
        if passes is None:
            return None
    adjacency = adjacency_cache().peek(edge_image.key)
    if isinstance(adjacency, Adjacency):
        counted = _adjacency_degrees(plan, adjacency, edge_image.key, near_image, far_image, passes, cache_limit, check)
    else:
        counted = _column_degrees(plan, edge_image, near_image, far_image, passes, cache_limit, check)
    if counted is None:
        return None
    near_ids, near_offsets, degrees = counted
    check()
    group_outputs = [index for index, output in enumerate(bound.outputs) if output.func is None]
    if not group_outputs:
        total = int(degrees.sum())
        rows = [tuple(total for _ in bound.outputs)]
        return rows[: bound.limit] if bound.limit is not None else rows
    return _grouped(bound, group_outputs, near_ids, near_offsets, near_image, degrees, cache_limit)


def _pair_filter(bound: BoundRead, plan: DegreePlan, images: Mapping[str, PinnedImage], pairs: int, cache_limit: int) -> PairFilter | None:
    """The :data:`PairFilter` of ``plan``'s comparisons over at most ``pairs`` pairs.

    None (the statement runs) when a compared column is not held in the cache, or listing the
    pairs with two compared values each would pass the cache's bound.
    """
    held: dict[tuple[int, str], pa.Array] = {}
    for compare in plan.compares:
        for operand in (compare.left, compare.right):
            assert isinstance(operand, Column)  # pair_compare: both sides are columns
            if (operand.var, operand.column) not in held:
                image = images[bound.variables[operand.var].table.table_key]
                column = cached_column(image, operand.column, cache_limit, cache_limit)
                if column is None:
                    return None
                held[operand.var, operand.column] = column.values
    value_bytes = max(values.nbytes // max(len(values), 1) for values in held.values())
    if pairs * (COMPARED_PAIR_BYTES + 2 * value_bytes) > cache_limit:
        return None
    src = plan.hop.src

    def passes(src_rows: Rows, dst_rows: Rows) -> npt.NDArray[np.bool_]:
        kept = np.ones(len(src_rows), dtype=np.bool_)
        for compare in plan.compares:
            sides = []
            for operand in (compare.left, compare.right):
                assert isinstance(operand, Column)
                sides.append(held[operand.var, operand.column].take(pa.array(src_rows if operand.var == src else dst_rows)))
            kept &= COMPARISONS[compare.op](*sides).fill_null(False).to_numpy(zero_copy_only=False)
        return kept

    return passes


def _passing(plan: DegreePlan, passes: PairFilter, near_rows: Rows, far_rows: Rows) -> npt.NDArray[np.bool_]:
    """Whether each pair of node rows (near side, far side) passes the comparisons."""
    return passes(near_rows, far_rows) if plan.side == "src" else passes(far_rows, near_rows)


def _adjacency_degrees(
    plan: DegreePlan,
    adjacency: Adjacency,
    edge_key: ImageKey,
    near_image: PinnedImage,
    far_image: PinnedImage,
    passes: PairFilter | None,
    cache_limit: int,
    check: Callable[[], None],
) -> Degrees | None:
    """The near side's :data:`Degrees` over the positions of ``adjacency``; None when the offsets do not fit the cache."""
    far_side: Side = "dst" if plan.side == "src" else "src"
    near_ids, far_ids = (adjacency.sources, adjacency.targets) if plan.side == "src" else (adjacency.targets, adjacency.sources)
    # one space: both sides are one array of ids in one node image, so one entry serves both
    near = _node_offsets(edge_key, near_ids, "src" if adjacency.one_space else plan.side, near_image, cache_limit, check)
    far = near if adjacency.one_space else _node_offsets(edge_key, far_ids, far_side, far_image, cache_limit, check)
    if near is None or far is None:
        return None
    check()
    if passes is not None:
        return near_ids, near.offsets, _compared_degrees(plan, adjacency, near.offsets, far.offsets, passes, check)
    csr = adjacency.forward if plan.side == "src" else adjacency.backward
    far_present = far.offsets >= 0
    reached = np.zeros(len(csr.neighbours) + 1, dtype=np.int64)
    np.cumsum(far_present[csr.neighbours], out=reached[1:])
    degrees = reached[csr.offsets[1:]] - reached[csr.offsets[:-1]]
    if adjacency.loops is not None:
        degrees += adjacency.loops & far_present
    degrees[near.offsets < 0] = 0
    return near_ids, near.offsets, degrees


def _compared_degrees(
    plan: DegreePlan, adjacency: Adjacency, near_offsets: Rows, far_offsets: Rows, passes: PairFilter, check: Callable[[], None]
) -> Rows:
    """Each near position's count of the distinct pairs of ``adjacency`` whose two nodes exist and pass the comparisons."""
    csr = adjacency.forward if plan.side == "src" else adjacency.backward
    positions = len(csr.offsets) - 1
    near_positions = np.repeat(np.arange(positions, dtype=np.int64), np.diff(csr.offsets))
    near_rows, far_rows = near_offsets[near_positions], far_offsets[csr.neighbours]
    present = (near_rows >= 0) & (far_rows >= 0)
    near_positions, near_rows, far_rows = near_positions[present], near_rows[present], far_rows[present]
    check()
    degrees = np.bincount(near_positions[_passing(plan, passes, near_rows, far_rows)], minlength=positions).astype(np.int64)
    if adjacency.loops is not None:  # one space: a self-loop pairs a node with itself
        looped = np.flatnonzero(adjacency.loops & (near_offsets >= 0))
        rows = near_offsets[looped]
        degrees[looped[_passing(plan, passes, rows, rows)]] += 1
    return degrees


def _end_rows(edge_image: PinnedImage, column: str, node_ids: pa.Array) -> npt.NDArray[np.int64]:
    """The row in the node image whose ids are ``node_ids`` of each edge's ``column`` end (-1: no such node)."""
    ends = edge_image.dataset.to_table(columns=[column]).column(column).cast(node_ids.type)
    rows: npt.NDArray[np.int64] = pc.index_in(ends, value_set=node_ids).fill_null(-1).to_numpy().astype(np.int64)
    return rows


def _column_degrees(
    plan: DegreePlan,
    edge_image: PinnedImage,
    near_image: PinnedImage,
    far_image: PinnedImage,
    passes: PairFilter | None,
    cache_limit: int,
    check: Callable[[], None],
) -> Degrees | None:
    """The near side's :data:`Degrees` over the rows of the near node image, counted from the edge image's columns.

    None when the edge image has more than :data:`COUNTED_EDGES` rows (or more than the cache's
    bound allows at :data:`COUNTED_EDGE_BYTES` a row plus two ids), or a node image's ids do not
    fit the cache.
    A pair of node rows is counted once however many edges join it (a self-loop is the pair of
    its node with itself). The time spent counts towards building the adjacency.
    """
    if edge_image.rows > min(COUNTED_EDGES, cache_limit // COUNTED_EDGE_BYTES):
        return None
    near_nodes = cached_column(near_image, "id", cache_limit, cache_limit)
    far_nodes = near_nodes if far_image.key == near_image.key else cached_column(far_image, "id", cache_limit, cache_limit)
    if near_nodes is None or far_nodes is None:
        return None
    id_bytes = max(nodes.values.nbytes // max(len(nodes.values), 1) for nodes in (near_nodes, far_nodes))  # with its offset
    if edge_image.rows * (COUNTED_EDGE_BYTES + 2 * id_bytes) > cache_limit:
        return None
    started = time.perf_counter()
    check()
    near_column, far_column = ("src", "dst") if plan.side == "src" else ("dst", "src")
    width = max(len(far_nodes.values), 1)
    keys = _end_rows(edge_image, near_column, near_nodes.values) * width  # one column at a time: its ids are freed first
    check()
    far_rows = _end_rows(edge_image, far_column, far_nodes.values)
    keys += far_rows
    keys = keys[(keys >= 0) & (far_rows >= 0)]  # both ends are nodes (a missing near end made its key negative)
    del far_rows
    check()
    keys.sort()
    pairs = distinct_sorted(keys)
    del keys
    if passes is not None:
        pairs = pairs[_passing(plan, passes, pairs // width, pairs % width)]
    degrees = np.bincount(pairs // width, minlength=len(near_nodes.values)).astype(np.int64)
    del pairs  # freed before the counts' time may build the adjacency
    one_space = plan.hop.edge.from_type == plan.hop.edge.to_type
    charge_lookup(edge_image, time.perf_counter() - started, one_space, cache_limit, check)
    return near_nodes.values, np.arange(len(near_nodes.values), dtype=np.int64), degrees


def _grouped(
    bound: BoundRead,
    group_outputs: list[int],
    near_ids: pa.Array,
    near_offsets: npt.NDArray[np.int64],
    near_image: PinnedImage,
    degrees: npt.NDArray[np.int64],
    cache_limit: int,
) -> list[tuple[Any, ...]] | None:
    """The rows of a grouped degree aggregate: per distinct group key values, the sum of its nodes' row counts."""
    nodes = np.flatnonzero(degrees > 0)
    ids = near_ids.take(pa.array(nodes))
    offsets = pa.array(near_offsets[nodes])
    columns: dict[str, pa.Array] = {}
    for index in group_outputs:
        column = bound.outputs[index].column
        assert column is not None  # a group key is a column
        if column.column == "id":
            columns[f"g{index}"] = ids
            continue
        field = near_image.dataset.schema.field(column.column)
        if not cacheable(field.type) or pa.types.is_floating(field.type):  # NaN and -0.0 would need DuckDB's grouping rules
            return None
        held = cached_column(near_image, column.column, cache_limit, cache_limit)
        if held is None:
            return None
        columns[f"g{index}"] = held.values.take(offsets)
    table = pa.table({**columns, "n": pa.array(degrees[nodes])})
    keys = [f"g{index}" for index in group_outputs]
    groups = table.group_by(keys, use_threads=False).aggregate([("n", "sum")])
    sort_keys: list[tuple[str, str]] = []
    order = [
        (f"{'g' if bound.outputs[key.output].func is None else 'c'}{key.output}", key.descending)
        for key in bound.order
        if key.output is not None
    ]
    counts = {f"c{index}": groups.column("n_sum") for index, output in enumerate(bound.outputs) if output.func is not None}
    for name, column in counts.items():
        groups = groups.append_column(name, column)
    for name, descending in [*order, *((key, False) for key in keys)]:
        null = f"{name}:null"
        if null not in groups.column_names:
            groups = groups.append_column(null, pc.is_null(groups.column(name)))
        # NULL below every value: first ascending, last descending
        sort_keys += [(null, "ascending" if descending else "descending"), (name, "descending" if descending else "ascending")]
    if bound.limit is not None and bound.limit < groups.num_rows:  # the groups are distinct: the first N are one set, in one order
        ordered = groups.take(pc.select_k_unstable(groups, k=bound.limit, sort_keys=sort_keys))
    else:
        ordered = groups.take(pc.sort_indices(groups, sort_keys=sort_keys))
    names = [f"g{index}" if output.func is None else f"c{index}" for index, output in enumerate(bound.outputs)]
    values = [ordered.column(name).to_pylist() for name in names]
    return list(zip(*values, strict=True)) if values else []
