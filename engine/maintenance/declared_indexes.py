"""The Lance index each one-property ``@index`` declares, and building it.

``@index`` on a property (or a one-member body ``@index(p)``) asks for the index that serves the
property's reads (:func:`index_kinds`):

- ``Vector(N)``: a vector index, ``IVF_FLAT`` with L2 distance, :func:`partitions` partitions
  (it serves ``nearest``, :mod:`omnigraph.engine.query.search`); it stays pending while the
  column holds no non-null vector (there is nothing to train it on);
- an enum, a number, ``Bool``, ``Date`` or ``DateTime``: a ``BTREE`` (it serves the comparisons
  pushed into the scan);
- a (free-text, not enum) ``String``: an n-gram (``NGRAM``) index named ``<property>:ngram``
  (:func:`index_name`), which serves ``contains``, then a full-text (``INVERTED``) index whose
  tokens are those of :func:`omnigraph.engine.gq.search.tokens` (runs of letters and digits,
  lower-cased; no stemming, stop words or accent folding), which serves ``bm25``
  (:mod:`omnigraph.engine.query.search`). In that order: Lance plans a scan's filter on a column
  with the index built first among those on it, and a full-text index cannot serve ``contains``
  (a full-text search finds its index whatever the order);
- a list and a ``Blob``: none.

The schema declares; ``omnigraph optimize --declared-indexes`` builds (rebuilding an existing
index, so that it covers the rows written since). An index never changes an answer: without one
the same reads scan.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import EnumType, PropertyType, ScalarType, VectorType

IndexKind = Literal["BTREE", "INVERTED", "NGRAM", "IVF_FLAT"]
TEXT_TOKENS: dict[str, Any] = {
    "base_tokenizer": "simple",
    "lower_case": True,
    "stem": False,
    "remove_stop_words": False,
    "ascii_folding": False,
    "max_token_length": None,
    "with_position": False,
}
"""The full-text index's tokenizer: the query language's tokens, nothing more."""
ORDERED_SCALARS = frozenset({"I32", "I64", "U32", "U64", "F32", "F64", "Bool", "Date", "DateTime"})


def index_kinds(ptype: PropertyType) -> tuple[IndexKind, ...]:
    """The indexes ``@index`` builds on a property of ``ptype`` (module docstring), none for a list or a Blob."""
    if isinstance(ptype, VectorType):
        return ("IVF_FLAT",)
    if isinstance(ptype, ScalarType) and ptype.name == "String":
        return ("NGRAM", "INVERTED")  # a filter on the column is served by its first index: the n-gram one
    if isinstance(ptype, EnumType) or (isinstance(ptype, ScalarType) and ptype.name in ORDERED_SCALARS):
        return ("BTREE",)
    return ()


def declared(table: TableDef) -> list[tuple[str, IndexKind]]:
    """(column, kind) of every index ``table``'s one-property ``@index`` declarations ask for, in declaration order."""
    return [(prop.name, kind) for prop in table.properties if prop.index for kind in index_kinds(prop.type)]


def index_name(column: str) -> str:
    """The name of the n-gram index on ``column``: a property name holds no ``:``, so no other index has it."""
    return f"{column}:ngram"


def partitions(vectors: int) -> int:
    """The IVF partitions of a vector index over ``vectors`` non-null vectors: about their square root."""
    return max(1, round(math.sqrt(vectors)))


def buildable(dataset: Any, column: str, kind: IndexKind) -> bool:
    """Whether the index can be built now: a vector index needs at least one non-null vector."""
    return kind != "IVF_FLAT" or dataset.count_rows(filter=f"{column} IS NOT NULL") > 0


def build(dataset: Any, column: str, kind: IndexKind) -> None:
    """Build (or rebuild) the ``kind`` index on ``column`` of the Lance ``dataset`` (a new table version)."""
    if kind == "BTREE":
        dataset.create_scalar_index(column, "BTREE", replace=True)
        return
    if kind == "INVERTED":
        dataset.create_scalar_index(column, "INVERTED", replace=True, **TEXT_TOKENS)
        return
    if kind == "NGRAM":
        dataset.create_scalar_index(column, "NGRAM", replace=True, name=index_name(column))
        return
    vectors = dataset.count_rows(filter=f"{column} IS NOT NULL")
    dataset.create_index(column, "IVF_FLAT", metric="l2", num_partitions=partitions(vectors), replace=True)
