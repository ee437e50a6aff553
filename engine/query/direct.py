"""Direct answers: a match reached from keyed nodes, answered from the rows it reaches, without DuckDB.

A query whose answer is a handful of rows found from one key (``$p: Person { name: $n }``, then
``$p knows $f``) would spend most of its time handing those rows to DuckDB and planning a
statement over them. :func:`direct_plan` says whether a query can be answered here instead; the
query is *direct* when:

- every match variable is a node, and the block has no negation, other condition (``or``,
  ``not``, ``exists``, null tests...), text match or search score;
- every hop is directed and has no edge variable, and following hops from the variables whose
  ``@key`` members all equal constants (:func:`omnigraph.engine.query.plan.implied_ids`)
  reaches every hop and every variable (:func:`omnigraph.engine.query.probe.probe_order`); a
  variable-length hop is not one whose search the statement stops early (a ``limit`` without
  ``order``, :func:`omnigraph.engine.query.session.stop_after`);
- every comparison is ``= != < <= > >=`` between columns and constants of one kind whose Python
  comparison is SQL's: strings and enums (by code point, which is DuckDB's byte order of UTF-8),
  integers (exactly, whatever their widths), booleans, Dates, DateTimes; no float (NaN orders
  differently), list or vector;
- the return is columns (no aggregate), ordered by columns or returned columns of scalar types;
  or it is counts of the match's rows only (``count($v)``, no group key), ordered by them if at all.

:func:`direct_rows` then follows the hops itself, each from its known end: a ``{1,1}`` hop's edges
through the edge image's adjacency when the process's cache holds it, else a Lance read filtered
on ``src`` or ``dst`` (the engine's BTREE), whose time counts towards building the adjacency
(:func:`omnigraph.engine.query.adjacency.charge_lookup`); a variable-length hop by the
adjacency's search (:func:`omnigraph.engine.query.adjacency.search`, the statement's own), over
the adjacency the cache holds or builds first, as the statement's traversal would (one entry: a
direct answer that gives up leaves it built for the statement); each variable's node rows through the image's id index
(:mod:`omnigraph.engine.query.node_ids`). The bindings are joined hop by hop in Python (an edge
or a traversal to a node its table lacks binds nothing), filtered by the comparisons (NULL never
matches), and ordered as the statement orders them (:mod:`omnigraph.engine.query.plan`): the
``order`` keys (ascending puts NULL first, descending last; NaN above every number, as DuckDB
sorts it), then the variables' ids ascending; a ``limit`` without ``order`` gives the first ``N``
rows of that order. A count is the number of bindings (the statement counts distinct bindings
too). The answer is the statement's, row for row. It gives up (None: the query runs in DuckDB)
when a known end holds more than :data:`~omnigraph.engine.query.probe.PROBED_IDS` ids, a hop
finds more than :data:`~omnigraph.engine.query.probe.PROBED_EDGES` edges (a traversal: more
pairs than that, or than ``PROBED_IDS`` a start), a variable-length hop's adjacency does not fit
the cache's bound or beside the other traversals' (more than one to build is left to the
statement; known before anything else is read), or the bindings exceed :data:`MOST_BINDINGS`: a small answer
costs its rows, and a larger one is DuckDB's work.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
import pyarrow as pa

from omnigraph.engine.gq.read_checker import BoundRead, Column, Compare, Const, Hop, Operand
from omnigraph.engine.query import probe
from omnigraph.engine.query.adjacency import (
    EDGE_BYTES,
    Adjacency,
    PinnedImage,
    Walk,
    adjacency_cache,
    build_adjacency,
    charge_lookup,
    pair_table,
    search,
)
from omnigraph.engine.query.node_ids import node_rows, read_where_in
from omnigraph.engine.query.plan import implied_ids
from omnigraph.engine.query.probe import End, probe_order
from omnigraph.engine.query.session import stop_after
from omnigraph.engine.schema.types import EnumType, PropertyType, ScalarType

MOST_BINDINGS = 4096
"""The most bindings of the match a direct answer holds before it leaves the query to DuckDB."""

_FAMILIES = {
    "String": "text",
    "Bool": "bool",
    "I32": "integer",
    "I64": "integer",
    "U32": "integer",
    "U64": "integer",
    "Date": "date",
    "DateTime": "datetime",
}
_SORTABLE = {*_FAMILIES, "F32", "F64"}
_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _family(ptype: PropertyType) -> str | None:
    """The kind of value a comparison reads, when Python compares it as SQL does (module docstring); else None."""
    if isinstance(ptype, EnumType):
        return "text"
    return _FAMILIES.get(ptype.name) if isinstance(ptype, ScalarType) else None


def _comparable(compare: Compare) -> bool:
    sides = (compare.left, compare.right)
    families = {_family(side.type) for side in sides}
    return compare.op in _OPERATORS and len(families) == 1 and None not in families and any(isinstance(s, Column) for s in sides)


def _sortable(ptype: PropertyType) -> bool:
    return isinstance(ptype, EnumType) or (isinstance(ptype, ScalarType) and ptype.name in _SORTABLE)


def _followable(hop: Hop) -> bool:
    """A hop a direct answer follows: directed, without an edge variable."""
    return not hop.undirected and hop.edge_var is None


def _listed(bound: BoundRead) -> bool:
    """Whether the return is columns, ordered (if at all) by columns of scalar types."""
    if any(output.func is not None or output.score is not None or output.column is None for output in bound.outputs):
        return False
    for key in bound.order:
        column = key.column if key.output is None else bound.outputs[key.output].column
        if key.score is not None or column is None or not _sortable(column.type):
            return False
    return True


def _counted(bound: BoundRead) -> bool:
    """Whether the return is counts of the match's rows only (no group key), ordered (if at all) by them."""
    if any(output.func != "count" or output.score is not None for output in bound.outputs):
        return False
    return all(key.output is not None and key.score is None for key in bound.order)


class DirectPlan(msgspec.Struct, frozen=True):
    """How a direct answer reads: the id each keyed variable is looked up by, then the probes it follows, in order."""

    keyed: tuple[tuple[int, str], ...]
    """(variable, id), by variable (:func:`omnigraph.engine.query.plan.implied_ids`)."""
    order: tuple[tuple[Hop, End], ...]


def direct_plan(bound: BoundRead) -> DirectPlan | None:
    """The plan of a direct answer of ``bound``; None when the query is not direct (module docstring)."""
    block = bound.block
    if block.negations or block.conditions or block.text_matches:
        return None
    if any(var.is_edge for var in block.variables):
        return None
    if not all(_followable(hop) for hop in block.hops):
        return None
    if any(stop_after(bound, hop) is not None for hop in block.hops if hop.max_hops > 1):
        return None  # the statement's search stops once it has the rows a limit without order asks for
    if not (_counted(bound) if bound.grouped else _listed(bound)):
        return None
    if not all(_comparable(compare) for compare in block.compares):
        return None
    keyed = tuple(sorted(implied_ids(block)))
    if not keyed:
        return None
    known = {var for var, _ in keyed}
    order = probe_order(bound, known, _followable)
    reached = known | {hop.src for hop, _ in order} | {hop.dst for hop, _ in order}
    if len(order) != len(block.hops) or reached != {var.index for var in block.variables}:
        return None
    return DirectPlan(keyed, tuple(order))


def _room_to_build(plan: DirectPlan, images: Mapping[str, PinnedImage], cache_limit: int) -> bool:
    """Whether the variable-length hops' adjacencies can be held together: at most one missing, and room for it beside the rest.

    Otherwise building them here could evict one another (and the statement, should the direct
    answer give up, build them again): the statement is left to build each as it needs it.
    """
    cache = adjacency_cache()
    walked = list({images[hop.edge.table_key].key: images[hop.edge.table_key] for hop, _ in plan.order if hop.max_hops > 1}.items())
    held = [cache.held_bytes(key) for key, _ in walked]
    missing = [image for (_, image), size in zip(walked, held, strict=True) if size is None]
    if not missing:
        return True
    return len(missing) == 1 and sum(size or 0 for size in held) + missing[0].rows * EDGE_BYTES <= cache_limit


def _adjacency(image: PinnedImage, hop: Hop, cache_limit: int, check: Callable[[], None]) -> Adjacency | None:
    """The adjacency of ``hop``'s edge image: a ``{1,1}`` hop's if the cache holds it, a variable-length hop's built if missing.

    A variable-length hop's adjacency is built as the statement's traversal would build it
    (within ``cache_limit`` bytes), so a direct answer that gives up later leaves it to the
    statement; None when it does not fit. One look (one hit) per hop.
    """
    cache = adjacency_cache()
    if hop.max_hops == 1:
        held = cache.peek(image.key)
        return held if isinstance(held, Adjacency) else None
    one_space = hop.edge.from_type == hop.edge.to_type
    return cache.get(image.key, lambda: build_adjacency(image.dataset, one_space, check), cache_limit, image.rows * EDGE_BYTES)


def _traversal_first(step: tuple[Hop, End]) -> bool:
    """Sort key: variable-length hops before ``{1,1}`` hops."""
    return step[0].max_hops == 1


def _hop_pairs(
    image: PinnedImage,
    adjacency: Adjacency | None,
    hop: Hop,
    end: End,
    near: Sequence[str],
    cache_limit: int,
    check: Callable[[], None],
) -> set[tuple[str, str]] | None:
    """The (src, dst) pairs of ``hop``'s edges whose ``end`` is one of ``near``; None past the probes' bound on edges.

    Read from the edge image's ``adjacency`` when the cache holds it (a variable-length hop's always
    is: :func:`_adjacency` builds it), else through the BTREE, whose time counts towards building the
    adjacency (:func:`omnigraph.engine.query.adjacency.charge_lookup`).
    """
    if hop.max_hops > 1:
        assert adjacency is not None  # direct_rows gives up first when it does not fit
        return _traversed_pairs(adjacency, hop, end, near, check)
    if adjacency is not None:
        return _adjacent_pairs(adjacency, end, near)
    far: End = "dst" if end == "src" else "src"
    started = time.perf_counter()
    # From one node, the near end of every edge found is that node: only the far end is read.
    edges = read_where_in(image.dataset, [far] if len(near) == 1 else ["src", "dst"], end, near, probe.PROBED_EDGES)
    charge_lookup(image, time.perf_counter() - started, hop.edge.from_type == hop.edge.to_type, cache_limit, check)
    if edges is None:
        return None
    others = edges.column(far).to_pylist()
    nears = [near[0]] * len(others) if len(near) == 1 else edges.column(end).to_pylist()
    return {(one, other) if end == "src" else (other, one) for one, other in zip(nears, others, strict=True)}


def _traversed_pairs(
    adjacency: Adjacency, hop: Hop, end: End, near: Sequence[str], check: Callable[[], None]
) -> set[tuple[str, str]] | None:
    """:func:`_hop_pairs` of a variable-length hop: the adjacency's search from ``near``; None past the edges' bound.

    The search is the one a DuckDB statement's traversal makes
    (:func:`omnigraph.engine.query.adjacency.search`: shortest distances, self-loops), backwards
    from a known destination.
    """
    backwards = end == "dst"
    seeds = adjacency.positions(pa.array(list(near), pa.string()), "targets" if backwards else "sources")
    walk = Walk(hop.min_hops, hop.max_hops, backwards=backwards, undirected=False)
    # A seed's pairs reach distinct nodes: past PROBED_IDS pairs a seed, the far end holds too many ids anyway.
    most = min(probe.PROBED_EDGES, len(seeds) * probe.PROBED_IDS)
    found = search(adjacency, seeds, walk, check=check, enough=None, limit_bytes=most * adjacency.pair_bytes())
    if found is None or len(found.seeds) > most:
        return None
    pairs = pair_table(adjacency, found, backwards=backwards)
    return set(zip(pairs.column("a").to_pylist(), pairs.column("b").to_pylist(), strict=True))


def _adjacent_pairs(adjacency: Adjacency, end: End, near: Sequence[str]) -> set[tuple[str, str]] | None:
    """:func:`_hop_pairs` read from the edge image's adjacency (its self-loops are flags of their nodes)."""
    positions = adjacency.positions(pa.array(list(near), pa.string()), "sources" if end == "src" else "targets")
    csr = adjacency.forward if end == "src" else adjacency.backward
    far_ids = adjacency.targets if end == "src" else adjacency.sources
    near_ids = adjacency.sources if end == "src" else adjacency.targets
    pairs: set[tuple[str, str]] = set()
    for position in positions.tolist():
        start, stop = int(csr.offsets[position]), int(csr.offsets[position + 1])
        if len(pairs) + stop - start > probe.PROBED_EDGES:
            return None
        node = str(near_ids[position].as_py())
        for other in far_ids.take(csr.neighbours[start:stop]).to_pylist():
            pairs.add((node, str(other)) if end == "src" else (str(other), node))
        if adjacency.loops is not None and adjacency.loops[position]:
            pairs.add((node, node))
    return pairs


def _needed_columns(bound: BoundRead) -> dict[int, list[str]]:
    """Per variable, the columns its rows must hold: ``id``, then what the comparisons, outputs and order keys read, sorted."""
    needed: dict[int, set[str]] = {var.index: {"id"} for var in bound.block.variables}
    operands: list[Operand] = [side for compare in bound.block.compares for side in (compare.left, compare.right)]
    columns = [*operands, *(output.column for output in bound.outputs), *(key.column for key in bound.order)]
    for column in columns:
        if isinstance(column, Column):
            needed[column.var].add(column.column)
    return {var: ["id", *sorted(names - {"id"})] for var, names in needed.items()}


Binding = tuple[str, ...]
"""One id per variable of the match, each in its slot (:func:`_bind`)."""


def direct_rows(
    bound: BoundRead, plan: DirectPlan, images: Mapping[str, PinnedImage], cache_limit: int, check: Callable[[], None]
) -> list[tuple[Any, ...]] | None:
    """The answer's rows (each value as DuckDB would give it), or None when the query is left to DuckDB (module docstring).

    ``plan`` is :func:`direct_plan`'s; ``images`` holds each table's pinned image; ``cache_limit``
    bounds the id indexes (:mod:`omnigraph.engine.query.node_ids`); ``check`` (the time limit and
    cancellation) runs before every read.
    """
    if not _room_to_build(plan, images, cache_limit):
        return None
    # the traversals' first: a {1,1} hop's look then finds what a traversal of its table just built
    by_hop = {hop: _adjacency(images[hop.edge.table_key], hop, cache_limit, check) for hop, _ in sorted(plan.order, key=_traversal_first)}
    if any(by_hop[hop] is None for hop, _ in plan.order if hop.max_hops > 1):
        return None  # a variable-length hop's adjacency does not fit: give up before reading anything
    adjacencies = [by_hop[hop] for hop, _ in plan.order]
    ids = {var: [node_id] for var, node_id in plan.keyed}
    pairs: list[set[tuple[str, str]]] = []
    for (hop, end), adjacency in zip(plan.order, adjacencies, strict=True):
        near, far = (hop.src, hop.dst) if end == "src" else (hop.dst, hop.src)
        if len(ids[near]) > probe.PROBED_IDS:
            return None
        check()
        found = _hop_pairs(images[hop.edge.table_key], adjacency, hop, end, ids[near], cache_limit, check)
        if found is None:
            return None
        if far in ids:
            allowed = set(ids[far])
            found = {pair for pair in found if (pair[1] if end == "src" else pair[0]) in allowed}
        pairs.append(found)
        ids[far] = sorted({pair[1] if end == "src" else pair[0] for pair in found})
    if any(len(values) > probe.PROBED_IDS for values in ids.values()):
        return None
    rows = _read_rows(bound, ids, images, cache_limit, check)
    joined = _bind(plan, pairs, ids, rows)
    if joined is None:
        return None
    bindings, slots = joined
    kept = [binding for binding in bindings if all(_holds(compare, binding, slots, rows) for compare in bound.block.compares)]
    return _answer(bound, kept, slots, rows)


def _read_rows(
    bound: BoundRead, ids: Mapping[int, list[str]], images: Mapping[str, PinnedImage], cache_limit: int, check: Callable[[], None]
) -> dict[int, dict[str, dict[str, Any]]]:
    """Per variable, its nodes' rows by id (the columns it needs), one read per node table for all of its variables."""
    needed = _needed_columns(bound)
    by_table: dict[str, list[int]] = {}
    for declared in bound.block.variables:
        by_table.setdefault(declared.table.table_key, []).append(declared.index)
    rows: dict[int, dict[str, dict[str, Any]]] = {}
    for key, variables in sorted(by_table.items()):
        columns = ["id", *sorted({name for var in variables for name in needed[var]} - {"id"})]
        wanted = sorted({node_id for var in variables for node_id in ids[var]})
        check()
        image = images[key]
        table = node_rows(image, columns, wanted, cache_limit)
        by_id = {str(row["id"]): row for row in table.to_pylist()}
        for var in variables:
            rows[var] = {node_id: by_id[node_id] for node_id in ids[var] if node_id in by_id}
    return rows


def _bind(
    plan: DirectPlan,
    pairs: list[set[tuple[str, str]]],
    ids: Mapping[int, list[str]],
    rows: Mapping[int, Mapping[str, Any]],
) -> tuple[list[Binding], dict[int, int]] | None:
    """Every binding of the match's variables, joined hop by hop, and each variable's slot in a binding.

    The keyed variables take the first slots, then each hop's far end as the hop reaches it. None
    past :data:`MOST_BINDINGS` bindings.
    """
    bindings: list[Binding] = [()]
    slots: dict[int, int] = {}
    for var, _ in plan.keyed:
        bindings = [(*binding, node_id) for binding in bindings for node_id in ids[var] if node_id in rows[var]]
        slots[var] = len(slots)
    for (hop, end), found in zip(plan.order, pairs, strict=True):
        near, far = (hop.src, hop.dst) if end == "src" else (hop.dst, hop.src)
        reach: dict[str, list[str]] = {}
        for src, dst in sorted(found):
            near_id, far_id = (src, dst) if end == "src" else (dst, src)
            reach.setdefault(near_id, []).append(far_id)
        if far in slots:
            bindings = [b for b in bindings if b[slots[far]] in reach.get(b[slots[near]], ())]
            continue
        bindings = [(*b, far_id) for b in bindings for far_id in reach.get(b[slots[near]], ()) if far_id in rows[far]]
        slots[far] = len(slots)
        if len(bindings) > MOST_BINDINGS:
            return None
    return bindings, slots


def _value(operand: Operand, binding: Binding, slots: Mapping[int, int], rows: Mapping[int, Mapping[str, Any]]) -> Any:
    if isinstance(operand, Const):
        return operand.value
    return rows[operand.var][binding[slots[operand.var]]][operand.column]


def _holds(compare: Compare, binding: Binding, slots: Mapping[int, int], rows: Mapping[int, Mapping[str, Any]]) -> bool:
    """Whether ``compare`` is true for ``binding`` (NULL on either side: false)."""
    left, right = _value(compare.left, binding, slots, rows), _value(compare.right, binding, slots, rows)
    return left is not None and right is not None and _OPERATORS[compare.op](left, right)


def _sort_value(value: Any) -> tuple[Any, ...]:
    """``value`` as a key that orders as DuckDB orders it among non-NULL values (NaN above every number)."""
    if isinstance(value, float) and math.isnan(value):
        return (1,)
    return (0, value)


def _answer(
    bound: BoundRead, bindings: list[Binding], slots: Mapping[int, int], rows: Mapping[int, Mapping[str, Any]]
) -> list[tuple[Any, ...]]:
    """The output rows of ``bindings``, ordered and limited as the statement does (module docstring)."""
    if bound.grouped:  # counts only: one row, each count the number of bindings
        return [tuple(len(bindings) for _ in bound.outputs)][: bound.limit]
    top = [slots[var.index] for var in bound.block.variables]
    ordered = sorted(bindings, key=lambda binding: [binding[slot] for slot in top])  # the tie-break: ids ascending
    for key in reversed(bound.order):  # stable sorts, the last key first
        column = key.column if key.output is None else bound.outputs[key.output].column
        assert column is not None  # direct_plan: every key reads a column

        def sort_key(binding: Binding, column: Column = column, descending: bool = key.descending) -> tuple[Any, ...]:
            value = _value(column, binding, slots, rows)
            # ascending NULL first, descending NULL last: NULL sorts below every value either way
            return (0,) if value is None else (1, _sort_value(value))

        ordered.sort(key=sort_key, reverse=key.descending)
    if bound.limit is not None:
        ordered = ordered[: bound.limit]
    outputs = [output.column for output in bound.outputs]
    return [tuple(_value(column, binding, slots, rows) for column in outputs if column is not None) for binding in ordered]
