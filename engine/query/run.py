"""``query``: run one ``.gq`` read query against a branch (or one of its commits) of a graph.

The query is parsed before any graph data is read (``bad_request`` with line:column; a mutation
is refused naming ``omnigraph mutate``), and checked against the schema of the commit it reads
(the branch head's, or the ``--at`` commit's: time travel answers with the schema of that commit). The answer reads one folded
manifest (:func:`read_point`), so it is the state of one commit however many writers publish
meanwhile. Each table the query names is opened at its pinned Lance image. A small match reached
from keys (:mod:`omnigraph.engine.query.direct`) and a count of a one-hop match over the whole
graph whose adjacency the process holds (:mod:`omnigraph.engine.query.degrees`) are answered
without DuckDB, with the statement's answer. Otherwise each image is registered with a
DuckDB session (:mod:`omnigraph.engine.query.session`); DuckDB scans it as Arrow, pushing the
projection and the column-versus-constant comparisons into the Lance scanner. Variable-length
traversals are built first (:mod:`omnigraph.engine.query.session`), then one statement
(:mod:`omnigraph.engine.query.plan`) produces the rows, which are fetched in batches: no table is
ever turned into Python rows, only the answer is. Reads work at every stamp this program reads
(``4``, ``migrating``, ``5``). :func:`run_query` returns the output document;
:func:`open_answer` streams the rows.

Which catalog image a query reads (:func:`read_point`): a branch head, or a commit of the branch
(``--at``). Time travel: the graph as of commit ``C`` of branch ``B`` is the ``__manifest``
version where ``C`` first became a head
(:func:`omnigraph.engine.manifest.commit_graph.load_commit_graph`); its table rows pin the
images that commit published, which version cleanup keeps while the commit is reachable. ``C``
must be reachable from ``B``'s head (``B``'s own commits and those it inherited or merged), else
``not_found``. Finding it reads one head row per ``__manifest`` version of the live branches, so
a head read (no ``--at``) never pays it.

Output document: ``{query, branch, commit, columns, types, rows: [{column: value}]}``
(``columns`` and ``types``, each column's schema type, are there even when ``rows`` is empty).
Values as JSON values (:func:`renderer`): strings, booleans, integers (an integer ``sum``
included, however large) and ``F64`` numbers as they are; an
``F32`` value (and each item of a vector) as the shortest decimal that reads back as the same
float32 (``2.7``, not ``2.700000047683716``); a Date as ``YYYY-MM-DD``; a DateTime as ISO 8601
UTC with milliseconds (``2024-01-31T09:30:00.000Z``); a list item by item; NULL as None.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import numpy as np

from omnigraph.engine.gq.parser import choose_query
from omnigraph.engine.gq.read_checker import Block, BoundRead, Hop, check_read
from omnigraph.engine.gq.search import Bm25Score
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.commit_graph import ReadPoint, read_point
from omnigraph.engine.manifest.rows import MAIN
from omnigraph.engine.query.adjacency import PinnedImage, cache_limit_bytes
from omnigraph.engine.query.degrees import degree_plan, degree_rows
from omnigraph.engine.query.direct import direct_plan, direct_rows
from omnigraph.engine.query.limits import Guard, QueryCancel, answer_limit_bytes, answer_too_large, timeout_seconds
from omnigraph.engine.query.plan import implied_ids, scores, statement
from omnigraph.engine.query.probe import Probed, probe, traversal_ends
from omnigraph.engine.query.search import bm25_sql, candidates, ngram_index, serving_index, substring_rows, substring_searches
from omnigraph.engine.query.session import MEMORY_ENV, Session, Traversals, memory_limit_mb, open_session
from omnigraph.engine.schema.types import BlobType, EnumType, ListType, PropertyType, ScalarType, VectorType
from omnigraph.engine.schema.values import iso_datetime

Render = Callable[[Any], Any]


def _float32(value: Any) -> float:
    return float(str(np.float32(value)))


def _scalar(name: str) -> Render:
    if name == "F32":
        return _float32
    if name == "F64":
        return float
    if name == "Date":
        return lambda value: value.isoformat()
    if name == "DateTime":
        return iso_datetime
    return lambda value: value


def renderer(ptype: PropertyType) -> Render:
    """The function that turns a non-null DuckDB value of ``ptype`` into its JSON value."""
    if isinstance(ptype, EnumType):
        return str
    if isinstance(ptype, VectorType):
        return lambda value: [_float32(item) for item in value]
    if isinstance(ptype, ListType):
        item = _scalar(ptype.item.name)
        return lambda value: [None if v is None else item(v) for v in value]
    assert isinstance(ptype, ScalarType)
    return _scalar(ptype.name)


def row_renderer(types: list[PropertyType]) -> Callable[[tuple[Any, ...]], list[Any]]:
    """Render one result row (NULLs stay None)."""
    renders = [renderer(ptype) for ptype in types]
    return lambda row: [None if value is None else render(value) for render, value in zip(renders, row, strict=True)]


FETCH_ROWS = 2048


class Answer(msgspec.Struct, frozen=True):
    """An answer being read: which commit, its columns and their schema types, and its rows (in order, once)."""

    query: str
    branch: str
    commit: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    _rows: Iterator[list[Any]]
    _limit_bytes: int
    """The most JSON :meth:`document` collects (:func:`omnigraph.engine.query.limits.answer_limit_bytes`)."""

    def rows(self) -> Iterator[list[Any]]:
        """The rows, each a list of JSON values in column order (consumable once)."""
        return self._rows

    def document(self) -> dict[str, Any]:
        """The whole answer as the output document (collects every row).

        Raises ``resource_limit`` ``answer_bytes`` once the rows hold more JSON than the limit.
        """
        rows: list[dict[str, Any]] = []
        size = 0
        for batch in _chunks(self._rows, FETCH_ROWS):
            size += len(json.dumps(batch, default=str))
            if size > self._limit_bytes:
                raise answer_too_large(self._limit_bytes, size, MEMORY_ENV)
            rows += [dict(zip(self.columns, row, strict=True)) for row in batch]
        return {
            "query": self.query,
            "branch": self.branch,
            "commit": self.commit,
            "columns": list(self.columns),
            "types": list(self.types),
            "rows": rows,
        }


def _chunks(rows: Iterator[list[Any]], size: int) -> Iterator[list[list[Any]]]:
    while batch := list(itertools.islice(rows, size)):
        yield batch


def tables_read(block: Block) -> set[str]:
    """The table keys ``block`` and its nested blocks read: its variables' node tables and its hops' edge tables."""
    keys = {var.table.table_key for var in block.variables} | {hop.edge.table_key for hop in block.hops}
    for inner in block.nested:
        keys |= tables_read(inner)
    return keys


def all_hops(block: Block) -> list[Hop]:
    """The hops of ``block`` and of its nested blocks."""
    return [*block.hops, *(hop for inner in block.nested for hop in all_hops(inner))]


def bind_read(
    graph: Graph, query: str, name: str | None, params: dict[str, Any] | None, branch: str, at: str | None
) -> tuple[ReadPoint, BoundRead]:
    """The commit the read query ``name`` of ``query`` reads on ``branch`` (or ``at``), and the query checked against its schema."""
    chosen = choose_query(query, name, "read")
    point = read_point(graph.manifest, branch, at)
    return point, check_read(chosen, graph.catalog_for(point.snapshot), params or {})


def _batches(session: Session, cursor: Any, bound: BoundRead) -> Iterator[list[Any]]:
    render = row_renderer([output.type for output in bound.outputs])
    while True:
        batch = session.fetch(cursor, FETCH_ROWS)
        if not batch:
            return
        for row in batch:
            yield render(row)


@contextmanager
def open_answer(
    graph: Graph,
    query: str,
    *,
    name: str | None = None,
    params: dict[str, Any] | None = None,
    branch: str = MAIN,
    at: str | None = None,
    repeatable: bool = False,
    cancel: QueryCancel | None = None,
) -> Iterator[Answer]:
    """Run the read query ``name`` of the ``.gq`` text ``query``; the answer's rows can be read inside the block.

    The query is bounded in time, memory and spill disk, and stopped by ``cancel``
    (:mod:`omnigraph.engine.query.limits`).

    ``repeatable``: the same data gives the same answer to the bit, float aggregates included
    (the query runs on one thread, see :func:`omnigraph.engine.query.session.open_session`), and
    a ``limit`` without ``order`` gives the first ``N`` rows in tie-break order rather than any
    ``N`` rows (no early stop); for a process that compares answers across runs, like the
    migrator's answer check.
    """
    point, bound = bind_read(graph, query, name, params, branch, at)
    columns = tuple(output.name for output in bound.outputs)
    types = tuple(output.type.describe() for output in bound.outputs)
    memory_mb = memory_limit_mb()
    cache_limit = cache_limit_bytes(memory_mb)
    with point.reading(graph.manifest):
        datasets = point.open_images(graph.manifest, sorted(tables_read(bound.block)))
        images = {key: pinned_image(graph, point, key, dataset) for key, dataset in datasets.items()}
        started = time.monotonic()  # one time limit for the answer, whether it gives up to the statement or not
        found = _answered_without_statement(bound, images, cache_limit, cancel, started)
        if found is not None:
            render = row_renderer([output.type for output in bound.outputs])
            rendered = iter([render(row) for row in found])
            yield Answer(bound.name, branch, point.commit, columns, types, rendered, answer_limit_bytes(memory_mb))
            return
        with open_session(one_thread=repeatable, cancel=cancel, started=started) as session:
            for table_key, image in images.items():
                session.register(table_key, image.dataset, image.rows)
            edges = {key: images[key] for key in {hop.edge.table_key for hop in all_hops(bound.block)}}
            traversals = Traversals(session, bound, edges=edges, repeatable=repeatable)
            bm25 = {}
            for index, score in enumerate(scores(bound)):
                if isinstance(score, Bm25Score):
                    key = bound.variables[score.var].table.table_key
                    bm25[score] = bm25_sql(session, score, key, datasets[key], f"search:bm25:{index}")
            probed = _probed(session, bound, images, traversals, cache_limit)
            rows = _indexed_rows(session, bound, traversals, datasets, bm25, probed)
            if rows is None:
                views, edge_views = probed.nodes, probed.edges
                sql, values = statement(
                    bound, traversals.relation, bm25=bm25, views=views, edge_views=edge_views, rows=session.rows, repeatable=repeatable
                )
                rows = _batches(session, session.execute(sql, values), bound)
            yield Answer(bound.name, branch, point.commit, columns, types, rows, answer_limit_bytes(memory_mb))


def _answered_without_statement(
    bound: BoundRead, images: dict[str, PinnedImage], cache_limit: int, cancel: QueryCancel | None, started: float
) -> list[tuple[Any, ...]] | None:
    """The rows of the answer computed without DuckDB, or None when the statement must run.

    A direct answer (:mod:`omnigraph.engine.query.direct`) or a degree aggregate
    (:mod:`omnigraph.engine.query.degrees`), within the time limit counted from ``started``.
    """
    direct, degrees = direct_plan(bound), degree_plan(bound)
    if direct is None and degrees is None:
        return None
    guard = Guard(None, timeout_seconds(), cancel, started=started)
    try:
        if direct is not None:
            return direct_rows(bound, direct, images, cache_limit, guard.check)
        assert degrees is not None
        return degree_rows(bound, degrees, images, cache_limit, guard.check)
    finally:
        guard.close()


def pinned_image(graph: Graph, point: ReadPoint, key: str, dataset: Any) -> PinnedImage:
    """The image of table ``key`` that ``point`` pins, opened as ``dataset``."""
    entry = point.snapshot.table(key)
    return PinnedImage(graph.store.dataset_uri(entry.image.path), entry.image.branch, entry.image.version, dataset, entry.row_count)


CANDIDATES = "search:candidates"
"""The session table that holds the ids a vector index found (:mod:`omnigraph.engine.query.search`)."""


def _indexed_rows(
    session: Session,
    bound: BoundRead,
    traversals: Traversals,
    datasets: dict[str, Any],
    bm25: dict[Bm25Score, str],
    probed: Probed,
) -> Iterator[list[Any]] | None:
    """The rows of a ``nearest`` ordering a vector index serves; None when the exact statement must run.

    None also when the index's candidates leave the limit unfilled (:mod:`omnigraph.engine.query.search`).
    """
    indexed = serving_index(bound, datasets, session.rows)
    if indexed is None:
        return None
    assert bound.limit is not None  # serving_index: a nearest ordering has a limit
    session.register(CANDIDATES, candidates(indexed, datasets[indexed.table_key]))
    candidate = {indexed.score.var: CANDIDATES}
    sql, values = statement(bound, traversals.relation, candidate, bm25, views=probed.nodes, edge_views=probed.edges, rows=session.rows)
    found = session.fetch(session.execute(sql, values), bound.limit)
    if len(found) < bound.limit:
        return None
    render = row_renderer([output.type for output in bound.outputs])
    return iter([render(row) for row in found])


def _probed(session: Session, bound: BoundRead, images: dict[str, PinnedImage], traversals: Traversals, cache_limit: int) -> Probed:
    """The rows the match can reach from its known variables (:mod:`omnigraph.engine.query.probe`), registered in ``session``.

    Known: a variable whose key members equal constants, an end of a variable-length traversal
    (its search runs here, :func:`omnigraph.engine.query.probe.traversal_ends`), and one whose
    ``contains`` an n-gram index serves with few enough rows
    (:func:`omnigraph.engine.query.search.substring_rows`; every column but blobs, which a read
    never uses).
    """
    known = traversal_ends(session, bound, traversals.relation)
    for var, node_id in implied_ids(bound.block):
        known[var] = [node_id] if node_id in known.get(var, [node_id]) else []
    found: dict[int, str] = {}
    for served in substring_searches(bound, lambda key, column: ngram_index(images[key].dataset, column)):
        table = bound.variables[served.var].table
        columns = ["id"] + [prop.name for prop in table.properties if not isinstance(prop.type, BlobType)]
        rows = substring_rows(served, images[served.table_key].dataset, columns)
        if rows is not None:
            found[served.var] = f"search:substring:{served.var}"
            session.register(found[served.var], rows)
            ids = [str(value) for value in rows.column("id").to_pylist()]
            known[served.var] = sorted(set(ids) & set(known[served.var])) if served.var in known else ids
    probed = probe(session, bound, images, known, found, cache_limit)
    probed.nodes |= found
    return probed


def run_query(
    graph: Graph,
    query: str,
    *,
    name: str | None = None,
    params: dict[str, Any] | None = None,
    branch: str = MAIN,
    at: str | None = None,
) -> dict[str, Any]:
    """The output document of the read query ``name`` of the ``.gq`` text ``query`` (see the module docstring)."""
    with open_answer(graph, query, name=name, params=params, branch=branch, at=at) as answer:
        return answer.document()
