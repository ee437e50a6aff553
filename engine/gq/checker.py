"""Type checking of a parsed ``.gq`` mutation against the catalog, and parameter binding.

:func:`check_query` refuses, before any read of graph data:

* an unknown node or edge type, an unknown property, a property assigned on the wrong kind of
  type (``from``/``to`` on a node), an edge insert without ``from`` and ``to``, a node or edge
  insert that omits a non-nullable property;
* ``update`` on an edge type, and an update that assigns a ``@key`` member, ``id``, ``from`` or
  ``to``;
* a value that does not fit its property (literals follow load's value rules,
  :func:`omnigraph.engine.schema.values.coerce_value`), a parameter whose declared type differs from the
  property's (a ``String`` parameter fits an enum property), a nullable parameter or ``null``
  assigned to a non-nullable property or compared in ``where``, ``now()`` anywhere but a
  ``DateTime`` property, ``where`` on a list or vector property;
* a query that mixes inserts/updates with deletes (the exact message of
  :data:`MIX_MESSAGE`).

Parameters come from a JSON object: an undeclared name, a missing non-nullable one or a value
that does not fit its declared type is ``bad_request``. ``now()`` is one instant per mutation
(naive UTC, millisecond precision). ``id`` may be assigned on insert as an explicit id (on a keyed
node it must equal the derived id, as load's ``data.id``).
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Callable
from typing import Any, Literal

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.gq.syntax import GqError, LiteralValue, Now, Param, ParamRef, Query, Statement, Value
from omnigraph.engine.lexer import Token
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.tables import Property, TableDef
from omnigraph.engine.schema.types import UNORDERED_TYPES, EnumType, PropertyType, ScalarType
from omnigraph.engine.schema.values import InvalidValue, coerce_value

MIX_MESSAGE = (
    "mutation '{name}' on the same query mixes inserts/updates and deletes; split into separate "
    "mutations: (1) inserts and updates, then (2) deletes."
)
ENDPOINTS = {"from": "src", "to": "dst"}
_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_STRING = ScalarType("String")


class Condition(msgspec.Struct, frozen=True):
    """``where column op value`` with ``value`` coerced to the column's type (never null)."""

    column: str
    op: str
    value: Any
    arrow_type: pa.DataType

    def matches(self, stored: Any) -> bool:
        """True if a row whose column holds ``stored`` matches (a null never matches)."""
        return stored is not None and _OPERATORS[self.op](stored, self.value)

    def expression(self) -> pc.Expression:
        """The same test as a pyarrow expression, for a filtered scan of the stored table."""
        return _OPERATORS[self.op](pc.field(self.column), pa.scalar(self.value, self.arrow_type))


class BoundStatement(msgspec.Struct, frozen=True):
    """A checked statement with every value bound.

    ``values``: for ``insert`` every declared property (omitted nullable ones are None) plus
    ``src``/``dst`` on edges and ``id`` when given explicitly; for ``update`` the assigned
    properties only; empty for ``delete``.
    """

    verb: Literal["insert", "update", "delete"]
    table: TableDef
    values: dict[str, Any]
    where: Condition | None
    line: int


class BoundQuery(msgspec.Struct, frozen=True):
    """A checked query: ``kind`` is ``write`` (inserts/updates) or ``delete``."""

    name: str
    kind: Literal["write", "delete"]
    statements: tuple[BoundStatement, ...]


def _error(message: str, token: Token) -> GqError:
    return GqError(message, token.line, token.column, token.text)


def check_mix(query: Query) -> None:
    """Refuse a query that mixes inserts/updates with deletes (before any I/O)."""
    verbs = {statement.verb for statement in query.statements}
    if "delete" in verbs and verbs & {"insert", "update"}:
        first = next(s for s in query.statements if s.verb == "delete").token
        raise BadRequest(
            MIX_MESSAGE.format(name=query.name),
            {"query": query.name, "line": first.line, "column": first.column, "token": first.text},
        )


def bind_params(query: Query, params: dict[str, Any]) -> dict[str, Any]:
    """Coerce the JSON ``params`` by the declared types; None stands for an absent nullable one.

    A refusal names the parameter's declaration (an undeclared one: the query's name).
    """
    declared = {param.name: param for param in query.params}
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise GqError(
            f"query {query.name!r} declares no parameter ${unknown[0]} (declared: {', '.join('$' + name for name in declared) or 'none'})",
            query.token.line,
            query.token.column,
            query.token.text,
            {"query": query.name, "param": unknown[0]},
        )
    bound: dict[str, Any] = {}
    for name, param in declared.items():
        raw = params.get(name)
        where = (param.token.line, param.token.column, param.token.text, {"query": query.name, "param": name})
        if raw is None:
            if not param.nullable:
                raise GqError(f"query {query.name!r} needs parameter ${name} ({_spell(param)}); pass it with --params", *where)
            bound[name] = None
            continue
        try:
            bound[name] = coerce_value(param.type, raw)
        except InvalidValue as error:
            raise GqError(f"parameter ${name} ({_spell(param)}): {error}", *where) from None
    return bound


def _spell(param: Param) -> str:
    return f"{param.type}{'?' if param.nullable else ''}"


def check_mutation_types(query: Query, catalog: Catalog, now: dt.datetime) -> tuple[TableDef, ...]:
    """Type-check the mutation ``query`` without parameter values; the table of each statement, in order.

    Raises the first refusal of the module docstring's list that does not depend on a parameter's
    value (the insert/delete mix, an undeclared parameter, every type error).
    """
    check_mix(query)
    declared = {param.name: param for param in query.params}
    _check_param_uses(query, declared)
    typing_only = _Binder(catalog, declared, dict.fromkeys(declared), now)
    return tuple(typing_only.statement(statement).table for statement in query.statements)


def check_query(query: Query, catalog: Catalog, params: dict[str, Any], now: dt.datetime) -> BoundQuery:
    """Check ``query`` against ``catalog`` and bind ``params``; see the module docstring."""
    check_mutation_types(query, catalog, now)  # type errors first, whatever the parameter values
    declared = {param.name: param for param in query.params}
    binder = _Binder(catalog, declared, bind_params(query, params), now)
    statements = tuple(binder.statement(statement) for statement in query.statements)
    kind: Literal["write", "delete"] = "delete" if statements[0].verb == "delete" else "write"
    return BoundQuery(query.name, kind, statements)


def _check_param_uses(query: Query, declared: dict[str, Param]) -> None:
    for statement in query.statements:
        values = [a.value for a in statement.assignments] + ([statement.where.value] if statement.where else [])
        for value in values:
            if isinstance(value, ParamRef) and value.name not in declared:
                raise _error(f"undeclared parameter ${value.name}", value.token)


class _Binder:
    def __init__(self, catalog: Catalog, declared: dict[str, Param], params: dict[str, Any], now: dt.datetime) -> None:
        self._catalog = catalog
        self._declared = declared
        self._params = params
        self._now = now

    def _table(self, statement: Statement) -> TableDef:
        name = statement.type_name
        if self._catalog.has_node(name):
            return self._catalog.node(name)
        if self._catalog.has_edge(name):
            if statement.verb == "update":
                raise _error(f"update applies to node types only; {name} is an edge type", statement.token)
            return self._catalog.edge(name)
        raise _error(f"unknown node or edge type {name!r}", statement.type_token)

    def statement(self, statement: Statement) -> BoundStatement:
        table = self._table(statement)
        if statement.verb == "insert":
            values = self._insert_values(statement, table)
        elif statement.verb == "update":
            values = self._update_values(statement, table)
        else:
            values = {}
        where = self._condition(statement, table) if statement.where is not None else None
        return BoundStatement(statement.verb, table, values, where, statement.token.line)

    def _insert_values(self, statement: Statement, table: TableDef) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for assignment in statement.assignments:
            name = assignment.prop
            if name == "id":
                values["id"] = self._value(assignment.value, _STRING, nullable=False)
                if values["id"] == "":
                    raise _error("an explicit id must be a non-empty string", assignment.value.token)
            elif name in ENDPOINTS:
                if table.kind != "edge":
                    raise _error(f"'{name}:' names an edge endpoint; {table.type_name} is a node type", assignment.token)
                values[ENDPOINTS[name]] = self._value(assignment.value, _STRING, nullable=False)
            else:
                prop = self._property(table, assignment.token)
                values[name] = self._value(assignment.value, prop.type, prop.nullable)
        if table.kind == "edge":
            for name, column in ENDPOINTS.items():
                if column not in values:
                    raise _error(f"an insert of edge {table.type_name} needs '{name}:' (an endpoint node id)", statement.type_token)
        for prop in table.properties:
            if prop.name not in values:
                if not prop.nullable:
                    raise _error(
                        f"an insert of {table.type_name} needs property {prop.name!r} ({prop.type}, not nullable)",
                        statement.type_token,
                    )
                values[prop.name] = None
        return values

    def _update_values(self, statement: Statement, table: TableDef) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for assignment in statement.assignments:
            name = assignment.prop
            if name == "id":
                raise _error("an update cannot assign 'id'", assignment.token)
            prop = self._property(table, assignment.token)
            if table.key is not None and name in table.key:
                raise _error(
                    f"{table.type_name}.{name} is a @key member and cannot be updated (the id derives from it); "
                    "insert the node with the new key and delete the old one",
                    assignment.token,
                )
            values[name] = self._value(assignment.value, prop.type, prop.nullable)
        return values

    def _property(self, table: TableDef, token: Token) -> Property:
        if not table.has_property(token.text):
            raise _error(f"{table.kind} type {table.type_name} has no property {token.text!r}", token)
        return table.property(token.text)

    def _condition(self, statement: Statement, table: TableDef) -> Condition:
        where = statement.where
        assert where is not None
        if where.prop == "id" or (table.kind == "edge" and where.prop in ENDPOINTS):
            column = ENDPOINTS.get(where.prop, "id")
            ptype: PropertyType = _STRING
            arrow_type = pa.utf8()
        else:
            prop = self._property(table, where.token)
            if isinstance(prop.type, UNORDERED_TYPES):
                raise _error(f"where cannot compare the {prop.type} property {prop.name!r}", where.token)
            column, ptype = prop.name, prop.type
            arrow_type = prop.type.arrow_type()
        value = self._value(where.value, ptype, nullable=False)
        return Condition(column, where.op, value, arrow_type)

    def _value(self, value: Value, ptype: PropertyType, nullable: bool) -> Any:
        if isinstance(value, Now):
            if ptype != ScalarType("DateTime"):
                raise _error(f"now() is a DateTime; this place takes {ptype}", value.token)
            return self._now
        if isinstance(value, ParamRef):
            param = self._declared[value.name]
            fits = param.type == ptype or (isinstance(ptype, EnumType) and param.type == _STRING)
            if not fits:
                raise _error(f"parameter ${param.name} is declared {param.type}; this place takes {ptype}", value.token)
            if param.nullable and not nullable:
                raise _error(f"parameter ${param.name} is nullable ({_spell(param)}); this place takes a non-null {ptype}", value.token)
            bound = self._params[value.name]
            if bound is not None and isinstance(ptype, EnumType):
                try:
                    coerce_value(ptype, bound)
                except InvalidValue as error:
                    raise _error(f"parameter ${param.name}: {error}", value.token) from None
            return bound
        assert isinstance(value, LiteralValue)
        if value.typed is not None and ptype != ScalarType(value.typed):
            raise _error(f"a {value.token.text}(...) literal is a {value.typed}; this place takes {ptype}", value.token)
        if value.value is None:
            if not nullable:
                raise _error(f"null is not allowed here (a non-null {ptype})", value.token)
            return None
        try:
            return coerce_value(ptype, value.value)
        except InvalidValue as error:
            raise _error(f"{error}", value.token) from None
