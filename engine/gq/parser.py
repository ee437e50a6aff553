"""The ``.gq`` parser: the token cursor, the mutation and read grammars, and query choice.

The tokens come from :func:`omnigraph.engine.gq.syntax.tokenize`. :func:`parse` is a
recursive-descent parser over a :class:`Cursor`, the token cursor both grammars (mutations and
reads) parse with. Only syntax is checked here; names and types are checked against the catalog
by :mod:`omnigraph.engine.gq.checker` (mutations) and :mod:`omnigraph.engine.gq.read_checker`
(reads). Every refusal is a :class:`~omnigraph.engine.gq.syntax.GqError` with line, column and
token.

Declarations and mutations (list members are separated by a comma or a line break; a trailing
comma is allowed)::

    source     := query+
    query      := "query" NAME "(" (param ("," param)*)? ")" "{" (statement+ | read) "}"
    param      := PARAM ":" type "?"?
    type       := SCALAR | "[" SCALAR "]" | "Vector" "(" INT ")"
    statement  := "insert" NAME "{" (assign ("," assign)*)? "}"
                | "update" NAME "set" "{" assign ("," assign)* "}" "where" predicate
                | "delete" NAME "where" predicate
    assign     := NAME ":" value                 (NAME may be "from" or "to" on edges)
    predicate  := NAME OP value                  (OP: = != < <= > >=)

Values, shared by both grammars (:meth:`Cursor.value`)::

    value    := STRING | INT | FLOAT | "true" | "false" | "null" | "[" (value ("," value)*)? "]"
              | "date" "(" STRING ")" | "datetime" "(" STRING ")" | PARAM | "now" "(" ")"

A read query accepts the literals without ``null``, lists and ``now()``
(:meth:`Cursor.operand_value`), and a list of them after ``in``. A ``date``/``datetime`` literal's text is checked here (a
``YYYY-MM-DD`` date; an ISO 8601 instant, naive = UTC, at most millisecond precision).

Reads (:func:`read_body`: the body of a query that starts with ``match``)::

    read      := "match" "{" clause+ "}" "return" "{" item (SEP item)* "}"
                 ("order" "{" key (SEP key)* "}")? ("limit" INT)?
    clause    := VAR ":" TYPE ("{" (NAME ":" operand (SEP NAME ":" operand)*)? "}")?   binding
               | VAR EDGE BOUNDS? VAR                                                  traversal
               | VAR "<" EDGE ">" BOUNDS? VAR                         traversal, either direction
               | VAR EDGE VAR BOUNDS                                        traversal (alias)
               | VAR VAR ":" EDGE VAR   or   VAR VAR ":" "<" EDGE ">" VAR       edge binding
               | or                                                                    filter
               | "not" "{" clause+ "}"                                                 negation
               | ("search" | "match_text") "(" VAR "." NAME "," text ")"               full-text match
               | "fuzzy" "(" VAR "." NAME "," text ("," (INT | PARAM))? ")"            full-text match
               | "exists" "{" clause+ "}"                                              sub-pattern
               | "count" "{" clause+ "}" OP operand                                    sub-pattern
    or        := and ("or" and)*
    and       := not ("and" not)*
    not       := "not" not | "(" or ")" | operand (CMP operand | "in" list | "is" "not"? "null")?
    list      := "[" (literal ("," literal)*)? "]" | operand          (strings, numbers, booleans)
    text      := STRING | PARAM
    operand   := VAR "." NAME | literal | PARAM
    CMP       := "=" | "!=" | "<" | "<=" | ">" | ">=" | "contains" | "starts_with"
    item      := (VAR "." NAME | "count" "(" VAR ")" | AGG "(" VAR "." NAME ")" | nearest | bm25 | rrf) ("as" NAME)?
    AGG       := "sum" | "avg" | "min" | "max"
    BOUNDS    := "{" INT "," INT "}"
    key       := (VAR "." NAME | NAME) ("asc" | "desc")? | nearest | (bm25 | rrf) "desc"?
    bm25      := "bm25" "(" VAR "." NAME "," text ")"
    rrf       := "rrf" "(" (nearest | bm25) "," (nearest | bm25) ("," (INT | PARAM))? ")"
    nearest   := "nearest" "(" VAR "." NAME "," (PARAM | "[" (NUMBER ("," NUMBER)*)? "]") ")"

``SEP`` is a comma or a line break; match clauses are separated by whitespace only. ``VAR`` and
``PARAM`` are both spelled ``$name``: ``$name`` is a variable where a binding, traversal or
``.prop`` needs one, a parameter elsewhere. Literals are :meth:`Cursor.operand_value`'s.
Bounds: ``{min,max}`` with ``1 <= min <= max``; ``{n,}`` (no upper bound) is refused. An edge
binding (``$a $k:knows $b``) binds one edge: bounds other than ``{1,1}`` are refused with it.
``limit`` is at most :data:`MAX_LIMIT`; ``not``/``exists``/``count`` blocks nest at most
:data:`MAX_NESTING_DEPTH` deep (each level is a correlated subquery the executor must plan), and
``not`` and parentheses inside one condition at most :data:`MAX_CONDITION_DEPTH` deep, with at
most :data:`MAX_CONDITION_JOINS` ``and``/``or`` in it.

Filters: ``or`` binds loosest, then ``and``, then prefix ``not``, then a comparison; comparisons
do not chain (``$a < $b < $c`` is refused) and a parenthesized condition is not compared. A
filter that is one comparison is a :class:`~omnigraph.engine.gq.syntax.Filter`, any other a
:class:`~omnigraph.engine.gq.syntax.BoolFilter` (a bare operand stands for a ``Bool``). ``not {``
is the negation clause, ``not`` before anything else negates a condition; ``not { }``, ``exists
{ }`` and ``count { }`` are clauses of their own, never part of a condition. ``and or not is null
in`` are reserved: never an edge name (``$flag and $x`` is a filter), ``null`` never a value
(``is null`` tests for it), ``sum|avg|min|max(...) { }`` is refused as unsupported.

Choosing a query (:func:`choose_query`): a source may hold mutations and read queries side by
side. ``omnigraph mutate`` runs mutations and ``omnigraph query`` runs read queries; each refuses
the other kind with a message that names the command to use (``bad_request`` with the query's
line:column).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal, cast

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.gq.syntax import (
    Aggregate,
    AggregateFunc,
    AndOr,
    Assignment,
    Binding,
    BoolExpr,
    BoolFilter,
    Clause,
    Filter,
    GqError,
    LiteralValue,
    Nearest,
    Negation,
    NotExpr,
    Now,
    NullTest,
    Operand,
    OrderItem,
    Param,
    ParamRef,
    Predicate,
    PropRef,
    Query,
    ReadBody,
    ReturnItem,
    Rrf,
    Statement,
    SubPattern,
    TextSearch,
    Traversal,
    Value,
    Verb,
    tokenize,
)
from omnigraph.engine.lexer import Token
from omnigraph.engine.schema.types import SCALAR_ARROW_TYPES, BlobType, ListType, PropertyType, ScalarType, VectorType
from omnigraph.engine.schema.values import InvalidValue, coerce_value

TYPED_LITERALS = {"date": "Date", "datetime": "DateTime"}


class Cursor:
    """A position in a token list, with the helpers of a recursive-descent parser."""

    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._index = 0
        self.nesting = 0
        """How many ``not``/``exists``/``count`` blocks enclose the current token."""
        self.condition_depth = 0
        """How many ``not`` and ``(`` of a condition enclose the current token."""
        self.condition_joins = 0
        """How many ``and``/``or`` the current condition has had so far."""

    @property
    def peek(self) -> Token:
        """The current token (not consumed)."""
        return self._tokens[self._index]

    def ahead(self, offset: int) -> Token:
        """The token ``offset`` places after the current one (``eof`` past the end)."""
        return self._tokens[min(self._index + offset, len(self._tokens) - 1)]

    def next(self) -> Token:
        """Consume and return the current token; ``eof`` is never passed."""
        token = self._tokens[self._index]
        if token.kind != "eof":
            self._index += 1
        return token

    def fail(self, message: str, token: Token | None = None) -> GqError:
        """The refusal ``message`` at ``token`` (the current token by default), to raise."""
        token = token or self.peek
        return GqError(message, token.line, token.column, token.text)

    def at(self, kind: str, text: str | None = None) -> bool:
        """Whether the current token is of ``kind`` (and, when given, spelled ``text``)."""
        token = self.peek
        return token.kind == kind and (text is None or token.text == text)

    def expect(self, kind: str, text: str | None = None, what: str | None = None) -> Token:
        """Consume the current token if :meth:`at` ``kind``/``text``, else refuse naming ``what`` was expected."""
        if not self.at(kind, text):
            raise self.fail(f"expected {what or repr(text) if text else what or kind}")
        return self.next()

    def keyword(self, word: str) -> Token:
        """Consume the keyword ``word``, else refuse."""
        return self.expect("name", word, f"'{word}'")

    def separator(self, close: str) -> None:
        """After a list member: a ``,``, a line break before the next member, or ``close``."""
        if self.at("punct", ","):
            self.next()
        elif not self.at("punct", close) and not self.peek.newline_before:
            raise self.fail(f"expected ',', a line break or '{close}'")

    # -- values ------------------------------------------------------------------------------

    def value(self) -> Value:
        """A mutation value: a literal (``null`` and lists included), ``$param`` or ``now()``."""
        token = self.peek
        if token.kind == "name" and token.text == "null":
            self.next()
            return LiteralValue(None, token)
        if token.kind == "name" and token.text == "now" and self.ahead(1).text == "(":
            self.next()
            self.expect("punct", "(", "'(' after now")
            self.expect("punct", ")", "')': now() takes no argument")
            return Now(token)
        if token.kind == "punct" and token.text == "[":
            self.next()
            items: list[object] = []
            while not self.at("punct", "]"):
                item = self.value()
                if not isinstance(item, LiteralValue) or isinstance(item.value, list):
                    raise self.fail("a list literal holds scalar literals only", item.token)
                items.append(item.value)
                if not self.at("punct", "]"):
                    self.expect("punct", ",", "',' or ']'")
            self.next()
            return LiteralValue(items, token)
        found = self.operand_value()
        if found is None:
            raise self.fail("expected a value (a literal, $param or now())")
        return found

    def operand_value(self) -> LiteralValue | ParamRef | None:
        """A scalar literal or ``$param`` at the cursor (consumed), or None if there is none."""
        token = self.peek
        if token.kind in ("string", "int", "float"):
            self.next()
            return LiteralValue(token.value, token)
        if token.kind == "param":
            self.next()
            return ParamRef(token.text[1:], token)
        if token.kind == "name" and token.text in ("true", "false"):
            self.next()
            return LiteralValue(token.text == "true", token)
        if token.kind == "name" and token.text in TYPED_LITERALS and self.ahead(1).text == "(":
            return self._typed_literal()
        return None

    def _typed_literal(self) -> LiteralValue:
        word = self.next()
        typed = TYPED_LITERALS[word.text]
        self.expect("punct", "(", f"'(' after {word.text}")
        text = self.expect("string", what=f'a quoted {typed} ({word.text}("..."))')
        try:
            coerce_value(ScalarType(typed), text.value)
        except InvalidValue as error:
            raise self.fail(f"{word.text}(...): {error}", text) from None
        self.expect("punct", ")", f"')' closing {word.text}(...)")
        return LiteralValue(text.value, word, typed)


VERBS = ("insert", "update", "delete")
MAX_VECTOR_DIM = 2**31 - 1


def parse(source: str) -> list[Query]:
    """Every query of ``source``, in source order; duplicate query names are refused.

    The parse of each of the last :data:`PARSED_SOURCES` distinct sources is kept (the syntax
    tree is immutable), so a process that runs the same query text again does not parse it again.
    """
    return list(_parsed(source))


PARSED_SOURCES = 256


@functools.lru_cache(maxsize=PARSED_SOURCES)
def _parsed(source: str) -> tuple[Query, ...]:
    return tuple(_Parser(tokenize(source)).source())


class _Parser(Cursor):
    """The declaration and mutation grammar of the module docstring."""

    def source(self) -> list[Query]:
        queries: list[Query] = []
        seen: dict[str, Query] = {}
        while not self.at("eof"):
            query = self._query()
            if query.name in seen:
                first = seen[query.name].token
                raise GqError(
                    f"duplicate query name {query.name!r} (first declared at {first.line}:{first.column})",
                    query.token.line,
                    query.token.column,
                    query.name,
                )
            seen[query.name] = query
            queries.append(query)
        if not queries:
            raise self.fail("expected 'query': a .gq source declares at least one query")
        return queries

    def _query(self) -> Query:
        self.keyword("query")
        name = self.expect("name", what="a query name")
        self.expect("punct", "(")
        params: list[Param] = []
        names: set[str] = set()
        while not self.at("punct", ")"):
            param = self._param()
            if param.name in names:
                raise self.fail(f"duplicate parameter ${param.name}", param.token)
            names.add(param.name)
            params.append(param)
            if not self.at("punct", ")"):
                self.expect("punct", ",", "',' or ')'")
        self.next()
        self.expect("punct", "{")
        if self.at("name", "match"):
            read = read_body(self)
            self.expect("punct", "}", "'}' closing the query (a read query ends after return, order and limit)")
            return Query(name.text, tuple(params), (), name, read)
        statements: list[Statement] = []
        while not self.at("punct", "}"):
            statements.append(self._statement())
        if not statements:
            raise self.fail(f"query {name.text!r} has no statement (expected match, insert, update or delete)")
        self.next()
        return Query(name.text, tuple(params), tuple(statements), name)

    def _param(self) -> Param:
        token = self.expect("param", what="a parameter ($name)")
        self.expect("punct", ":", "':' and a type")
        ptype = self._type()
        nullable = self.at("punct", "?")
        if nullable:
            self.next()
        return Param(token.text[1:], ptype, nullable, token)

    def _type(self) -> PropertyType:
        if self.at("punct", "["):
            self.next()
            item = self._scalar()
            self.expect("punct", "]")
            return ListType(item)
        if self.at("name", "Vector"):
            self.next()
            self.expect("punct", "(")
            size = self.expect("int", what="a vector dimension")
            if not 1 <= size.value <= MAX_VECTOR_DIM:
                raise self.fail("a vector dimension must be at least 1", size)
            self.expect("punct", ")")
            return VectorType(size.value)
        if self.at("name", "Blob"):
            self.next()
            return BlobType()
        return self._scalar()

    def _scalar(self) -> ScalarType:
        token = self.peek
        if token.kind != "name" or token.text not in SCALAR_ARROW_TYPES:
            raise self.fail(f"expected a type ({', '.join(SCALAR_ARROW_TYPES)}, [T], Vector(n) or Blob)")
        self.next()
        return ScalarType(token.text)

    def _statement(self) -> Statement:
        verb = self.peek
        if verb.kind != "name" or verb.text not in VERBS:
            raise self.fail("expected a statement: insert, update or delete (a read query starts with match)")
        self.next()
        type_token = self.expect("name", what="a node or edge type name")
        assignments: tuple[Assignment, ...] = ()
        where = None
        if verb.text == "insert":
            assignments = self._assignments(allow_empty=True)
        elif verb.text == "update":
            self.keyword("set")
            assignments = self._assignments(allow_empty=False)
            self.keyword("where")
            where = self._predicate()
        else:
            self.keyword("where")
            where = self._predicate()
        return Statement(cast(Verb, verb.text), type_token.text, assignments, where, verb, type_token)  # a verb: checked above

    def _assignments(self, allow_empty: bool) -> tuple[Assignment, ...]:
        self.expect("punct", "{")
        result: list[Assignment] = []
        seen: set[str] = set()
        while not self.at("punct", "}"):
            name = self.expect("name", what="a property name")
            if name.text in seen:
                raise self.fail(f"property {name.text!r} is assigned twice", name)
            seen.add(name.text)
            self.expect("punct", ":")
            result.append(Assignment(name.text, self.value(), name))
            self.separator("}")
        if not result and not allow_empty:
            raise self.fail("expected at least one assignment")
        self.next()
        return tuple(result)

    def _predicate(self) -> Predicate:
        name = self.expect("name", what="a property name")
        op = self.expect("op", what="a comparison (= != < <= > >=)")
        return Predicate(name.text, op.text, self.value(), name)


COMPARISONS = ("contains", "starts_with")
MAX_LIMIT = 2**63 - 1
"""The largest ``limit`` (the executor counts rows in a signed 64-bit integer)."""
MAX_NESTING_DEPTH = 64
"""The deepest nesting of ``not``, ``exists`` and ``count`` blocks; the executor runs the worst
shape at this depth (tested)."""
MAX_CONDITION_DEPTH = 64
"""The deepest nesting of ``not`` and parentheses inside one condition."""
MAX_CONDITION_JOINS = 255
"""The most ``and``/``or`` in one condition (each is a level of the executor's expression tree)."""
AGGREGATES = ("count", "sum", "avg", "min", "max")


def read_body(cursor: Cursor) -> ReadBody:
    """Parse ``match ... return ... [order ...] [limit N]`` at the cursor."""
    match_token = cursor.keyword("match")
    clauses = _block(cursor, "match")
    cursor.keyword("return")
    returns = _items(cursor)
    order: tuple[OrderItem, ...] = ()
    if cursor.at("name", "order"):
        cursor.next()
        order = _order(cursor)
    limit = None
    if cursor.at("name", "limit"):
        cursor.next()
        count = cursor.expect("int", what="a row count after limit")
        if count.value < 0:
            raise cursor.fail("limit must be 0 or more", count)
        if count.value > MAX_LIMIT:
            raise cursor.fail(f"limit is at most {MAX_LIMIT}", count)
        limit = int(count.value)
    return ReadBody(clauses, returns, order, limit, match_token)


def _block(cursor: Cursor, what: str) -> tuple[Clause, ...]:
    opening = cursor.expect("punct", "{", f"'{{' after {what}")
    clauses: list[Clause] = []
    while not cursor.at("punct", "}"):
        if cursor.at("eof"):
            raise cursor.fail(f"expected '}}' closing the {what} block opened at {opening.line}:{opening.column}")
        clauses.append(_clause(cursor))
    if not clauses:
        raise cursor.fail(f"a {what} block needs at least one clause")
    cursor.next()
    return tuple(clauses)


def _nested_block(cursor: Cursor, what: str, token: Token) -> tuple[Clause, ...]:
    """The block of a ``not``/``exists``/``count`` at ``token``, refused past :data:`MAX_NESTING_DEPTH` enclosing ones."""
    if cursor.nesting == MAX_NESTING_DEPTH:
        raise cursor.fail(f"not, exists and count blocks nest at most {MAX_NESTING_DEPTH} deep", token)
    cursor.nesting += 1
    clauses = _block(cursor, what)
    cursor.nesting -= 1
    return clauses


def _deeper_condition(cursor: Cursor, token: Token) -> None:
    """Count one more ``not`` or ``(`` at ``token``; refused past :data:`MAX_CONDITION_DEPTH`."""
    if cursor.condition_depth == MAX_CONDITION_DEPTH:
        raise cursor.fail(f"not and parentheses nest at most {MAX_CONDITION_DEPTH} deep in one condition", token)
    cursor.condition_depth += 1


def _clause(cursor: Cursor) -> Clause:
    token = cursor.peek
    if token.kind == "name" and token.text in ("search", "fuzzy", "match_text") and cursor.ahead(1).text == "(":
        return _text_search(cursor)
    if token.kind == "name" and token.text == "not" and cursor.ahead(1).text == "{":
        cursor.next()
        return Negation(_nested_block(cursor, "not", token), token)
    if _starts_sub_pattern(cursor, 0):
        return _sub_pattern(cursor)
    if token.kind == "param":
        following = cursor.ahead(1)
        if following.kind == "punct" and following.text == ":":
            return _binding(cursor)
        named = following.kind == "name" and following.text not in COMPARISONS and following.text not in RESERVED
        if named and not _starts_sub_pattern(cursor, 1):  # else a bare Bool parameter, then exists/count { ... }
            return _traversal(cursor)
        if following.kind == "param" and cursor.ahead(2).text == ":":
            return _traversal(cursor)
        if following.text == "<" and cursor.ahead(2).kind == "name" and cursor.ahead(3).text == ">":
            return _traversal(cursor)
    return _filter(cursor)


def _operand(cursor: Cursor) -> Operand:
    token = cursor.peek
    if token.kind == "name" and token.text == "null":
        raise cursor.fail("null is not a value to compare with: write $v.prop is null (or $v.prop is not null)")
    if token.kind == "param" and cursor.ahead(1).text == ".":
        cursor.next()
        cursor.next()
        prop = cursor.expect("name", what=f"a property name after {token.text}.")
        return PropRef(token.text[1:], prop.text, token, prop)
    found = cursor.operand_value()
    if found is None:
        raise cursor.fail(
            "expected a match clause: a binding ($v: Type), a traversal ($a edge $b), a filter ($v.prop op value) or not { ... }"
        )
    return found


def _binding(cursor: Cursor) -> Binding:
    var = cursor.next()
    cursor.next()
    type_token = cursor.expect("name", what=f"a node type after {var.text}:")
    constraints: list[Assignment] = []
    if cursor.at("punct", "{"):
        cursor.next()
        seen: set[str] = set()
        while not cursor.at("punct", "}"):
            name = cursor.expect("name", what="a property name")
            if name.text in seen:
                raise cursor.fail(f"property {name.text!r} is constrained twice", name)
            seen.add(name.text)
            cursor.expect("punct", ":")
            value = cursor.operand_value()
            if value is None:
                raise cursor.fail("expected a literal or $param")
            constraints.append(Assignment(name.text, value, name))
            cursor.separator("}")
        cursor.next()
    return Binding(var.text[1:], type_token.text, tuple(constraints), var, type_token)


def _hop_bounds(cursor: Cursor) -> tuple[int, int]:
    """``{min,max}`` at the cursor: both given, ``1 <= min <= max``."""
    opening = cursor.next()
    low_token = cursor.expect("int", what="a minimum hop count")
    cursor.expect("punct", ",", "',' and a maximum hop count")
    if cursor.at("punct", "}"):
        raise cursor.fail("a traversal needs an upper bound ({min,max}); {n,} is not allowed")
    high_token = cursor.expect("int", what="a maximum hop count")
    cursor.expect("punct", "}", "'}' closing the hop bounds")
    low, high = int(low_token.value), int(high_token.value)
    if low < 1:
        raise cursor.fail("the minimum hop count is at least 1", low_token)
    if low > high:
        raise cursor.fail(f"hop bounds {{{low},{high}}}: the minimum exceeds the maximum", opening)
    return low, high


def _traversal(cursor: Cursor) -> Traversal:
    """``$a edge $b`` or ``$a <edge> $b`` (either direction), with optional hop bounds.

    The bounds follow the edge name (``$a knows{1,3} $b``) or, as an alias, ``$b``. An edge
    binding ``$a $k:edge $b`` (or ``$a $k:<edge> $b``) takes no bounds but ``{1,1}``.
    """
    src = cursor.next()
    edge_var = None
    if cursor.at("param"):
        edge_var = cursor.next()
        cursor.expect("punct", ":", f"':' and an edge name after {edge_var.text} ({edge_var.text}:edge binds the edge)")
    undirected = cursor.at("op", "<")
    if undirected:
        cursor.next()
    edge = cursor.expect("name", what="an edge name")
    if undirected:
        cursor.expect("op", ">", f"'>' closing <{edge.text}>")
    opening = cursor.peek
    bounds = _hop_bounds(cursor) if cursor.at("punct", "{") else None
    dst = cursor.expect("param", what=f"a variable ($name) after the edge {edge.text}")
    if cursor.at("punct", "{"):
        if bounds is not None:
            raise cursor.fail(f"hop bounds are given twice: write them once, after the edge name ({edge.text}{{min,max}})")
        opening = cursor.peek
        bounds = _hop_bounds(cursor)
    low, high = bounds or (1, 1)
    if edge_var is not None and (low, high) != (1, 1):
        raise cursor.fail(
            f"an edge binding ({edge_var.text}:{edge.text}) binds one edge, so it takes a single hop, not {{{low},{high}}}: "
            f"drop the bounds, or the binding to follow a path",
            opening,
        )
    return Traversal(src.text[1:], edge.text, dst.text[1:], low, high, src, edge, dst, undirected, edge_var)


RESERVED = ("and", "or", "not", "is", "null", "in")
"""Words that are never an edge name: a ``$param`` followed by one starts a filter."""
SUB_PATTERNS = ("exists", "count")


def _starts_sub_pattern(cursor: Cursor, offset: int) -> bool:
    """Whether ``exists {`` or ``count {`` is ``offset`` tokens ahead (not an edge so named with bounds, ``count{1,2}``)."""
    word, brace = cursor.ahead(offset), cursor.ahead(offset + 1)
    if word.kind != "name" or word.text not in SUB_PATTERNS or brace.text != "{":
        return False
    return not (cursor.ahead(offset + 2).kind == "int" and cursor.ahead(offset + 3).text == ",")


def _filter(cursor: Cursor) -> Filter | BoolFilter:
    """A filter clause: one comparison (:class:`Filter`), else a :class:`BoolFilter`."""
    start = cursor.peek
    if start.kind == "name" and start.text in ("and", "or"):
        raise cursor.fail(
            f"{start.text} joins two conditions of one filter and cannot start a clause "
            "(exists { }, count { } and not { } are clauses of their own, never joined with and/or)"
        )
    if start.kind == "name" and start.text in AGGREGATES[1:] and cursor.ahead(1).text == "(":
        raise cursor.fail(f"{start.text}(...) {{ ... }} sub-pattern aggregates are not supported: count {{ ... }} and exists {{ ... }} are")
    cursor.condition_joins = 0
    expr = _or(cursor)
    return expr if isinstance(expr, Filter) else BoolFilter(expr, start)


def _or(cursor: Cursor) -> BoolExpr:
    return _joined(cursor, "or", _and)


def _and(cursor: Cursor) -> BoolExpr:
    return _joined(cursor, "and", _not)


def _joined(cursor: Cursor, word: Literal["and", "or"], part: Callable[[Cursor], BoolExpr]) -> BoolExpr:
    """``part (word part)*``, joined from the left."""
    left = part(cursor)
    while cursor.at("name", word):
        token = cursor.next()
        if cursor.condition_joins == MAX_CONDITION_JOINS:
            raise cursor.fail(
                f"one condition joins at most {MAX_CONDITION_JOINS + 1} parts with and/or (for many values write x in [...])", token
            )
        cursor.condition_joins += 1
        left = AndOr(word, left, part(cursor), token)
    return left


def _not(cursor: Cursor) -> BoolExpr:
    if not cursor.at("name", "not"):
        return _comparison(cursor)
    token = cursor.next()
    if cursor.at("punct", "{"):
        raise cursor.fail(
            "not { ... } is a clause of its own (the block has no match); it cannot be part of an and/or/not condition", token
        )
    _deeper_condition(cursor, token)
    inner = _not(cursor)
    cursor.condition_depth -= 1
    return NotExpr(inner, token)


def _comparison(cursor: Cursor) -> BoolExpr:
    """``( condition )``, ``operand op operand``, ``operand is [not] null`` or a bare (``Bool``) operand."""
    token = cursor.peek
    if _starts_sub_pattern(cursor, 0):
        raise cursor.fail(
            f"{token.text} {{ ... }} is a clause of its own; it cannot be part of an and/or/not condition "
            "(for no match of a block write not { ... })"
        )
    if token.kind == "punct" and token.text == "(":
        cursor.next()
        _deeper_condition(cursor, token)
        inner = _or(cursor)
        cursor.condition_depth -= 1
        cursor.expect("punct", ")", f"')' closing the '(' at {token.line}:{token.column}")
        if _comparison_next(cursor):
            raise cursor.fail("a parenthesized condition is not compared: put the comparison inside the parentheses")
        return inner
    left = _operand(cursor)
    op = cursor.peek
    result: BoolExpr = left
    if op.kind == "name" and op.text == "is":
        cursor.next()
        negated = cursor.at("name", "not")
        if negated:
            cursor.next()
        cursor.expect("name", "null", "'null' after is (x is null, x is not null)")
        result = NullTest(left, negated, op)
    elif op.kind == "op" or (op.kind == "name" and op.text in COMPARISONS):
        cursor.next()
        result = Filter(left, op.text, _operand(cursor), op)
    elif op.kind == "name" and op.text == "in":
        cursor.next()
        result = Filter(left, "in", _list_operand(cursor), op)
    if result is not left and _comparison_next(cursor):
        raise cursor.fail("comparisons do not chain: join two comparisons with and ($a < $b and $b < $c)")
    return result


def _list_operand(cursor: Cursor) -> Operand:
    """The list after ``in``: a list literal of strings, numbers or booleans, or an operand (a list parameter or property)."""
    if not cursor.at("punct", "["):
        return _operand(cursor)
    opening = cursor.next()
    items: list[object] = []
    while not cursor.at("punct", "]"):
        token = cursor.peek
        item = cursor.operand_value()
        if not isinstance(item, LiteralValue) or item.typed is not None:
            raise cursor.fail(
                "a list after in holds strings, numbers or booleans (for dates pass a [Date] or [DateTime] parameter; "
                "test for null with is null)",
                token,
            )
        items.append(item.value)
        if not cursor.at("punct", "]"):
            cursor.expect("punct", ",", "',' or ']'")
    cursor.next()
    return LiteralValue(items, opening)


def _comparison_next(cursor: Cursor) -> bool:
    token = cursor.peek
    return token.kind == "op" or (token.kind == "name" and token.text in (*COMPARISONS, "is", "in"))


def _sub_pattern(cursor: Cursor) -> SubPattern:
    """``exists { clause+ }`` or ``count { clause+ } op operand``."""
    token = cursor.next()
    clauses = _nested_block(cursor, token.text, token)
    if token.text == "exists":
        return SubPattern("exists", clauses, None, None, token, None)
    op = cursor.peek
    if op.kind != "op":
        raise cursor.fail("expected a comparison after count { ... } (count { ... } > 2)")
    cursor.next()
    return SubPattern("count", clauses, op.text, _operand(cursor), token, op)


def _items(cursor: Cursor) -> tuple[ReturnItem, ...]:
    cursor.expect("punct", "{", "'{' after return")
    items: list[ReturnItem] = []
    while not cursor.at("punct", "}"):
        expr = _item_expr(cursor)
        alias: Token | None = None
        if cursor.at("name", "as"):
            cursor.next()
            alias = cursor.expect("name", what="an alias after as")
        items.append(ReturnItem(expr, alias.text if alias else None, alias))
        cursor.separator("}")
    if not items:
        raise cursor.fail("return needs at least one item")
    cursor.next()
    return tuple(items)


def _item_expr(cursor: Cursor) -> PropRef | Aggregate | Nearest | TextSearch | Rrf:
    token = cursor.peek
    if token.kind == "name" and token.text == "rrf" and cursor.ahead(1).text == "(":
        return _rrf(cursor)
    if token.kind == "name" and token.text == "nearest" and cursor.ahead(1).text == "(":
        return _nearest(cursor)
    if token.kind == "name" and token.text == "bm25" and cursor.ahead(1).text == "(":
        return _text_search(cursor)
    if token.kind == "name" and token.text in AGGREGATES and cursor.ahead(1).text == "(":
        cursor.next()
        cursor.next()
        var = cursor.expect("param", what=f"a variable in {token.text}(...)")
        prop = None
        if token.text == "count":
            if cursor.at("punct", "."):
                raise cursor.fail("count takes a variable: count($v)")
        else:
            cursor.expect("punct", ".", f"'.': {token.text} takes a property, {token.text}($v.prop)")
            prop = cursor.expect("name", what="a property name").text
        cursor.expect("punct", ")", f"')' closing {token.text}(...)")
        return Aggregate(cast(AggregateFunc, token.text), var.text[1:], prop, token, var)  # one of AGGREGATES: checked above
    if token.kind == "param" and cursor.ahead(1).text == ".":
        operand = _operand(cursor)
        assert isinstance(operand, PropRef)
        return operand
    whole = ""
    if token.kind == "param":
        whole = f"; {token.text} alone is a whole node or bound edge, which is not returned: name its properties ({token.text}.prop)"
    raise cursor.fail(f"expected a return item: $v.prop, count($v), sum|avg|min|max($v.prop), nearest(...), bm25(...) or rrf(...){whole}")


def _aggregate_key(cursor: Cursor) -> GqError:
    """The refusal of an aggregate call as an ``order`` key, naming the alias to order by instead."""
    start = cursor.peek
    aggregate = _item_expr(cursor)
    assert isinstance(aggregate, Aggregate)  # the caller saw an aggregate's name and '('
    call = f"{aggregate.func}(${aggregate.var}{'.' + aggregate.prop if aggregate.prop else ''})"
    return cursor.fail(
        f"order takes $v.prop or a return alias, not {call}: name it in return ({call} as n) and order by the alias (order {{ n desc }})",
        start,
    )


def _order(cursor: Cursor) -> tuple[OrderItem, ...]:
    cursor.expect("punct", "{", "'{' after order")
    keys: list[OrderItem] = []
    while not cursor.at("punct", "}"):
        target: PropRef | Token | Nearest | TextSearch | Rrf
        if cursor.at("name", "nearest") and cursor.ahead(1).text == "(":
            keys.append(OrderItem(_nearest(cursor), False))
            cursor.separator("}")
            continue
        if (cursor.at("name", "bm25") or cursor.at("name", "rrf")) and cursor.ahead(1).text == "(":
            word = cursor.peek.text
            keys.append(OrderItem(_text_search(cursor) if word == "bm25" else _rrf(cursor), True))
            if cursor.at("name", "desc"):
                cursor.next()
            elif cursor.at("name", "asc"):
                raise cursor.fail(f"{word}(...) orders by relevance, highest first: write no asc")
            cursor.separator("}")
            continue
        if cursor.at("param"):
            if cursor.ahead(1).text != ".":
                raise cursor.fail("order by $v.prop or a return alias")
            operand = _operand(cursor)
            assert isinstance(operand, PropRef)
            target = operand
        elif cursor.peek.text in AGGREGATES and cursor.ahead(1).text == "(":
            raise _aggregate_key(cursor)
        else:
            target = cursor.expect("name", what="$v.prop or a return alias")
        descending = False
        if cursor.at("name", "asc") or cursor.at("name", "desc"):
            descending = cursor.next().text == "desc"
        keys.append(OrderItem(target, descending))
        cursor.separator("}")
    if not keys:
        raise cursor.fail("order needs at least one key")
    cursor.next()
    return tuple(keys)


def _nearest(cursor: Cursor) -> Nearest:
    """``nearest($v.prop, $q)`` or ``nearest($v.prop, [x, y, ...])`` at the cursor (no direction: nearest first)."""
    token = cursor.next()
    cursor.next()
    if not (cursor.at("param") and cursor.ahead(1).text == "."):
        raise cursor.fail("nearest takes a vector property first: nearest($v.prop, $q)")
    prop = _operand(cursor)
    assert isinstance(prop, PropRef)
    cursor.expect("punct", ",", "',' and the query vector ($param or [x, y, ...])")
    query: LiteralValue | ParamRef | None
    if cursor.at("punct", "["):
        value = cursor.value()
        assert isinstance(value, LiteralValue)
        query = value
    else:
        query = cursor.operand_value()
        if not isinstance(query, ParamRef):
            raise cursor.fail("expected the query vector: a Vector($N) parameter or a list of numbers [x, y, ...]")
    cursor.expect("punct", ")", "')' closing nearest(...)")
    if cursor.at("name", "asc") or cursor.at("name", "desc"):
        raise cursor.fail("nearest(...) orders nearest first and takes no asc or desc")
    return Nearest(prop, query, token)


def _text_search(cursor: Cursor) -> TextSearch:
    """``search|fuzzy|match_text|bm25($v.prop, text [, max_edits])`` at the cursor (``max_edits``: fuzzy only)."""
    token = cursor.next()
    cursor.next()
    if not (cursor.at("param") and cursor.ahead(1).text == "."):
        raise cursor.fail(f"{token.text} takes a String property first: {token.text}($v.prop, $q)")
    prop = _operand(cursor)
    assert isinstance(prop, PropRef)
    cursor.expect("punct", ",", f"',' and the query text of {token.text}(...)")
    query = cursor.operand_value()
    if query is None:
        raise cursor.fail(f"expected the query text of {token.text}(...): a string or $param")
    max_edits = None
    if token.text == "fuzzy" and cursor.at("punct", ","):
        cursor.next()
        max_edits = cursor.operand_value()
        if max_edits is None:
            raise cursor.fail("expected fuzzy's max_edits: an integer or $param")
    cursor.expect("punct", ")", f"')' closing {token.text}(...)")
    return TextSearch(token.text, prop, query, max_edits, token)


def _rrf(cursor: Cursor) -> Rrf:
    """``rrf(rank, rank [, k])`` at the cursor; each rank is ``nearest(...)`` or ``bm25(...)``."""
    token = cursor.next()
    cursor.next()
    ranks: list[Nearest | TextSearch] = []
    for position in ("first", "second"):
        if cursor.at("name", "nearest") and cursor.ahead(1).text == "(":
            ranks.append(_nearest(cursor))
        elif cursor.at("name", "bm25") and cursor.ahead(1).text == "(":
            ranks.append(_text_search(cursor))
        else:
            raise cursor.fail(f"rrf fuses two rankings: its {position} argument is nearest(...) or bm25(...)")
        if position == "first":
            cursor.expect("punct", ",", "',' and the second ranking of rrf(...)")
    k = None
    if cursor.at("punct", ","):
        cursor.next()
        k = cursor.operand_value()
        if k is None:
            raise cursor.fail("expected rrf's k: an integer or $param")
    cursor.expect("punct", ")", "')' closing rrf(...)")
    return Rrf(ranks[0], ranks[1], k, token)


Kind = Literal["read", "mutation"]
_RUN_WITH = {
    "read": "is a read query (match ... return); run it with `omnigraph query` (HTTP: POST /branches/{branch}/query)",
    "mutation": "is a mutation; run it with `omnigraph mutate` (HTTP: POST /branches/{branch}/mutate)",
}


def choose_query(source: str, name: str | None, kind: Kind) -> Query:
    """Parse ``source`` and pick the query ``name``, which must be of ``kind``.

    ``name`` is optional when the source holds one query.
    """
    queries = parse(source)
    names = [query.name for query in queries]
    if name is None:
        if len(queries) > 1:
            raise BadRequest(
                f"the source declares {len(queries)} queries; choose one with --name ({', '.join(names)})",
                {"queries": names},
            )
        query = queries[0]
    else:
        matching = [query for query in queries if query.name == name]
        if not matching:
            raise BadRequest(f"no query named {name!r} (the source declares: {', '.join(names)})", {"queries": names})
        query = matching[0]
    found: Kind = "read" if query.is_read else "mutation"
    if found != kind:
        token = query.token
        raise GqError(f"query {query.name!r} {_RUN_WITH[found]}", token.line, token.column, token.text)
    return query
