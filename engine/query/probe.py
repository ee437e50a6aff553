"""Probes: a match that starts at known nodes reads only the rows it can reach.

A node variable of the match block is *known* when the query already tells which nodes it may
bind: its ``@key`` members all equal constants (one node,
:func:`omnigraph.engine.query.plan.implied_ids`), or an n-gram index served its ``contains``
(the rows the index found, :mod:`omnigraph.engine.query.search`), or it is an end of a
variable-length traversal whose search found few enough distinct ids there
(:func:`traversal_ends`; the search runs first). From the known variables,
each directed one-hop traversal of the match (``$a edge $b`` or ``$a $k:edge $b``, bounds
``{1,1}``) with a known end is *probed* (:func:`probe_order`): the edge rows whose ``src`` (or,
from a known destination, ``dst``) is one of the known ids are read from the Lance edge image
with that filter (the engine's BTREE on the column serves it) and the other end becomes known
as the ids those rows reach. Probing repeats over the hops not yet probed, in the order the
match writes them, until no hop has a known end. Then the known variables' rows are read from
their node image by ``id`` (:func:`omnigraph.engine.query.node_ids.node_rows`: the image's
in-memory id index, else the BTREE on ``id``), in one read per node table for all of its
known variables together, and the statement (:mod:`omnigraph.engine.query.plan`) reads these
small tables instead of the node and edge tables (each variable the rows of its node table's
read: a superset of its own known rows): a traversal from one node costs its neighbourhood, not
a scan of the graph.

The answer is unchanged: every binding of the match joins a known variable's node to one of its
edges, so the rows read are a superset of the rows any binding uses, and the statement still
applies every join and condition. A probe is skipped (the table is scanned, as without probes)
when its known end holds more than :data:`PROBED_IDS` ids or the edges it finds number more than
:data:`PROBED_EDGES`; the far end of a skipped probe is not known. Variable-length and undirected
traversals are never probed (their own search reads the edges, :mod:`omnigraph.engine.query.session`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.gq.read_checker import BoundRead, Hop
from omnigraph.engine.query.adjacency import PinnedImage, charge_lookup
from omnigraph.engine.query.node_ids import node_rows, read_where_in
from omnigraph.engine.query.plan import quote
from omnigraph.engine.query.session import Session
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import BlobType

PROBED_IDS = 4096
"""The most ids of one known end a probe looks up (and of one variable whose node rows are read by id)."""
PROBED_EDGES = 65536
"""The most edge rows one probe may find before it is given up for a scan of the edges."""

End = Literal["src", "dst"]


def probe_order(bound: BoundRead, known: Iterable[int], follows: Callable[[Hop], bool] | None = None) -> list[tuple[Hop, End]]:
    """The hops of the match probed from the ``known`` variables, in probing order, each with the end it is probed from.

    ``follows``: which hops are followed (default: the directed ``{1,1}`` hops a probe reads).
    Static: it assumes every probe stays within its bounds (module docstring).
    """
    reached = set(known)
    order: list[tuple[Hop, End]] = []
    candidates = [hop for hop in bound.block.hops if (follows or _probeable)(hop)]
    progress = True
    while progress:
        progress = False
        for hop in candidates:
            if any(hop is done for done, _ in order):
                continue
            end: End | None = "src" if hop.src in reached else "dst" if hop.dst in reached else None
            if end is not None:
                order.append((hop, end))
                reached |= {hop.src, hop.dst}
                progress = True
    return order


def traversal_ends(session: Session, bound: BoundRead, relation: Callable[[Hop], str | None]) -> dict[int, list[str]]:
    """The ids each end of the match's variable-length traversals may bind: their pair tables' ends.

    ``relation`` builds (or names) a traversal's pair table ``(a, b)``
    (:class:`omnigraph.engine.query.session.Traversals`). An end is known when it holds at most
    :data:`PROBED_IDS` distinct ids (an end of two traversals: the ids both allow).
    """
    ends: dict[int, list[str]] = {}
    for hop in bound.block.hops:
        pairs = relation(hop)
        if pairs is None:
            continue
        for column, var in (("a", hop.src), ("b", hop.dst)):
            sql = f"SELECT DISTINCT {column} FROM {quote(pairs)} LIMIT {PROBED_IDS + 1}"
            rows = session.fetch(session.execute(sql), PROBED_IDS + 1)
            if len(rows) <= PROBED_IDS:
                found = {str(row[0]) for row in rows}
                ends[var] = sorted(found & set(ends[var])) if var in ends else sorted(found)
    return ends


def _probeable(hop: Hop) -> bool:
    return hop.min_hops == hop.max_hops == 1 and not hop.undirected


@dataclass
class Probed:
    """The session tables a query's probes registered: per node variable, its rows; per hop, its edge rows."""

    nodes: dict[int, str] = field(default_factory=dict)
    edges: dict[Hop, str] = field(default_factory=dict)


def _readable(table: TableDef) -> list[str]:
    """The property columns of ``table`` a read query may use: all but Blobs."""
    return [prop.name for prop in table.properties if not isinstance(prop.type, BlobType)]


def _unique(values: pa.ChunkedArray) -> list[str]:
    return sorted(str(value) for value in pc.unique(values.drop_null()).to_pylist())


def probe(
    session: Session,
    bound: BoundRead,
    images: Mapping[str, PinnedImage],
    known: Mapping[int, list[str]],
    read: Iterable[int],
    cache_limit: int,
) -> Probed:
    """Probe the match of ``bound`` from the ``known`` variables' ids (module docstring); the tables registered in ``session``.

    ``images`` holds the pinned image of each table read; ``read`` lists the known variables
    whose rows are already in a session table (their rows are not read again). ``cache_limit``
    bounds the node images' id indexes (:mod:`omnigraph.engine.query.node_ids`) and the adjacency
    an edge image's lookups pay for (:func:`omnigraph.engine.query.adjacency.charge_lookup`).
    """
    ids = {var: sorted(set(values)) for var, values in known.items()}
    probed = Probed()
    for index, (hop, end) in enumerate(probe_order(bound, ids)):
        near, far = (hop.src, hop.dst) if end == "src" else (hop.dst, hop.src)
        if near not in ids or len(ids[near]) > PROBED_IDS:
            continue
        columns = ["src", "dst"] if hop.edge_var is None else ["id", "src", "dst", *_readable(hop.edge)]
        image = images[hop.edge.table_key]
        started = time.perf_counter()
        edges = read_where_in(image.dataset, columns, end, ids[near], PROBED_EDGES)
        charge_lookup(image, time.perf_counter() - started, hop.edge.from_type == hop.edge.to_type, cache_limit, session.check)
        if edges is None:
            continue
        other: End = "dst" if end == "src" else "src"
        if far in ids:
            edges = edges.filter(pc.is_in(edges[other], pa.array(ids[far], pa.string())))
        # named by its place in the order, not by the count of distinct hops: a match may repeat a
        # hop (equal hops share one key), and a name given twice would replace the earlier table
        probed.edges[hop] = f"probe:edges:{index}"
        session.register(probed.edges[hop], edges)
        ids[far] = _unique(edges[other])
    skip = set(read)
    by_table: dict[str, list[int]] = {}
    for var, values in sorted(ids.items()):
        if var not in skip and len(values) <= PROBED_IDS:
            by_table.setdefault(bound.variables[var].table.table_key, []).append(var)
    for key, variables in sorted(by_table.items()):
        table = bound.variables[variables[0]].table
        wanted = sorted({node_id for var in variables for node_id in ids[var]})
        rows = node_rows(images[key], ["id", *_readable(table)], wanted, cache_limit)
        name = f"probe:nodes:{key}"
        session.register(name, rows)
        probed.nodes |= {var: name for var in variables}
    return probed
