"""The vector index behind a ``nearest`` ordering: which nodes may be the nearest, asked of Lance.

A read ordered first by ``nearest($v.prop, $q)`` (:mod:`omnigraph.engine.gq.search`) asks for the
``limit`` rows nearest to ``$q``. Its answer is always the exact one on the rows it considers:
the statement (:mod:`omnigraph.engine.query.plan`) computes every distance itself (DuckDB's
``array_distance``, the Euclidean L2 distance) and orders by it, ties broken by the ids as every
read is. What a vector index changes is which nodes ``$v`` may bind:

- the pinned image of ``$v``'s table holds a vector index on the property (``omnigraph optimize
  --declared-indexes`` builds one for a ``Vector(N) @index`` property) and the table has more
  rows than :func:`candidate_count` asks for: Lance's index search (:data:`NPROBES` partitions
  probed; fragments written after the index was built are searched exhaustively by Lance) gives
  that many candidate ids, nearest first, and the statement binds ``$v`` only to them;
- the answer then has fewer than ``limit`` rows (the match's filters and traversals dropped too
  many candidates): the query runs again without candidates, so a filter never turns the limit
  into fewer rows than exist;
- no index (never built, or the property is declared later): no candidates, the exact scan.

So an answer served by the index may differ from the exact one only where the index missed one
of the true nearest nodes (its recall), and ``omnigraph query --explain`` says which way the
ordering runs (:func:`serving_index`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from omnigraph.engine.gq.read_checker import BoundRead
from omnigraph.engine.gq.search import NearestScore
from omnigraph.engine.query.plan import key_score

NPROBES = 20
"""IVF partitions a vector index search probes."""
CANDIDATE_FACTOR = 4
"""Candidates asked of the index per row of the limit (at least :data:`MIN_CANDIDATES`)."""
MIN_CANDIDATES = 32
VECTOR_INDEX = "VectorIndexDetails"
"""How a Lance index description's ``type_url`` ends for a vector index (pylance 14)."""


@dataclass(frozen=True)
class IndexedNearest:
    """A ``nearest`` ordering an index serves: the variable, its table, the index and how many candidates it gives."""

    score: NearestScore
    table_key: str
    index: str
    candidates: int


def candidate_count(limit: int) -> int:
    """How many candidates the index is asked for to answer ``limit`` rows."""
    return max(CANDIDATE_FACTOR * limit, MIN_CANDIDATES)


def vector_indexes(dataset: Any, column: str) -> list[str]:
    """The names of the vector indexes of the Lance ``dataset`` on ``column``, sorted."""
    return sorted(i.name for i in dataset.describe_indices() if list(i.field_names) == [column] and i.type_url.endswith(VECTOR_INDEX))


def ranked_by(bound: BoundRead) -> NearestScore | None:
    """The ``nearest`` distance ``bound`` is ordered by first (nearest first, a limit of 1 or more, a query vector), or None."""
    if not bound.order or not bound.limit:
        return None
    key = bound.order[0]
    score = key_score(bound, key)
    if score is None or key.descending or score.vector is None:
        return None
    return score


def serving_index(bound: BoundRead, datasets: Mapping[str, Any], row_counts: Mapping[str, int]) -> IndexedNearest | None:
    """The index that serves ``bound``'s ``nearest`` ordering (module docstring), None for the exact scan.

    ``datasets`` and ``row_counts`` hold the pinned image and row count of each table read.
    """
    score = ranked_by(bound)
    if score is None:
        return None
    assert bound.limit is not None  # ranked_by: a nearest ordering has a limit
    table_key = bound.variables[score.var].table.table_key
    count = candidate_count(bound.limit)
    if count >= row_counts[table_key]:
        return None
    names = vector_indexes(datasets[table_key], score.column)
    return IndexedNearest(score, table_key, names[0], count) if names else None


def candidates(indexed: IndexedNearest, dataset: Any) -> pa.Table:
    """The ids (column ``id``) of the nodes the index finds nearest, at most ``indexed.candidates`` of them."""
    score = indexed.score
    assert score.vector is not None  # ranked_by: a nearest ordering with a null query vector is not served
    query = {"column": score.column, "q": list(score.vector), "k": indexed.candidates, "nprobes": NPROBES}
    found = dataset.to_table(columns=["id", "_distance"], nearest=query)
    return found.select(["id"])
