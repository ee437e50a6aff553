"""Recursive-descent parser of the ``.gq`` mutation language.

Grammar (commas separate list members; a trailing comma is allowed)::

    source     := query+
    query      := "query" NAME "(" (param ("," param)*)? ")" "{" statement+ "}"
    param      := PARAM ":" type "?"?
    type       := SCALAR | "[" SCALAR "]" | "Vector" "(" INT ")"
    statement  := "insert" NAME "{" (assign ("," assign)*)? "}"
                | "update" NAME "set" "{" assign ("," assign)* "}" "where" predicate
                | "delete" NAME "where" predicate
    assign     := NAME ":" value                 (NAME may be "from" or "to" on edges)
    predicate  := NAME OP value                  (OP: = != < <= > >=)
    value      := STRING | INT | FLOAT | "true" | "false" | "null" | "[" (value ("," value)*)? "]"
                | PARAM | "now" "(" ")"

Only syntax is checked here; names and types are checked against the catalog by
:mod:`engine.gq.checker`. Every refusal is a :class:`GqError` with line, column and token.
"""

from __future__ import annotations

from engine.gq.errors import GqError
from engine.gq.lexer import Token, tokenize
from engine.gq.syntax import (
    Assignment,
    LiteralValue,
    Now,
    Param,
    ParamRef,
    Predicate,
    Query,
    Statement,
    Value,
)
from engine.schema.types import SCALAR_ARROW_TYPES, ListType, PropertyType, ScalarType, VectorType

VERBS = ("insert", "update", "delete")
MAX_VECTOR_DIM = 2**31 - 1


def parse(source: str) -> list[Query]:
    """Every query of ``source``, in source order; duplicate query names are refused."""
    return _Parser(tokenize(source)).source()


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._index = 0

    # -- token access ------------------------------------------------------------------------

    @property
    def _peek(self) -> Token:
        return self._tokens[self._index]

    def _next(self) -> Token:
        token = self._tokens[self._index]
        if token.kind != "eof":
            self._index += 1
        return token

    def _fail(self, message: str, token: Token | None = None) -> GqError:
        token = token or self._peek
        return GqError(message, token.line, token.column, token.text)

    def _is(self, kind: str, text: str | None = None) -> bool:
        token = self._peek
        return token.kind == kind and (text is None or token.text == text)

    def _expect(self, kind: str, text: str | None = None, what: str | None = None) -> Token:
        if not self._is(kind, text):
            raise self._fail(f"expected {what or repr(text) if text else what or kind}")
        return self._next()

    def _keyword(self, word: str) -> Token:
        return self._expect("name", word, f"'{word}'")

    # -- grammar -----------------------------------------------------------------------------

    def source(self) -> list[Query]:
        queries: list[Query] = []
        seen: dict[str, Query] = {}
        while not self._is("eof"):
            query = self._query()
            if query.name in seen:
                first = seen[query.name].token
                raise GqError(
                    f"duplicate query name {query.name!r} (first declared at {first.line}:{first.column})",
                    query.token.line, query.token.column, query.name,
                )
            seen[query.name] = query
            queries.append(query)
        if not queries:
            raise self._fail("expected 'query': a .gq source declares at least one query")
        return queries

    def _query(self) -> Query:
        self._keyword("query")
        name = self._expect("name", what="a query name")
        self._expect("punct", "(")
        params: list[Param] = []
        names: set[str] = set()
        while not self._is("punct", ")"):
            param = self._param()
            if param.name in names:
                raise self._fail(f"duplicate parameter ${param.name}", param.token)
            names.add(param.name)
            params.append(param)
            if not self._is("punct", ")"):
                self._expect("punct", ",", "',' or ')'")
        self._next()
        self._expect("punct", "{")
        statements: list[Statement] = []
        while not self._is("punct", "}"):
            statements.append(self._statement())
        if not statements:
            raise self._fail(f"query {name.text!r} has no statement (expected insert, update or delete)")
        self._next()
        return Query(name.text, tuple(params), tuple(statements), name)

    def _param(self) -> Param:
        token = self._expect("param", what="a parameter ($name)")
        self._expect("punct", ":", "':' and a type")
        ptype = self._type()
        nullable = self._is("punct", "?")
        if nullable:
            self._next()
        return Param(token.text[1:], ptype, nullable, token)

    def _type(self) -> PropertyType:
        if self._is("punct", "["):
            self._next()
            item = self._scalar()
            self._expect("punct", "]")
            return ListType(item)
        if self._is("name", "Vector"):
            self._next()
            self._expect("punct", "(")
            size = self._expect("int", what="a vector dimension")
            if not 1 <= size.value <= MAX_VECTOR_DIM:
                raise self._fail("a vector dimension must be at least 1", size)
            self._expect("punct", ")")
            return VectorType(size.value)
        return self._scalar()

    def _scalar(self) -> ScalarType:
        token = self._peek
        if token.kind != "name" or token.text not in SCALAR_ARROW_TYPES:
            raise self._fail(f"expected a type ({', '.join(SCALAR_ARROW_TYPES)}, [T] or Vector(n))")
        self._next()
        return ScalarType(token.text)

    def _statement(self) -> Statement:
        verb = self._peek
        if verb.kind != "name" or verb.text not in VERBS:
            raise self._fail("expected a statement: insert, update or delete")
        self._next()
        type_token = self._expect("name", what="a node or edge type name")
        assignments: tuple[Assignment, ...] = ()
        where = None
        if verb.text == "insert":
            assignments = self._assignments(allow_empty=True)
        elif verb.text == "update":
            self._keyword("set")
            assignments = self._assignments(allow_empty=False)
            self._keyword("where")
            where = self._predicate()
        else:
            self._keyword("where")
            where = self._predicate()
        return Statement(verb.text, type_token.text, assignments, where, verb, type_token)  # type: ignore[arg-type]

    def _assignments(self, allow_empty: bool) -> tuple[Assignment, ...]:
        self._expect("punct", "{")
        result: list[Assignment] = []
        seen: set[str] = set()
        while not self._is("punct", "}"):
            name = self._expect("name", what="a property name")
            if name.text in seen:
                raise self._fail(f"property {name.text!r} is assigned twice", name)
            seen.add(name.text)
            self._expect("punct", ":")
            result.append(Assignment(name.text, self._value(), name))
            if not self._is("punct", "}"):
                self._expect("punct", ",", "',' or '}'")
        if not result and not allow_empty:
            raise self._fail("expected at least one assignment")
        self._next()
        return tuple(result)

    def _predicate(self) -> Predicate:
        name = self._expect("name", what="a property name")
        op = self._expect("op", what="a comparison (= != < <= > >=)")
        return Predicate(name.text, op.text, self._value(), name)

    def _value(self) -> Value:
        token = self._peek
        if token.kind in ("string", "int", "float"):
            self._next()
            return LiteralValue(token.value, token)
        if token.kind == "param":
            self._next()
            return ParamRef(token.text[1:], token)
        if token.kind == "name" and token.text in ("true", "false", "null"):
            self._next()
            return LiteralValue({"true": True, "false": False, "null": None}[token.text], token)
        if token.kind == "name" and token.text == "now":
            self._next()
            self._expect("punct", "(", "'(' after now")
            self._expect("punct", ")", "')': now() takes no argument")
            return Now(token)
        if token.kind == "punct" and token.text == "[":
            self._next()
            items: list[object] = []
            while not self._is("punct", "]"):
                item = self._value()
                if not isinstance(item, LiteralValue) or isinstance(item.value, list):
                    raise self._fail("a list literal holds scalar literals only", item.token)
                items.append(item.value)
                if not self._is("punct", "]"):
                    self._expect("punct", ",", "',' or ']'")
            self._next()
            return LiteralValue(items, token)
        raise self._fail("expected a value (a literal, $param or now())")
