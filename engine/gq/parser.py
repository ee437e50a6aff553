"""Recursive-descent parser of the ``.gq`` language: declarations and mutations.

Grammar (list members are separated by a comma or a line break; a trailing comma is allowed)::

    source     := query+
    query      := "query" NAME "(" (param ("," param)*)? ")" "{" (statement+ | read) "}"
    param      := PARAM ":" type "?"?
    type       := SCALAR | "[" SCALAR "]" | "Vector" "(" INT ")"
    statement  := "insert" NAME "{" (assign ("," assign)*)? "}"
                | "update" NAME "set" "{" assign ("," assign)* "}" "where" predicate
                | "delete" NAME "where" predicate
    assign     := NAME ":" value                 (NAME may be "from" or "to" on edges)
    predicate  := NAME OP value                  (OP: = != < <= > >=)

``value`` is :mod:`omnigraph.engine.gq.cursor`'s; ``read`` (a body starting with ``match``) is
:mod:`omnigraph.engine.gq.read_parser`'s. Only syntax is checked here; names and types are checked
against the catalog by :mod:`omnigraph.engine.gq.checker` (mutations) and :mod:`omnigraph.engine.gq.read_checker`
(reads). Every refusal is a :class:`GqError` with line, column and token.
"""

from __future__ import annotations

from omnigraph.engine.gq.cursor import Cursor
from omnigraph.engine.gq.errors import GqError
from omnigraph.engine.gq.lexer import tokenize
from omnigraph.engine.gq.read_parser import read_body
from omnigraph.engine.gq.syntax import Assignment, Param, Predicate, Query, Statement
from omnigraph.engine.schema.types import SCALAR_ARROW_TYPES, BlobType, ListType, PropertyType, ScalarType, VectorType

VERBS = ("insert", "update", "delete")
MAX_VECTOR_DIM = 2**31 - 1


def parse(source: str) -> list[Query]:
    """Every query of ``source``, in source order; duplicate query names are refused."""
    return _Parser(tokenize(source)).source()


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
        return Statement(verb.text, type_token.text, assignments, where, verb, type_token)  # type: ignore[arg-type]

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
