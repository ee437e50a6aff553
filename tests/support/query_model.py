"""A small pure-Python evaluator of ``.gq`` read queries, written from the language reference.

It shares nothing with ``omnigraph.engine.query``: it takes the parse tree (:func:`omnigraph.engine.gq.parse`) of a
query that the engine accepted and the graph as plain Python data, enumerates every assignment
of nodes to the match's variables (a cross product, fine for the tiny graphs of the property
test), and keeps those that satisfy every clause:

* a binding's constraints are equalities; a traversal holds when the pair is reported by the
  breadth-first walk of the reference (the source is visited; each hop reports the unvisited
  neighbours of the previous hop's nodes, and a previous-hop node with a stored self-loop
  again; visited nodes are not expanded; a pair once), ids joined within one node type only;
* filters compare with Python's numeric semantics (ints and floats compare exactly), NULL never
  matches; ``contains`` is a substring or list membership, ``in`` list membership, ``starts_with``
  a prefix;
* ``not { ... }`` holds when no assignment of its own variables satisfies it;
* a boolean filter is evaluated in three-valued logic (true, false, None = unknown: a comparison
  with a NULL side is unknown, ``not`` unknown is unknown, ``and``/``or`` as Kleene's), and the
  row is kept when it is true; ``exists { ... }`` holds when an assignment of its own variables
  satisfies the block, ``count { ... } op x`` compares the number of such assignments.
* an edge binding ``$a $k:knows $b`` is a variable ranging over the edges of its type (each
  edge once, parallel edges distinct), between ``$a`` and ``$b`` in binding order: it holds
  when the edge joins ``$a`` to ``$b`` (either way when undirected).

Rows are then projected or grouped (count = rows of the group; sum/avg/min/max skip NULLs;
one global row when nothing else is returned), ordered by the ``order`` keys (NULL first
ascending, last descending), ties by the ids of the variables in the order they are first bound
(grouped: by the group keys, NULL first), and limited. Values are rendered as the reference's
output says (dates ``YYYY-MM-DD``, DateTimes ISO 8601 UTC with milliseconds, F32 shortest).
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from omnigraph.engine.gq.syntax import (
    Aggregate,
    AndOr,
    Binding,
    BoolExpr,
    BoolFilter,
    Clause,
    Filter,
    LiteralValue,
    Negation,
    NotExpr,
    NullTest,
    ParamRef,
    PropRef,
    Query,
    SubPattern,
    Traversal,
)
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.types import ScalarType
from omnigraph.engine.schema.values import coerce_property, coerce_value


@dataclass
class ModelGraph:
    """Nodes by type then id (``{prop: value}``, coerced values), edges by type as (src, dst).

    ``edge_rows``: by edge type then edge id, ``{"src", "dst", prop: value}`` (what an edge
    binding reads).
    """

    catalog: Catalog
    nodes: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    edges: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    edge_rows: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def of_records(cls, catalog: Catalog, records: list[dict[str, Any]]) -> ModelGraph:
        """The model of the JSONL ``records`` a graph of ``catalog`` loaded (nodes keyed by their ``name``)."""
        model = cls(catalog)
        for record in records:
            if "type" in record:
                table = catalog.node(record["type"])
                data = {prop.name: coerce_property(prop, record["data"].get(prop.name)) for prop in table.properties}
                model.nodes.setdefault(record["type"], {})[record["data"]["name"]] = data
            else:
                model.edges.setdefault(record["edge"], []).append((record["from"], record["to"]))
                if "data" in record:
                    row = {"src": record["from"], "dst": record["to"], **record["data"]}
                    model.edge_rows.setdefault(record["edge"], {})[record["data"]["id"]] = row
        return model


EDGE = "edge:"
"""The prefix of an edge binding's type in the model (``edge:Knows``)."""


def _edge_type(catalog: Catalog, name: str) -> str:
    for table in catalog.tables():
        if table.kind == "edge" and table.type_name[0].lower() + table.type_name[1:] == name:
            return table.type_name
    raise AssertionError(f"unknown edge {name}")


def reported_pairs(graph: ModelGraph, edge: str, low: int, high: int, undirected: bool = False) -> set[tuple[str, str]]:
    """Every (source, destination) a traversal ``edge{low,high}`` reports, by literal BFS (``undirected``: each edge both ways)."""
    table = graph.catalog.edge(edge)
    out: dict[str, set[str]] = {}
    for src, dst in graph.edges.get(edge, []):
        out.setdefault(src, set()).add(dst)
        if undirected:
            out.setdefault(dst, set()).add(src)
    same = table.from_type == table.to_type
    pairs: set[tuple[str, str]] = set()
    for source in graph.nodes.get(str(table.from_type), {}):
        if not same:  # one hop only: a second would join ids of different types
            if low <= 1:
                pairs |= {(source, node) for node in out.get(source, ())}
            continue
        visited, frontier = {source}, {source}
        for hop in range(1, high + 1):
            reached: set[str] = set()
            for node in frontier:
                for neighbour in out.get(node, ()):
                    if neighbour == node:
                        reached.add(node)  # a stored self-loop reports its node at this hop
                    elif neighbour not in visited:
                        reached.add(neighbour)
            if low <= hop:
                pairs |= {(source, node) for node in reached}
            frontier = reached - visited
            visited |= frontier
    return pairs


class Model:
    """Evaluate one parsed read query on a :class:`ModelGraph` with JSON params."""

    def __init__(self, graph: ModelGraph, query: Query, params: dict[str, Any]) -> None:
        assert query.read is not None
        self.graph = graph
        self.query = query
        self.read = query.read
        declared = {p.name: p for p in query.params}
        self.params = {n: None if params.get(n) is None else coerce_value(p.type, params[n]) for n, p in declared.items()}
        self.anonymous = itertools.count(1)

    # -- variables ---------------------------------------------------------------------------

    def _introduced(self, clauses: tuple[Clause, ...], outer: dict[str, str]) -> list[tuple[str, str]]:
        """(variable, node type) introduced by a block, in the order they are first bound."""
        types: dict[str, str] = {}
        order: list[str] = []
        declared = {c.var: c.type_name for c in clauses if isinstance(c, Binding) and c.var != "_"}

        def see(name: str, node_type: str) -> None:
            if name == "_":
                name = f"_{next(self.anonymous)}"
            elif name in outer or name in types:
                return
            types[name] = declared.get(name, node_type)
            order.append(name)

        for clause in clauses:
            if isinstance(clause, Binding):
                see(clause.var, clause.type_name)
            elif isinstance(clause, Traversal):
                table = self.graph.catalog.edge(_edge_type(self.graph.catalog, clause.edge))
                see(clause.src, str(table.from_type))
                if clause.edge_var is not None:
                    see(clause.edge_var.text[1:], EDGE + table.type_name)
                see(clause.dst, str(table.to_type))
        return [(name, types[name]) for name in order]

    def _assignments(self, clauses: tuple[Clause, ...], outer: dict[str, str], env: dict[str, str]):
        """Every extension of ``env`` satisfying the block (variables -> (type, id))."""
        local = self._introduced(clauses, outer)
        # anonymous variables: rename each $_ occurrence in order, as _introduced numbered them
        names = iter([name for name, _ in local if name.startswith("_")])
        renamed = [self._rename(clause, names) for clause in clauses]
        types = {**outer, **dict(local)}
        domains = [sorted(self._entities(node_type)) for _, node_type in local]
        for ids in itertools.product(*domains):
            candidate = {**env, **{name: node_id for (name, _), node_id in zip(local, ids, strict=True)}}
            if all(self._holds(clause, types, candidate) for clause in renamed):
                yield candidate, [name for name, _ in local]

    def _entities(self, type_name: str) -> dict[str, dict[str, Any]]:
        """The nodes of a node type, or the edges of an ``edge:`` type, by id."""
        if type_name.startswith(EDGE):
            return self.graph.edge_rows.get(type_name[len(EDGE) :], {})
        return self.graph.nodes.get(type_name, {})

    def _rename(self, clause: Clause, names: Any) -> Clause:
        if isinstance(clause, Binding) and clause.var == "_":
            return Binding(next(names), clause.type_name, clause.constraints, clause.token, clause.type_token)
        if isinstance(clause, Traversal):
            src = next(names) if clause.src == "_" else clause.src
            dst = next(names) if clause.dst == "_" else clause.dst
            return msgspec.structs.replace(clause, src=src, dst=dst)
        return clause

    # -- clauses -----------------------------------------------------------------------------

    def _holds(self, clause: Clause, types: dict[str, str], env: dict[str, str]) -> bool:
        if isinstance(clause, Binding):
            return all(
                _compare(self._prop(types, env, clause.var, c.prop), "=", self._operand(c.value, types, env)) for c in clause.constraints
            )
        if isinstance(clause, Traversal) and clause.edge_var is not None:
            row = self.graph.edge_rows[_edge_type(self.graph.catalog, clause.edge)][env[clause.edge_var.text[1:]]]
            ends = (env[clause.src], env[clause.dst])
            return ends == (row["src"], row["dst"]) or (clause.undirected and ends == (row["dst"], row["src"]))
        if isinstance(clause, Traversal):
            edge = _edge_type(self.graph.catalog, clause.edge)
            return (env[clause.src], env[clause.dst]) in self._pairs(edge, clause.min_hops, clause.max_hops, clause.undirected)
        if isinstance(clause, Filter):
            left, right = self._operand(clause.left, types, env), self._operand(clause.right, types, env)
            return _compare(left, clause.op, right)
        if isinstance(clause, BoolFilter):
            return self._truth(clause.expr, types, env) is True
        if isinstance(clause, SubPattern):
            matches = len(list(self._assignments(clause.clauses, types, env)))
            if clause.func == "exists":
                return matches > 0
            assert clause.op is not None
            return _compare3(matches, clause.op, self._operand(clause.right, types, env)) is True
        assert isinstance(clause, Negation)
        return next(self._assignments(clause.clauses, types, env), None) is None

    def _truth(self, expr: BoolExpr, types: dict[str, str], env: dict[str, str]) -> bool | None:
        """``expr`` in three-valued logic (None: unknown)."""
        if isinstance(expr, Filter):
            return _compare3(self._operand(expr.left, types, env), expr.op, self._operand(expr.right, types, env))
        if isinstance(expr, AndOr):
            left, right = self._truth(expr.left, types, env), self._truth(expr.right, types, env)
            decisive = expr.op == "or"  # true decides an or, false an and
            if decisive in (left, right):
                return decisive
            return None if None in (left, right) else not decisive
        if isinstance(expr, NotExpr):
            value = self._truth(expr.operand, types, env)
            return None if value is None else not value
        if isinstance(expr, NullTest):
            return (self._operand(expr.operand, types, env) is None) != expr.negated
        value = self._operand(expr, types, env)
        assert value is None or isinstance(value, bool)
        return value

    @functools.cache  # noqa: B019 - one model per query
    def _pairs(self, edge: str, low: int, high: int, undirected: bool) -> frozenset[tuple[str, str]]:
        return frozenset(reported_pairs(self.graph, edge, low, high, undirected))

    def _prop(self, types: dict[str, str], env: dict[str, str], var: str, prop: str) -> Any:
        node_id = env[var]
        return node_id if prop == "id" else self._entities(types[var])[node_id].get(prop)

    def _operand(self, operand: Any, types: dict[str, str], env: dict[str, str]) -> Any:
        if isinstance(operand, PropRef):
            return self._prop(types, env, operand.var, operand.prop)
        if isinstance(operand, ParamRef):
            return self.params[operand.name]
        assert isinstance(operand, LiteralValue)
        if operand.typed is not None:
            return coerce_value(ScalarType(operand.typed), operand.value)
        return operand.value

    # -- the answer --------------------------------------------------------------------------

    def answer(self) -> tuple[list[str], list[list[Any]]]:
        top = list(self._assignments(self.read.match, {}, {}))
        types = {name: node_type for name, node_type in self._introduced_top()}
        order_vars = top[0][1] if top else []
        bindings = [env for env, _ in top]
        items = self.read.returns
        names = [_column_name(item) for item in items]
        grouped = any(isinstance(item.expr, Aggregate) for item in items)
        if grouped:
            rows = self._grouped(bindings, types)
        else:
            rows = [([self._prop(types, env, i.expr.var, i.expr.prop) for i in items], env) for env in bindings]
        key_values = []
        for values, env in rows:
            keys = []
            for key in self.read.order:
                if isinstance(key.target, PropRef):
                    value = (
                        self._prop(types, env, key.target.var, key.target.prop) if env is not None else values[self._returned(key.target)]
                    )
                else:
                    value = values[names.index(key.target.text)]
                keys.append((value, key.descending))
            if grouped:
                ties = [v for v, item in zip(values, items, strict=True) if not isinstance(item.expr, Aggregate)]
            else:
                ties = [env[name] for name in order_vars]
            key_values.append((keys, ties, values))
        key_values.sort(key=functools.cmp_to_key(_order))
        result = [[_render(self._type_of(item, types), v) for v, item in zip(values, items, strict=True)] for _, _, values in key_values]
        if self.read.limit is not None:
            result = result[: self.read.limit]
        return names, result

    def _introduced_top(self) -> list[tuple[str, str]]:
        saved = self.anonymous
        self.anonymous = itertools.count(1)
        try:
            return self._introduced(self.read.match, {})
        finally:
            self.anonymous = saved

    def _returned(self, ref: PropRef) -> int:
        for index, item in enumerate(self.read.returns):
            if isinstance(item.expr, PropRef) and (item.expr.var, item.expr.prop) == (ref.var, ref.prop):
                return index
        raise AssertionError("order key not returned")

    def _grouped(self, bindings: list[dict[str, str]], types: dict[str, str]) -> list[tuple[list[Any], None]]:
        items = self.read.returns
        groups: dict[tuple[Any, ...], list[dict[str, str]]] = {}
        for env in bindings:
            key = tuple(_hashable(self._prop(types, env, i.expr.var, i.expr.prop)) for i in items if not isinstance(i.expr, Aggregate))
            groups.setdefault(key, []).append(env)
        if not any(not isinstance(i.expr, Aggregate) for i in items):
            groups.setdefault((), [])
        rows = []
        for members in groups.values():
            values = []
            for item in items:
                expr = item.expr
                if not isinstance(expr, Aggregate):
                    values.append(self._prop(types, members[0], expr.var, expr.prop))
                elif expr.func == "count":
                    values.append(len(members))
                else:
                    seen = [v for v in (self._prop(types, env, expr.var, expr.prop) for env in members) if v is not None]
                    values.append(_aggregate(expr.func, seen))
            rows.append((values, None))
        return rows

    def _type_of(self, item: Any, types: dict[str, str]) -> str:
        expr = item.expr
        if isinstance(expr, Aggregate) and expr.func in ("count", "sum", "avg"):
            return "number"
        if expr.prop == "id":
            return "String"
        if types[expr.var].startswith(EDGE):
            return str(self.graph.catalog.edge(types[expr.var][len(EDGE) :]).property(expr.prop).type)
        return str(self.graph.catalog.node(types[expr.var]).property(expr.prop).type)


def _column_name(item: Any) -> str:
    if item.alias:
        return item.alias
    expr = item.expr
    if isinstance(expr, Aggregate):
        return f"{expr.func}(${expr.var}{'.' + expr.prop if expr.prop else ''})"
    return f"{expr.var}.{expr.prop}"


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _aggregate(func: str, values: list[Any]) -> Any:
    if not values:
        return None
    if func == "sum":
        return sum(values)
    if func == "avg":
        return sum(values) / len(values)
    return min(values) if func == "min" else max(values)


def _compare(left: Any, op: str, right: Any) -> bool:
    return _compare3(left, op, right) is True


def _compare3(left: Any, op: str, right: Any) -> bool | None:
    if left is None or right is None:
        return None
    if op == "contains":
        return right in left
    if op == "in":
        return left in right
    if op == "starts_with":
        return left.startswith(right)
    return {"=": left == right, "!=": left != right, "<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]


def _cmp(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


def _order(x: tuple[Any, Any, Any], y: tuple[Any, Any, Any]) -> int:
    for (a, descending), (b, _) in zip(x[0], y[0], strict=True):
        if a is None or b is None:
            result = 0 if a is b else (-1 if a is None else 1)
            result = -result if descending else result
        else:
            result = -_cmp(a, b) if descending else _cmp(a, b)
        if result:
            return result
    for a, b in zip(x[1], y[1], strict=True):
        result = (0 if a is b else -1 if a is None else 1) if a is None or b is None else _cmp(a, b)
        if result:
            return result
    return 0


def _render(type_text: str, value: Any) -> Any:
    if value is None:
        return None
    if type_text == "F32":
        return float(str(np.float32(value)))
    if type_text == "Date":
        return value.isoformat()
    if type_text == "DateTime":
        assert isinstance(value, dt.datetime)
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    return value
