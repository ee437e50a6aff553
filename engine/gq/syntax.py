"""The syntax of a ``.gq`` source: its tokens, its syntax tree, and :class:`GqError`, the error of a refused source.

:data:`GQ` is the language's dialect of the scanner both languages share
(:mod:`omnigraph.engine.lexer`); :func:`tokenize` reads a source with it. Every node of the tree
keeps its token (positions for error messages). A query is a mutation
(``statements``) or a read (``read``: ``match``/``return``/``order``/``limit``); both share
parameters, literals and values. A :class:`GqError` says where the refusal is (line and column)
and which token was refused.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

import msgspec

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.lexer import Dialect, Refusal, Token
from omnigraph.engine.lexer import tokenize as scan
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


class LiteralValue(msgspec.Struct, frozen=True):
    """A literal value as JSON would spell it (str, int, float, bool, None or a list of them).

    ``typed`` is ``"Date"`` or ``"DateTime"`` for ``date("...")``/``datetime("...")``, whose
    ``value`` is then the text between the quotes.
    """

    value: Any
    token: Token
    typed: str | None = None


class ParamRef(msgspec.Struct, frozen=True):
    """``$name``."""

    name: str
    token: Token


class Now(msgspec.Struct, frozen=True):
    """``now()``: the mutation's start time (DateTime only)."""

    token: Token


Value = LiteralValue | ParamRef | Now


class Param(msgspec.Struct, frozen=True):
    """A declared parameter ``$name: Type`` (``?`` = nullable, may be omitted or null)."""

    name: str
    type: PropertyType
    nullable: bool
    token: Token


class Assignment(msgspec.Struct, frozen=True):
    """``prop: value``; ``from``/``to`` name an edge's endpoints."""

    prop: str
    value: Value
    token: Token


class Predicate(msgspec.Struct, frozen=True):
    """``where prop op value``."""

    prop: str
    op: str
    value: Value
    token: Token


Verb = Literal["insert", "update", "delete"]
"""The verb of a mutation statement."""
AggregateFunc = Literal["count", "sum", "avg", "min", "max"]
"""The aggregate function of a return item."""


class Statement(msgspec.Struct, frozen=True):
    """One ``insert``, ``update`` or ``delete`` on a node or edge type."""

    verb: Verb
    type_name: str
    assignments: tuple[Assignment, ...]
    where: Predicate | None
    token: Token
    type_token: Token


class PropRef(msgspec.Struct, frozen=True):
    """``$var.prop`` in a read query (``prop`` may be ``id``)."""

    var: str
    prop: str
    token: Token
    prop_token: Token


Operand = PropRef | LiteralValue | ParamRef


class Binding(msgspec.Struct, frozen=True):
    """``$var: Type`` or ``$var: Type { prop: value, ... }`` (each member an equality)."""

    var: str
    type_name: str
    constraints: tuple[Assignment, ...]
    token: Token
    type_token: Token


class Traversal(msgspec.Struct, frozen=True):
    """``$src edge{min,max} $dst``; ``edge`` is the edge type's name with a lower-case first letter.

    ``undirected`` (``$src <edge> $dst``): the edge is followed in either direction.
    ``edge_var`` (``$src $k:edge $dst``): the token of the variable that binds each matching
    edge (a single hop only).
    """

    src: str
    edge: str
    dst: str
    min_hops: int
    max_hops: int
    token: Token
    edge_token: Token
    dst_token: Token
    undirected: bool = False
    edge_var: Token | None = None


class Filter(msgspec.Struct, frozen=True):
    """``left op right``; ``op`` is ``= != < <= > >=``, ``contains`` or ``starts_with``."""

    left: Operand
    op: str
    right: Operand
    op_token: Token


class Negation(msgspec.Struct, frozen=True):
    """``not { clause+ }``."""

    clauses: tuple[Clause, ...]
    token: Token


class AndOr(msgspec.Struct, frozen=True):
    """``left and right`` or ``left or right`` inside a filter (``token`` is the operator)."""

    op: Literal["and", "or"]
    left: BoolExpr
    right: BoolExpr
    token: Token


class NotExpr(msgspec.Struct, frozen=True):
    """``not expr``: the boolean negation of a filter (``not { ... }`` is the clause :class:`Negation`)."""

    operand: BoolExpr
    token: Token


class NullTest(msgspec.Struct, frozen=True):
    """``operand is null`` or, ``negated``, ``operand is not null`` (``token`` is ``is``)."""

    operand: Operand
    negated: bool
    token: Token


BoolExpr = Filter | AndOr | NotExpr | NullTest | PropRef | LiteralValue | ParamRef
"""A filter's boolean expression; a bare operand stands for a ``Bool`` value."""


class BoolFilter(msgspec.Struct, frozen=True):
    """A filter clause that is more than one comparison: ``and``/``or``/``not``, ``is [not] null``, a ``Bool`` operand."""

    expr: BoolExpr
    token: Token


class SubPattern(msgspec.Struct, frozen=True):
    """``exists { clause+ }`` or ``count { clause+ } op operand`` (``op``/``right``/``op_token`` None for ``exists``)."""

    func: Literal["exists", "count"]
    clauses: tuple[Clause, ...]
    op: str | None
    right: Operand | None
    token: Token
    op_token: Token | None


class TextSearch(msgspec.Struct, frozen=True):
    """``search|fuzzy|match_text|bm25($v.prop, query [, max_edits])``: a full-text function (``max_edits``: fuzzy's)."""

    func: str
    prop: PropRef
    query: LiteralValue | ParamRef
    max_edits: LiteralValue | ParamRef | None
    token: Token


Clause = Binding | Traversal | Filter | Negation | BoolFilter | SubPattern | TextSearch


class Aggregate(msgspec.Struct, frozen=True):
    """``count($v)`` (``prop`` None) or ``sum|avg|min|max($v.prop)``."""

    func: AggregateFunc
    var: str
    prop: str | None
    token: Token
    var_token: Token


class ReturnItem(msgspec.Struct, frozen=True):
    """One ``return`` item, ``expr [as alias]``."""

    expr: PropRef | Aggregate | Nearest | TextSearch | Rrf
    alias: str | None
    alias_token: Token | None


class OrderItem(msgspec.Struct, frozen=True):
    """``$v.prop`` or a return alias (a name token), ascending unless ``descending``."""

    target: PropRef | Token | Nearest | TextSearch | Rrf
    descending: bool


class ReadBody(msgspec.Struct, frozen=True):
    """``match { ... } return { ... } [order { ... }] [limit N]``."""

    match: tuple[Clause, ...]
    returns: tuple[ReturnItem, ...]
    order: tuple[OrderItem, ...]
    limit: int | None
    token: Token


class Query(msgspec.Struct, frozen=True):
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


class Nearest(msgspec.Struct, frozen=True):
    """``nearest($v.prop, query)``: the L2 distance of a vector property from ``query`` (a ``$param`` or a list literal)."""

    prop: PropRef
    query: LiteralValue | ParamRef
    token: Token


_GQ_TOKENS = re.compile(
    r"""
    (?P<param>\$[A-Za-z_][A-Za-z0-9_]*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
  | (?P<op>!=|<=|>=|=|<|>)
  | (?P<punct>[{}()\[\],:?.])
    """,
    re.VERBOSE,
)
"""The ``.gq`` tokens besides strings: ``param`` (``$name``; ``$_`` too), ``name`` (keywords
included: the parser decides by position), a number (``int`` or ``float``, an optional leading
``-``; its value is the number), ``op`` (``= != < <= > >=``) and ``punct`` (``{ } ( ) [ ] , : ?
.``). A line break between two tokens separates the items of assignment and return lists."""


_GQ_STRING = re.compile(r'"(?:[^"\\\n]|\\[^\n])*"')


_GQ_ESCAPE = re.compile(r'\\(?:(?P<simple>["\\nt])|u\{(?P<hex>[0-9A-Fa-f]{1,6})\}|(?P<other>.?))', re.DOTALL)


_GQ_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}


def _read_gq_string(source: str, start: int, line: int, column: int) -> tuple[str, int]:
    r"""The decoded ``.gq`` string literal that starts at ``start``, and the index after it.

    Escapes are exactly ``\"``, ``\\``, ``\n``, ``\t`` and ``\u{HEX}`` (1 to 6 hex digits
    naming a Unicode scalar value); any other escape is refused at its position. A string does
    not span lines.
    """
    match = _GQ_STRING.match(source, start)
    if match is None:
        raise GqError("unterminated string literal", line, column, source[start:].split("\n", 1)[0])
    body = match.group()[1:-1]
    parts: list[str] = []
    position = 0
    for escape in _GQ_ESCAPE.finditer(body):
        parts.append(body[position : escape.start()])
        where = column + 1 + escape.start()
        if escape.group("simple"):
            parts.append(_GQ_SIMPLE_ESCAPES[escape.group("simple")])
        elif escape.group("hex"):
            code = int(escape.group("hex"), 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise GqError("\\u{...} must name a Unicode scalar value", line, where, escape.group())
            parts.append(chr(code))
        else:
            raise GqError('unknown escape (a string accepts \\", \\\\, \\n, \\t and \\u{HEX})', line, where, escape.group())
        position = escape.end()
    parts.append(body[position:])
    return "".join(parts), match.end()


def _gq_value(kind: str, text: str, line: int, column: int) -> tuple[str, object]:
    if kind != "number":
        return kind, text
    is_float = any(c in text for c in ".eE")
    value = float(text) if is_float else int(text)
    if is_float and not math.isfinite(value):
        raise GqError("number out of range", line, column, text)
    return ("float" if is_float else "int"), value


def _refuse_gq(refusal: Refusal, text: str, line: int, column: int) -> GqError:
    if refusal == "unterminated_comment":
        return GqError("unterminated block comment", line, column, "/*")
    return GqError("unexpected character", line, column, text)


GQ = Dialect(_GQ_TOKENS, _read_gq_string, _gq_value, _refuse_gq)
"""The ``.gq`` language's tokens (:mod:`omnigraph.engine.lexer`)."""


def tokenize(source: str) -> list[Token]:
    """All tokens of a ``.gq`` ``source``, ending with ``eof``.

    Raises:
        GqError: an unknown character, an unterminated comment or string, a bad escape or a
            number out of range, at its position.
    """
    return scan(source, GQ)


class Rrf(msgspec.Struct, frozen=True):
    """``rrf(rank, rank [, k])``: the reciprocal rank fusion of two rankings, each ``nearest(...)`` or ``bm25(...)``."""

    first: Nearest | TextSearch
    second: Nearest | TextSearch
    k: LiteralValue | ParamRef | None
    token: Token
