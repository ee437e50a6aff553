"""Rows written straight through the commit path: for tests that need what a load refuses (an edge whose endpoint is not a node)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from omnigraph.engine.graph import Graph
from omnigraph.engine.ops.write import CommitPlan, TableWrite, commit


def table_rows(graph: Graph, key: str, columns: dict[str, list[Any]]) -> pa.Table:
    """``columns`` as the rows of table ``key`` (its stored schema, ``id`` included)."""
    return pa.Table.from_pydict(columns, schema=graph.catalog.table(key).arrow_schema(with_pk=True))


def edge_columns(prefix: str, pairs: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """The ``id``, ``src`` and ``dst`` columns of edges ``pairs``, their ids ``prefix`` and a number."""
    return {"id": [f"{prefix}{n:02d}" for n in range(len(pairs))], "src": [s for s, _ in pairs], "dst": [d for _, d in pairs]}


def commit_writes(graph: Graph, writes: Sequence[TableWrite], branch: str = "main", actor: str = "tests") -> None:
    """One commit of ``writes`` on ``branch``, with no endpoint check (edges may dangle)."""

    def prepare(snapshot: Any, _previous: Any) -> CommitPlan[None]:
        return CommitPlan(tuple(writes), (snapshot.head.commit_id,), "test rows", None)

    commit(graph, branch, prepare, actor=actor)


def overwrite_tables(graph: Graph, tables: dict[str, dict[str, list[Any]]], branch: str = "main", actor: str = "tests") -> None:
    """One commit that overwrites each table of ``tables`` (key -> columns) with those rows, in key order."""
    commit_writes(
        graph, [TableWrite(key, "overwrite", table_rows(graph, key, columns)) for key, columns in sorted(tables.items())], branch, actor
    )
