"""The syntax tree of a ``.gq`` source, and :class:`GqError`, the error of a refused source.

Every node keeps its token (positions for error messages). A query is a mutation
(``statements``) or a read (``read``: ``match``/``return``/``order``/``limit``); both share
parameters, literals and values. A :class:`GqError` says where the refusal is (line and column)
and which token was refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.lexer import Token
from omnigraph.engine.schema.types import PropertyType


class GqError(BadRequest):
    """A refused ``.gq`` source (syntax or type).

    The message reads ``gq error at LINE:COLUMN near 'TOKEN': ...``; ``details`` holds
    ``{"line", "column", "token"}`` (1-based, columns count characters; ``token`` is the source
    text of the offending token, ``""`` at the end of the input), plus any ``extra`` details.
    """

    def __init__(self, message: str, line: int, column: int, token: str, extra: dict[str, Any] | None = None) -> None:
        shown = repr(token) if token else "end of input"
        super().__init__(
            f"gq error at {line}:{column} near {shown}: {message}",
            {"line": line, "column": column, "token": token, **(extra or {})},
        )
        self.line = line
        self.column = column
        self.token = token


@dataclass(frozen=True)
class LiteralValue:
    """A literal value as JSON would spell it (str, int, float, bool, None or a list of them).

    ``typed`` is ``"Date"`` or ``"DateTime"`` for ``date("...")``/``datetime("...")``, whose
    ``value`` is then the text between the quotes.
    """

    value: Any
    token: Token
    typed: str | None = None


@dataclass(frozen=True)
class ParamRef:
    """``$name``."""

    name: str
    token: Token


@dataclass(frozen=True)
class Now:
    """``now()``: the mutation's start time (DateTime only)."""

    token: Token


Value = LiteralValue | ParamRef | Now


@dataclass(frozen=True)
class Param:
    """A declared parameter ``$name: Type`` (``?`` = nullable, may be omitted or null)."""

    name: str
    type: PropertyType
    nullable: bool
    token: Token


@dataclass(frozen=True)
class Assignment:
    """``prop: value``; ``from``/``to`` name an edge's endpoints."""

    prop: str
    value: Value
    token: Token


@dataclass(frozen=True)
class Predicate:
    """``where prop op value``."""

    prop: str
    op: str
    value: Value
    token: Token


Verb = Literal["insert", "update", "delete"]
"""The verb of a mutation statement."""
AggregateFunc = Literal["count", "sum", "avg", "min", "max"]
"""The aggregate function of a return item."""


@dataclass(frozen=True)
class Statement:
    """One ``insert``, ``update`` or ``delete`` on a node or edge type."""

    verb: Verb
    type_name: str
    assignments: tuple[Assignment, ...]
    where: Predicate | None
    token: Token
    type_token: Token


@dataclass(frozen=True)
class PropRef:
    """``$var.prop`` in a read query (``prop`` may be ``id``)."""

    var: str
    prop: str
    token: Token
    prop_token: Token


Operand = PropRef | LiteralValue | ParamRef


@dataclass(frozen=True)
class Binding:
    """``$var: Type`` or ``$var: Type { prop: value, ... }`` (each member an equality)."""

    var: str
    type_name: str
    constraints: tuple[Assignment, ...]
    token: Token
    type_token: Token


@dataclass(frozen=True)
class Traversal:
    """``$src edge $dst {min,max}``; ``edge`` is the edge type's name with a lower-case first letter."""

    src: str
    edge: str
    dst: str
    min_hops: int
    max_hops: int
    token: Token
    edge_token: Token
    dst_token: Token


@dataclass(frozen=True)
class Filter:
    """``left op right``; ``op`` is ``= != < <= > >=``, ``contains`` or ``starts_with``."""

    left: Operand
    op: str
    right: Operand
    op_token: Token


@dataclass(frozen=True)
class Negation:
    """``not { clause+ }``."""

    clauses: tuple[Clause, ...]
    token: Token


Clause = Binding | Traversal | Filter | Negation


@dataclass(frozen=True)
class Aggregate:
    """``count($v)`` (``prop`` None) or ``sum|avg|min|max($v.prop)``."""

    func: AggregateFunc
    var: str
    prop: str | None
    token: Token
    var_token: Token


@dataclass(frozen=True)
class ReturnItem:
    """One ``return`` item, ``expr [as alias]``."""

    expr: PropRef | Aggregate
    alias: str | None
    alias_token: Token | None


@dataclass(frozen=True)
class OrderItem:
    """``$v.prop`` or a return alias (a name token), ascending unless ``descending``."""

    target: PropRef | Token
    descending: bool


@dataclass(frozen=True)
class ReadBody:
    """``match { ... } return { ... } [order { ... }] [limit N]``."""

    match: tuple[Clause, ...]
    returns: tuple[ReturnItem, ...]
    order: tuple[OrderItem, ...]
    limit: int | None
    token: Token


@dataclass(frozen=True)
class Query:
    """``query name(params) { statements }`` (a mutation) or ``{ match ... }`` (a read, ``read`` set)."""

    name: str
    params: tuple[Param, ...]
    statements: tuple[Statement, ...]
    token: Token
    read: ReadBody | None = None

    @property
    def is_read(self) -> bool:
        """Whether the query is a read (a body starting with ``match``), not a mutation."""
        return self.read is not None
