"""Edge endpoint checks on columns: every ``src``/``dst`` must name a node of the right type.

The check behind :func:`omnigraph.engine.records.parse.check_endpoints` and the columnar load: the same
refusal (the first edge by line with a missing endpoint, and the count of every missing
reference), computed with Arrow set membership instead of Python sets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.errors import BadRequest

CommittedNodeIds = Callable[[str, list[str]], set[str]]
"""``(node_type, sorted ids)`` -> the subset of those ids committed as nodes of that type."""

_NO_IDS = pa.array([], pa.utf8())


@dataclass(frozen=True)
class EdgeEnds:
    """One edge table's references: ``src``/``dst`` node ids and each edge's input line."""

    edge_type: str
    from_type: str
    to_type: str
    src: pa.Array
    dst: pa.Array
    lines: pa.Array


def _outside(ids: pa.Array, known: pa.Array) -> pa.Array:
    """The mask of ``ids`` that are not in ``known``."""
    return pc.invert(pc.is_in(ids, value_set=known))


def check_edge_endpoints(
    edges: Sequence[EdgeEnds],
    node_ids: Mapping[str, pa.Array],
    committed_node_ids: CommittedNodeIds,
) -> None:
    """Refuse the first edge (by line, then ``from`` before ``to``) whose endpoint is missing.

    ``node_ids`` holds the node ids of the input by node type. Endpoints not among them are
    looked up with ``committed_node_ids``, called at most once per node type, in type-name
    order, with the sorted distinct ids the input does not hold. The ``BadRequest`` reads
    "line N: missing endpoint: E from|to 'id' is not a T node in the file or the graph";
    ``details["missing_count"]`` counts every missing reference.
    """
    references = []
    for edge in edges:
        references.append((edge.edge_type, "from", edge.from_type, edge.src, edge.lines))
        references.append((edge.edge_type, "to", edge.to_type, edge.dst, edge.lines))
    known = {node_type: ids for node_type, ids in node_ids.items()}
    wanted: dict[str, list[pa.Array]] = {}
    for _, _, node_type, ids, _ in references:
        outside = ids.filter(_outside(ids, known.get(node_type, _NO_IDS)))
        if len(outside):
            wanted.setdefault(node_type, []).append(outside)
    for node_type in sorted(wanted):
        asked = pc.unique(pa.concat_arrays(wanted[node_type])).sort().to_pylist()
        found = sorted(committed_node_ids(node_type, asked) & set(asked))
        known[node_type] = pa.concat_arrays([known.get(node_type, _NO_IDS), pa.array(found, pa.utf8())])
    missing_count = 0
    first: tuple[int, str, str, str, str] | None = None
    for edge_type, end, node_type, ids, lines in references:
        mask = _outside(ids, known.get(node_type, _NO_IDS))
        count = pc.sum(mask).as_py() or 0
        if not count:
            continue
        missing_count += count
        missing_lines, missing_ids = lines.filter(mask), ids.filter(mask)
        at = pc.index(missing_lines, pc.min(missing_lines)).as_py()
        candidate = (missing_lines[at].as_py(), edge_type, end, node_type, missing_ids[at].as_py())
        first = candidate if first is None else min(first, candidate)
    if first is None:
        return
    line, edge_type, end, node_type, node_id = first
    raise BadRequest(
        f"line {line}: missing endpoint: {edge_type} {end} {node_id!r} is not a {node_type} node in the file or the graph",
        {
            "line": line,
            "edge": edge_type,
            "end": end,
            "type_name": node_type,
            "node_id": node_id,
            "missing_count": missing_count,
        },
    )
