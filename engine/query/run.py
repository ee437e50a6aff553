"""``query``: run one ``.gq`` read query against a branch (or one of its commits) of a graph.

The query is parsed and checked before any graph data is read (``bad_request`` with
line:column; a mutation is refused naming ``omnigraph mutate``). The answer reads one folded
manifest (:mod:`omnigraph.engine.query.at`), so it is the state of one commit however many writers
publish meanwhile. Each table the query names is opened at its pinned Lance image and
registered with a DuckDB session (:mod:`omnigraph.engine.query.session`); DuckDB scans it as Arrow,
pushing the projection and the column-versus-constant comparisons into the Lance scanner.
Variable-length traversals are built first (:mod:`omnigraph.engine.query.traverse`), then one statement
(:mod:`omnigraph.engine.query.plan`) produces the rows, which are fetched in batches: no table is ever
turned into Python rows, only the answer is. Reads work at every stamp this program reads
(``4``, ``migrating``, ``5``).

Output document: ``{query, branch, commit, columns, rows: [{column: value}]}`` (values as
:mod:`omnigraph.engine.query.render` says; ``columns`` is there even when ``rows`` is empty).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from omnigraph.engine.gq.bound_read import Block, BoundRead
from omnigraph.engine.gq.read_checker import check_read
from omnigraph.engine.gq.select import choose_query
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import MAIN
from omnigraph.engine.query.at import read_point
from omnigraph.engine.query.plan import statement
from omnigraph.engine.query.render import row_renderer
from omnigraph.engine.query.session import Session, open_session
from omnigraph.engine.query.traverse import Traversals
from omnigraph.engine.storage.lance_io import open_pinned

FETCH_ROWS = 2048


@dataclass(frozen=True)
class Answer:
    """An answer being read: which commit, its columns, and its rows (in order, once)."""

    query: str
    branch: str
    commit: str
    columns: tuple[str, ...]
    _rows: Iterator[list[Any]]

    def rows(self) -> Iterator[list[Any]]:
        """The rows, each a list of JSON values in column order (consumable once)."""
        return self._rows

    def document(self) -> dict[str, Any]:
        """The whole answer as the output document (collects every row)."""
        return {
            "query": self.query,
            "branch": self.branch,
            "commit": self.commit,
            "columns": list(self.columns),
            "rows": [dict(zip(self.columns, row, strict=True)) for row in self._rows],
        }


def _tables(block: Block) -> set[str]:
    keys = {var.table.table_key for var in block.variables} | {hop.edge.table_key for hop in block.hops}
    for negation in block.negations:
        keys |= _tables(negation)
    return keys


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
    source: str,
    *,
    name: str | None = None,
    params: dict[str, Any] | None = None,
    branch: str = MAIN,
    at: str | None = None,
    repeatable: bool = False,
) -> Iterator[Answer]:
    """Run the read query ``name`` of ``source``; the answer's rows can be read inside the block.

    ``repeatable``: the same data gives the same answer to the bit, float aggregates included
    (the query runs on one thread, see :func:`omnigraph.engine.query.session.open_session`); for a process
    that compares answers across runs, like the migrator's answer check."""
    bound = check_read(choose_query(source, name, "read"), graph.catalog, params or {})
    point = read_point(graph.manifest, branch, at)
    with graph.manifest.reading(point.manifest_branch), open_session(one_thread=repeatable) as session:
        for table_key in sorted(_tables(bound.block)):
            session.connection.register(table_key, open_pinned(graph.store, point.snapshot.table(table_key).image))
        sql, values = statement(bound, Traversals(session, bound).relation)
        cursor = session.execute(sql, values)
        columns = tuple(output.name for output in bound.outputs)
        yield Answer(bound.name, branch, point.commit, columns, _batches(session, cursor, bound))


def run_query(
    graph: Graph,
    source: str,
    *,
    name: str | None = None,
    params: dict[str, Any] | None = None,
    branch: str = MAIN,
    at: str | None = None,
) -> dict[str, Any]:
    """The output document of the read query ``name`` of ``source`` (see the module docstring)."""
    with open_answer(graph, source, name=name, params=params, branch=branch, at=at) as answer:
        return answer.document()
