"""A checked read query with its parameters bound: what :mod:`omnigraph.engine.query` executes.

Variables are numbered in the order of their first appearance in the source (``index``); an
anonymous ``$_`` is a variable of its own at each occurrence (named ``_1``, ``_2``, ...). A
:class:`Block` is the top-level ``match`` or one ``not { ... }``: the variables it introduces,
its traversals, its comparisons (filters and binding constraints) and its nested negations.
Every operand is typed: a :class:`Column` of a variable's node table or a :class:`Const` (``value``
None for a null parameter, which never matches).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import PropertyType

AggregateFunc = Literal["count", "sum", "avg", "min", "max"]


@dataclass(frozen=True)
class Var:
    """A match variable bound to one node of ``table`` per row."""

    name: str
    table: TableDef
    index: int

    @property
    def anonymous(self) -> bool:
        return self.name.startswith("_")


@dataclass(frozen=True)
class Column:
    """``$var.column`` (``column`` is a property name or ``id``)."""

    var: int
    column: str
    type: PropertyType


@dataclass(frozen=True)
class Const:
    """A literal or bound parameter value (coerced to ``type``'s Python form; None = NULL)."""

    value: Any
    type: PropertyType


Operand = Column | Const


@dataclass(frozen=True)
class Compare:
    """``left op right``; ``op`` is ``= != < <= > >=``, ``contains`` or ``starts_with``."""

    left: Operand
    op: str
    right: Operand


@dataclass(frozen=True)
class Hop:
    """A traversal: pairs (source ``src``, destination ``dst``) joined by ``edge`` in
    ``min_hops..max_hops`` breadth-first hops (visited-set rule of the reference)."""

    src: int
    edge: TableDef
    dst: int
    min_hops: int
    max_hops: int


@dataclass(frozen=True)
class Block:
    """One conjunctive block: the variables it introduces, hops, comparisons, negations."""

    variables: tuple[Var, ...]
    hops: tuple[Hop, ...]
    compares: tuple[Compare, ...]
    negations: tuple[Block, ...]


@dataclass(frozen=True)
class Output:
    """One return column: a value (``func`` None) or an aggregate over the group's rows.

    ``column`` is None only for ``count``, which counts the rows of the group (each row binds
    ``var``). ``type`` is the column's type for rendering: the property type for values and
    ``min``/``max``, ``I64`` for ``count``, ``F64`` for ``avg`` and a float ``sum``, ``I64``-like
    integers (unbounded) for an integer ``sum``.
    """

    name: str
    func: AggregateFunc | None
    var: int
    column: Column | None
    type: PropertyType


@dataclass(frozen=True)
class SortKey:
    """An ``order`` key: an output (by index) or a column of a variable that is not returned."""

    output: int | None
    column: Column | None
    descending: bool


@dataclass(frozen=True)
class BoundRead:
    """A checked read query; ``grouped`` when a return item is an aggregate."""

    name: str
    variables: tuple[Var, ...]
    block: Block
    outputs: tuple[Output, ...]
    grouped: bool
    order: tuple[SortKey, ...]
    limit: int | None
