"""What Lance's indexes serve in a read: a ``nearest`` ordering's candidates and ``bm25`` scores.

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

The candidates stop short of the farthest distance the index gave (:func:`candidates`), so nodes
tied at the cut are never chosen among arbitrarily: an answer served by the index may differ
from the exact one only where the index missed one of the true nearest nodes (its recall), and
``omnigraph query --explain`` says which way the ordering runs (:func:`serving_index`).

A ``bm25`` score (:func:`bm25_sql`) is read from a full-text index on its property when the index
covers every row of the pinned image (:func:`text_index`): Lance scores the matching rows with
BM25 (:data:`K1`, :data:`B`) over the index's statistics, which are then those of the image.
Otherwise the statement computes the same formula from the text, with the document count, the
average length and each query token's document frequency read from the table first. ``search``,
``match_text`` and ``fuzzy`` never use an index: they are conditions on the scanned rows.

A ``$v.prop contains "text"`` of the match (:func:`substring_searches`) is served by an n-gram
index on the property (``String @index``): Lance finds the rows whose text holds ``text``
through the index, checking each, and when they are at most :data:`SUBSTRING_ROWS`
(:func:`substring_rows`) those rows replace ``$v``'s table in the statement, so the table's
other rows are never read. With more, the table is scanned and the statement tests ``contains``
itself. The rows are the same either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.gq.read_checker import BoundRead, Column, Const
from omnigraph.engine.gq.search import Bm25Score, NearestScore, tokens
from omnigraph.engine.query.plan import key_score, quote, tokens_sql
from omnigraph.engine.query.session import Session, string_literal
from omnigraph.engine.schema.types import ScalarType

NPROBES = 20
"""IVF partitions a vector index search probes."""
CANDIDATE_FACTOR = 4
"""Candidates asked of the index per row of the limit (at least :data:`MIN_CANDIDATES`)."""
MIN_CANDIDATES = 32
VECTOR_INDEX = "VectorIndexDetails"
"""How a Lance index description's ``type_url`` ends for a vector index (pylance 14)."""


class IndexedNearest(msgspec.Struct, frozen=True):
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
    if not isinstance(score, NearestScore) or key.descending or score.vector is None:
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
    """The ids (column ``id``) of the nodes the index finds nearest, fewer than ``indexed.candidates`` of them.

    When the index gives as many as it was asked for, those at the farthest distance it gave are
    left out: nodes it did not give may lie at exactly that distance too, and the ids break ties,
    so only the nodes strictly nearer are all there (up to the index's recall). An answer they
    cannot fill runs exactly (module docstring).
    """
    score = indexed.score
    assert score.vector is not None  # ranked_by: a nearest ordering with a null query vector is not served
    query = {"column": score.column, "q": list(score.vector), "k": indexed.candidates, "nprobes": NPROBES}
    found = dataset.to_table(columns=["id", "_distance"], nearest=query)
    if found.num_rows >= indexed.candidates:
        found = found.filter(pc.less(found.column("_distance"), pc.max(found.column("_distance"))))
    return found.select(["id"])


K1 = 1.2
"""BM25's term-frequency saturation."""
B = 0.75
"""BM25's length normalisation."""
TEXT_INDEX = "InvertedIndexDetails"
"""How a Lance index description's ``type_url`` ends for a full-text index (pylance 14)."""


def text_index(dataset: Any, column: str) -> str | None:
    """The full-text index on ``column`` that covers every row of the Lance ``dataset`` image, or None.

    Covering: every fragment is indexed and no fragment has deleted rows (the index's statistics
    are then those of exactly the rows the image holds). A deletion is not told apart from one the
    index was rebuilt after (Lance's indexed row count keeps counting deleted rows), so after a
    delete or an update the scores are computed until a compaction and a rebuild.
    """
    fragments = dataset.get_fragments()
    if any(fragment.metadata.deletion_file is not None for fragment in fragments):
        return None
    ids = {fragment.fragment_id for fragment in fragments}
    for index in dataset.describe_indices():
        covered = {fragment for segment in index.segments for fragment in segment.fragment_ids}
        if index.type_url.endswith(TEXT_INDEX) and list(index.field_names) == [column] and ids <= covered:
            return str(index.name)
    return None


def bm25_sql(session: Session, score: Bm25Score, table_key: str, dataset: Any, name: str) -> str:
    """The SQL of ``score`` per row of the statement's variable (:mod:`omnigraph.engine.query.plan`): NULL for a null text.

    With a covering full-text index (:func:`text_index`), Lance's scores of the matching rows
    are registered as the session table ``name`` and looked up by id (0 for the others);
    without, the corpus statistics are read from the table and the formula is written out.
    """
    column = f"v{score.var}.{quote(score.column)}"
    wanted = [] if score.query is None else sorted(set(tokens(score.query)))
    if wanted and text_index(dataset, score.column) is not None:
        from lance.query import MatchQuery

        found = dataset.to_table(columns=["id", "_score"], full_text_query=MatchQuery(" ".join(wanted), score.column))
        session.register(name, found)
        lookup = f"(SELECT CAST(s._score AS DOUBLE) FROM {quote(name)} AS s WHERE s.id = v{score.var}.id)"
        return f"CASE WHEN {column} IS NULL THEN NULL ELSE coalesce({lookup}, 0.0) END"
    return f"CASE WHEN {column} IS NULL THEN NULL ELSE {_formula(session, score, table_key, column, wanted)} END"


def _formula(session: Session, score: Bm25Score, table_key: str, column: str, wanted: list[str]) -> str:
    """BM25 of ``column`` written out with the statistics of the whole table (``0.0`` when no term occurs)."""
    if not wanted:
        return "0.0"
    text = tokens_sql(quote(score.column))
    frequencies = ", ".join(f"sum(CAST(list_contains({text}, {string_literal(token)}) AS BIGINT))" for token in wanted)
    cursor = session.execute(f"SELECT count({quote(score.column)}), avg(len({text})), {frequencies} FROM {quote(table_key)}")
    row = session.fetch(cursor, 1)[0]
    documents, average = int(row[0]), float(row[1] or 0.0)
    terms = ["0.0"]
    length = f"len({tokens_sql(column)})"
    for token, found in zip(wanted, row[2:], strict=True):
        if not found:
            continue
        idf = math.log(1 + (documents - found + 0.5) / (found + 0.5))
        tf = f"len(list_filter({tokens_sql(column)}, lambda t: t = {string_literal(token)}))"
        terms.append(f"{idf!r} * {tf} * {K1 + 1!r} / ({tf} + {K1!r} * (1 - {B!r} + {B!r} * {length} / {average!r}))")
    return " + ".join(terms)


NGRAM_INDEX = "NGramIndexDetails"
"""How a Lance index description's ``type_url`` ends for an n-gram index (pylance 14)."""
SUBSTRING_ROWS = 4096
"""The most rows an n-gram index may find for its ``contains`` to replace the variable's table scan."""
MIN_SUBSTRING = 3
"""The shortest ``contains`` text an n-gram index is asked about (its grams are three characters long)."""


class IndexedSubstring(msgspec.Struct, frozen=True):
    """A ``$v.prop contains "text"`` of the match an n-gram index serves: the variable, its table, the column, the text, the index."""

    var: int
    table_key: str
    column: str
    text: str
    index: str


def ngram_index(dataset: Any, column: str) -> str | None:
    """The first (by name) n-gram index of the Lance ``dataset`` on ``column``, or None."""
    names = sorted(i.name for i in dataset.describe_indices() if list(i.field_names) == [column] and i.type_url.endswith(NGRAM_INDEX))
    return names[0] if names else None


def substring_searches(bound: BoundRead, ngram_of: Callable[[str, str], str | None]) -> list[IndexedSubstring]:
    """Per node variable of the match, its first ``contains`` an n-gram index serves (module docstring), by variable.

    ``ngram_of(table_key, column)`` names the n-gram index the pinned image of the table holds on
    the column (:func:`ngram_index`), or None.

    Served: a comparison of the match block itself (not one inside ``not``/``or``/a sub-pattern)
    ``$v.prop contains "text"`` on a ``String`` property, the text at least
    :data:`MIN_SUBSTRING` characters, the pinned image holding an n-gram index on the property.
    """
    found: dict[int, IndexedSubstring] = {}
    for compare in bound.block.compares:
        column, text = compare.left, compare.right
        if compare.op != "contains" or not isinstance(column, Column) or not isinstance(text, Const):
            continue
        var = bound.variables[column.var]
        if var.is_edge or column.var in found or not isinstance(text.value, str) or len(text.value) < MIN_SUBSTRING:
            continue
        if not (isinstance(column.type, ScalarType) and column.type.name == "String"):
            continue
        index = ngram_of(var.table.table_key, column.column)
        if index is not None:
            found[column.var] = IndexedSubstring(column.var, var.table.table_key, column.column, text.value, index)
    return [found[var] for var in sorted(found)]


def substring_rows(served: IndexedSubstring, dataset: Any, columns: list[str]) -> pa.Table | None:
    """The rows (their ``columns``) of ``dataset`` whose ``served.column`` contains ``served.text``, or None past :data:`SUBSTRING_ROWS`.

    The n-gram index finds them; None means the variable's table is scanned instead. Lance checks
    each row the index proposes against the text, and scans the fragments the index does not cover,
    so the rows are exactly those DuckDB's ``contains`` keeps.
    """
    literal = "'" + served.text.replace("'", "''") + "'"
    scanner = dataset.scanner(columns=columns, filter=f"contains(`{served.column}`, {literal})", limit=SUBSTRING_ROWS + 1)
    reader = scanner.to_reader()
    batches: list[pa.RecordBatch] = []
    rows = 0
    for batch in reader:
        rows += batch.num_rows
        if rows > SUBSTRING_ROWS:
            return None
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=reader.schema)
