"""The syntax tree of a ``.gq`` source (positions kept for error messages)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from engine.gq.lexer import Token
from engine.schema.types import PropertyType


@dataclass(frozen=True)
class LiteralValue:
    """A literal value as JSON would spell it (str, int, float, bool, None or a list of them)."""

    value: Any
    token: Token


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


@dataclass(frozen=True)
class Statement:
    """One ``insert``, ``update`` or ``delete`` on a node or edge type."""

    verb: Literal["insert", "update", "delete"]
    type_name: str
    assignments: tuple[Assignment, ...]
    where: Predicate | None
    token: Token
    type_token: Token


@dataclass(frozen=True)
class Query:
    """``query name(params) { statements }``."""

    name: str
    params: tuple[Param, ...]
    statements: tuple[Statement, ...]
    token: Token
