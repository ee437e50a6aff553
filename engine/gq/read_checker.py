"""Type checking of a parsed read query against the catalog, and the bound read it produces.

:func:`check_read` refuses, before any graph data is read (``bad_request`` with line:column and
the offending token):

* an unknown node type, edge or property; an edge type bound as a variable (``$e: Knows``);
* a variable bound to two different types, a traversal whose source or destination variable
  has the wrong node type for the edge (``$a`` is always the source side), a variable that no
  binding or traversal introduces, ``$_.prop`` (``$_`` is anonymous), a variable spelled like a
  declared parameter;
* an incompatible comparison (the operand types below), a string literal that is not a value of
  the enum it is compared with (``=``/``!=``), a list or vector property in a binding
  constraint;
* ``sum``/``avg`` of a non-number, ``min``/``max`` of a list or vector; two return columns with
  one name; an ``order`` key that is neither ``$v.prop`` (in a grouped query: one of the
  returned group keys) nor a return alias; a return item naming a variable local to a
  ``not { ... }``;
* an edge binding (``$a $k:knows $b``) whose name is already a variable (or ``$_``), and
  ``$k.id`` (a bound edge's id is not queryable, as upstream);
* a misused search function (:mod:`omnigraph.engine.gq.search`: its property or query of the
  wrong type, an ordering by ``nearest`` without a ``limit``, a search function in a grouped
  query);
* an undeclared parameter; then the parameter values as
  :func:`omnigraph.engine.gq.checker.bind_params` (a missing or null non-nullable one, a wrong
  type).

Scoping: a ``not { ... }``, ``exists { ... }`` or ``count { ... }`` block sees every variable of
the blocks around it; variables it introduces are its own (edge bindings included). Within a block, clause order does not
matter.

Boolean filters (:class:`Condition`): each comparison in one is checked as a filter; a bare
operand must be ``Bool``; ``is [not] null`` takes any operand; ``count { ... }`` is an ``I64``
compared by ``= != < <= > >=`` with a number. A filter's top-level ``and`` is split: each part
that is one comparison joins the block's comparisons, the rest are the block's ``conditions``.

Operand types and the comparisons allowed between them (:func:`comparison_problem`,
:func:`aggregate_problem`). Families: numbers (``I32`` ... ``F64``: compared numerically across
integer and float types), strings (``String`` and enums), ``Bool``, ``Date``, ``DateTime``,
lists ``[T]`` and vectors.

* ``= != < <= > >=``: both sides of one family, neither a list nor a vector; ``Bool`` takes
  ``=`` and ``!=`` only. ``Date`` and ``DateTime`` are different families (a ``Date`` property
  compares with ``date("...")`` or a ``Date`` parameter, not with a string).
* ``contains``: two strings (substring), or a list and a value of its item family
  (membership); ``in`` the same membership written the other way round (value, then list).
  ``starts_with``: two strings.
* ``sum``/``avg`` take numbers; ``min``/``max`` take numbers, strings, ``Bool``, ``Date`` and
  ``DateTime``.

Literals: a string is ``String``, ``true``/``false`` ``Bool``, an integer ``I64`` (``U64`` above
the ``I64`` range; beyond ``U64`` refused), a decimal ``F64``, ``date("...")`` ``Date`` and
``datetime("...")`` ``DateTime``; a list (after ``in``) ``[T]`` of its items' one family (``[F64]`` with
a decimal item, ``[U64]`` with an item beyond ``I64``; ``[]`` takes the compared value's type).

The result is a :class:`BoundRead`: a checked read query with its parameters bound, what
:mod:`omnigraph.engine.query` executes. Variables are numbered in the order of their first
appearance in the source (``index``); an anonymous ``$_`` is a variable of its own at each
occurrence (named ``_1``, ``_2``, ...). A :class:`Block` is the top-level ``match``, one
``not { ... }`` or one ``exists``/``count`` block: the variables it introduces, its traversals,
its comparisons (filters and binding constraints), its nested negations and its other
conditions (:class:`Condition`; :attr:`Block.nested` lists the blocks inside it). An edge binding
``$a $k:knows $b`` is a variable too, of the edge's table (:attr:`Var.is_edge`), numbered between
``$a`` and ``$b`` (when they are new); its :class:`Hop` names it (``edge_var``), and it binds one
edge per row. Every operand is typed: a :class:`Column` of a variable's node (or edge) table or a
:class:`Const` (``value`` None for a null parameter, which never matches).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from omnigraph.engine.gq.checker import bind_params
from omnigraph.engine.gq.search import Bm25Score, NearestScore, RrfScore, TextMatch, check_nearest, check_rrf_k, check_text_search
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
    OrderItem,
    Param,
    ParamRef,
    PropRef,
    Query,
    ReturnItem,
    Rrf,
    SubPattern,
    TextSearch,
    Traversal,
)
from omnigraph.engine.gq.syntax import Operand as SourceOperand
from omnigraph.engine.lexer import Token
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import INTEGER_RANGES, BlobType, EnumType, ListType, PropertyType, ScalarType, VectorType
from omnigraph.engine.schema.values import coerce_value

NUMBERS = frozenset({"I32", "I64", "U32", "U64", "F32", "F64"})
ORDERED = ("=", "!=", "<", "<=", ">", ">=")
STRING = ScalarType("String")
BOOL = ScalarType("Bool")
I64 = ScalarType("I64")
U64 = ScalarType("U64")
F64 = ScalarType("F64")


def family(ptype: PropertyType) -> str:
    """``number``, ``string``, ``Bool``, ``Date``, ``DateTime``, ``list`` or ``vector``."""
    if isinstance(ptype, EnumType):
        return "string"
    if isinstance(ptype, ListType):
        return "list"
    if isinstance(ptype, VectorType):
        return "vector"
    assert isinstance(ptype, ScalarType)
    if ptype.name in NUMBERS:
        return "number"
    return "string" if ptype.name == "String" else ptype.name


def integer_literal_type(value: int) -> ScalarType | None:
    """``I64`` or ``U64`` for an integer literal, None when no integer type holds it."""
    for ptype in (I64, U64):
        low, high = INTEGER_RANGES[ptype.name]
        if low <= value <= high:
            return ptype
    return None


def comparison_problem(left: PropertyType, op: str, right: PropertyType) -> str | None:
    """Why ``left op right`` is refused, or None when it is allowed."""
    lf, rf = family(left), family(right)
    if op == "in":
        if isinstance(right, ListType) and lf == family(right.item):
            return None
        return f"in takes a value and a list of its type, not {left} and {right}"
    if op == "contains":
        if lf == "string" and rf == "string":
            return None
        if isinstance(left, ListType) and rf == family(left.item):
            return None
        return f"contains takes two strings or a list and one of its items, not {left} and {right}"
    if op == "starts_with":
        if lf == "string" and rf == "string":
            return None
        return f"starts_with takes two strings, not {left} and {right}"
    if "vector" in (lf, rf) or "list" in (lf, rf):
        return f"{op} cannot compare {left} with {right} (a list takes contains; a vector is not comparable)"
    if lf != rf:
        hint = ""
        if {lf, rf} & {"Date", "DateTime"} and "string" in (lf, rf):
            hint = ' (write date("YYYY-MM-DD") or datetime("...Z"))'
        return f"cannot compare {left} with {right}{hint}"
    if lf == "Bool" and op not in ("=", "!="):
        return f"Bool takes = and != only, not {op}"
    return None


def aggregate_problem(func: str, ptype: PropertyType) -> str | None:
    """Why ``func`` cannot aggregate a property of ``ptype``, or None."""
    kind = family(ptype)
    if func in ("sum", "avg") and kind != "number":
        return f"{func} takes a number property, not {ptype}"
    if func in ("min", "max") and kind in ("list", "vector"):
        return f"{func} takes a scalar property, not {ptype}"
    return None


def aggregate_type(func: str, ptype: PropertyType | None) -> PropertyType:
    """The type of an aggregate's result (``count`` has no property)."""
    if func == "count":
        return I64
    assert ptype is not None
    if func == "avg":
        return F64
    if func == "sum":
        return F64 if isinstance(ptype, ScalarType) and ptype.name in ("F32", "F64") else I64
    return ptype


ANONYMOUS = "_"


def _error(message: str, token: Token) -> GqError:
    return GqError(message, token.line, token.column, token.text)


def check_read_types(query: Query, catalog: Catalog) -> BoundRead:
    """Type-check the read query ``query`` without parameter values (every parameter stands as NULL).

    Raises the first type error of the module docstring's list but the parameter values; the
    result's parameter constants are all None (what ``omnigraph lint`` describes, never executed).
    """
    declared = {param.name: param for param in query.params}
    return _Checker(catalog, declared, dict.fromkeys(declared)).run(query)


def check_read(query: Query, catalog: Catalog, params: dict[str, Any]) -> BoundRead:
    """Check the read query ``query`` and bind ``params``; see the module docstring."""
    check_read_types(query, catalog)  # type errors first
    declared = {param.name: param for param in query.params}
    return _Checker(catalog, declared, bind_params(query, params)).run(query)


class _Checker:
    def __init__(self, catalog: Catalog, declared: dict[str, Param], params: dict[str, Any]) -> None:
        self._catalog = catalog
        self._declared = declared
        self._params = params
        self._vars: list[Var] = []
        self._where: dict[int, Token] = {}
        self._edges = {name[0].lower() + name[1:]: name for name in _edge_names(catalog)}

    def run(self, query: Query) -> BoundRead:
        read = query.read
        assert read is not None
        block, scope = self._block(read.match, {})
        outputs = self._outputs(read.returns, scope)
        grouped = any(output.func is not None for output in outputs)
        order = tuple(self._sort_key(item.target, item.descending, outputs, grouped, scope) for item in read.order)
        self._check_search_use(read.returns, read.order, grouped, read.limit)
        return BoundRead(query.name, tuple(self._vars), block, outputs, grouped, order, read.limit)

    # -- variables and blocks ----------------------------------------------------------------

    def _new_var(self, name: str, table: TableDef, token: Token) -> int:
        index = len(self._vars)
        if name == ANONYMOUS:
            name = f"_{sum(var.anonymous for var in self._vars) + 1}"
        elif name in self._declared:
            raise _error(f"variable ${name} is spelled like the parameter ${name}; rename one of them", token)
        self._vars.append(Var(name, table, index))
        self._where[index] = token
        return index

    def _block(self, clauses: tuple[Clause, ...], outer: dict[str, int]) -> tuple[Block, dict[str, int]]:
        declared = self._declared_types(clauses, outer)
        self._check_edge_names(clauses, outer)
        scope = dict(outer)
        local: list[int] = []
        hops: list[Hop] = []
        compares: list[Compare] = []

        def endpoint(name: str, token: Token, table: TableDef) -> int:
            if name != ANONYMOUS and name in scope:
                return scope[name]
            table, where = declared.get(name, (table, token))
            index = self._new_var(name, table, where)
            local.append(index)
            if name != ANONYMOUS:
                scope[name] = index
            return index

        for clause in clauses:
            if isinstance(clause, Binding):
                index = endpoint(clause.var, clause.token, self._node(clause))
                compares.extend(self._constraint(index, member) for member in clause.constraints)
            elif isinstance(clause, Traversal):
                edge = self._edge(clause)
                if clause.undirected and edge.from_type != edge.to_type:
                    raise _error(
                        f"<{clause.edge}> follows the edge in either direction, so both its ends must be one node type; "
                        f"{edge.type_name} goes from {edge.from_type} to {edge.to_type}: use the directed form "
                        f"(${clause.src} {clause.edge} ${clause.dst})",
                        clause.edge_token,
                    )
                src = endpoint(clause.src, clause.token, self._catalog.node(str(edge.from_type)))
                bound_edge = None
                if clause.edge_var is not None:
                    bound_edge = self._new_var(clause.edge_var.text[1:], edge, clause.edge_var)
                    local.append(bound_edge)
                    scope[self._vars[bound_edge].name] = bound_edge
                dst = endpoint(clause.dst, clause.dst_token, self._catalog.node(str(edge.to_type)))
                self._check_endpoint(edge, src, "from", str(edge.from_type), clause.token)
                self._check_endpoint(edge, dst, "to", str(edge.to_type), clause.dst_token)
                hops.append(Hop(src, edge, dst, clause.min_hops, clause.max_hops, clause.undirected, bound_edge))
        compares.extend(self._filter(clause, scope) for clause in clauses if isinstance(clause, Filter))
        conditions: list[Condition] = []
        for clause in clauses:
            if isinstance(clause, (BoolFilter, SubPattern)):
                for part in self._conjuncts(clause, scope):
                    if isinstance(part, Compare):
                        compares.append(part)
                    else:
                        conditions.append(part)
        matches = tuple(self._text_match(clause, scope) for clause in clauses if isinstance(clause, TextSearch))
        negations = tuple(self._block(c.clauses, scope)[0] for c in clauses if isinstance(c, Negation))
        variables = tuple(self._vars[index] for index in local)
        return Block(variables, tuple(hops), tuple(compares), negations, tuple(conditions), matches), scope

    def _check_edge_names(self, clauses: tuple[Clause, ...], outer: dict[str, int]) -> None:
        """Refuse an edge binding whose name is ``$_`` or already a variable (outer, or of this block)."""
        nodes: dict[str, Token] = {}
        for clause in clauses:
            if isinstance(clause, Binding):
                nodes.setdefault(clause.var, clause.token)
            elif isinstance(clause, Traversal):
                nodes.setdefault(clause.src, clause.token)
                nodes.setdefault(clause.dst, clause.dst_token)
        edges: dict[str, Token] = {}
        for clause in clauses:
            if not isinstance(clause, Traversal) or clause.edge_var is None:
                continue
            token = clause.edge_var
            name = token.text[1:]
            if name == ANONYMOUS:
                raise _error(
                    f"an edge binding needs a name ($k:{clause.edge}); to match without binding, "
                    f"write ${clause.src} {clause.edge} ${clause.dst}",
                    token,
                )
            first = edges.get(name) or nodes.get(name) or (self._where[outer[name]] if name in outer else None)
            if first is not None:
                raise _error(
                    f"{token.text} names another variable too (at {first.line}:{first.column}); an edge binding "
                    f"({token.text}:{clause.edge}) introduces a variable of its own: give it a new name",
                    token,
                )
            edges[name] = token

    def _declared_types(self, clauses: tuple[Clause, ...], outer: dict[str, int]) -> dict[str, tuple[TableDef, Token]]:
        """The node type each named variable is bound to by this block's bindings.

        The bindings are checked against each other and against the enclosing blocks.
        """
        found: dict[str, tuple[TableDef, Token]] = {}
        for clause in clauses:
            if not isinstance(clause, Binding) or clause.var == ANONYMOUS:
                continue
            table = self._node(clause)
            known = found.get(clause.var)
            if known is None and clause.var in outer:
                var = self._vars[outer[clause.var]]
                known = (var.table, self._where[var.index])
            if known is not None and known[0].type_name != table.type_name:
                where = known[1]
                raise _error(
                    f"${clause.var} is a {known[0].type_name} (bound at {where.line}:{where.column}); "
                    f"it cannot also be a {table.type_name}",
                    clause.type_token,
                )
            found.setdefault(clause.var, (table, clause.token))
        return found

    def _node(self, clause: Binding) -> TableDef:
        name = clause.type_name
        if self._catalog.has_node(name):
            return self._catalog.node(name)
        if self._catalog.has_edge(name):
            lowered = name[0].lower() + name[1:]
            raise _error(
                f"{name} is an edge type; bind node types and traverse edges ($a {lowered} $b), or bind each edge ($a $e:{lowered} $b)",
                clause.type_token,
            )
        raise _error(f"unknown node type {name!r}", clause.type_token)

    def _edge(self, clause: Traversal) -> TableDef:
        name = self._edges.get(clause.edge)
        if name is None:
            known = ", ".join(sorted(self._edges)) or "none"
            raise _error(f"unknown edge {clause.edge!r} (edges are named with a lower-case first letter: {known})", clause.edge_token)
        return self._catalog.edge(name)

    def _check_endpoint(self, edge: TableDef, index: int, side: str, expected: str, token: Token) -> None:
        var = self._vars[index]
        if var.table.type_name != expected:
            where = self._where[index]
            raise _error(
                f"{edge.type_name} goes from {edge.from_type} to {edge.to_type}; {token.text} is a "
                f"{var.table.type_name} (bound at {where.line}:{where.column}), not the {side} side's {expected}",
                token,
            )

    # -- operands and comparisons ------------------------------------------------------------

    def _variable(self, name: str, token: Token, scope: dict[str, int]) -> Var:
        if name == ANONYMOUS:
            raise _error("$_ is anonymous: it matches anything and has no properties to read", token)
        if name not in scope:
            raise _error(f"unknown variable ${name} (bind it with ${name}: Type or a traversal)", token)
        return self._vars[scope[name]]

    def _column(self, ref: PropRef, scope: dict[str, int]) -> Column:
        var = self._variable(ref.var, ref.token, scope)
        if ref.prop == "id" and var.is_edge:
            raise _error(
                f"${ref.var}.id: the id of a bound edge is not queryable (upstream OmniGraph does not expose it either); "
                f"use its properties (${ref.var}.prop) or its endpoints' ids",
                ref.prop_token,
            )
        if ref.prop == "id":
            return Column(var.index, "id", STRING)
        if not var.table.has_property(ref.prop):
            raise _error(f"{var.table.kind} type {var.table.type_name} has no property {ref.prop!r}", ref.prop_token)
        ptype = var.table.property(ref.prop).type
        if isinstance(ptype, BlobType):
            raise _error(
                f"{var.table.type_name}.{ref.prop} is a Blob, which a read query cannot use; read its bytes with "
                f"omnigraph blob get --type {var.table.type_name} --id ID --property {ref.prop} GRAPH",
                ref.prop_token,
            )
        return Column(var.index, ref.prop, ptype)

    def _operand(self, operand: SourceOperand, scope: dict[str, int]) -> Operand:
        if isinstance(operand, PropRef):
            return self._column(operand, scope)
        if isinstance(operand, ParamRef):
            param = self._declared.get(operand.name)
            if param is None:
                raise _error(f"undeclared parameter ${operand.name}", operand.token)
            return Const(self._params[operand.name], param.type)
        return _literal(operand)

    def _compare(self, left: Operand, op: str, right: Operand, token: Token, sides: tuple[Token, Token]) -> Compare:
        problem = comparison_problem(left.type, op, right.type)
        if problem is not None:
            raise _error(problem, token)
        if op in ("=", "!="):
            for column, const, where in ((left, right, sides[1]), (right, left, sides[0])):
                if (
                    isinstance(column, Column)
                    and isinstance(const, Const)
                    and isinstance(column.type, EnumType)
                    and const.type == STRING
                    and const.value is not None
                    and const.value not in column.type.values
                ):
                    raise _error(f"{const.value!r} is not a value of {column.type}", where)
        return Compare(left, op, right)

    def _filter(self, clause: Filter, scope: dict[str, int]) -> Compare:
        left, right = self._operand(clause.left, scope), self._operand(clause.right, scope)
        empty = isinstance(clause.right, LiteralValue) and clause.right.value == []
        if clause.op == "in" and empty and isinstance(left.type, ScalarType):
            right = Const([], ListType(left.type))  # [] takes its item type from the value
        return self._compare(left, clause.op, right, clause.op_token, (clause.left.token, clause.right.token))

    def _constraint(self, index: int, member: Assignment) -> Compare:
        var = self._vars[index]
        ref = PropRef(var.name, member.prop, member.token, member.token)
        column = self._column(ref, {var.name: index})
        if isinstance(column.type, (ListType, VectorType)):
            raise _error(f"{var.table.type_name}.{member.prop} is a {column.type}; compare it in a filter (contains)", member.token)
        assert not isinstance(member.value, Now)  # a binding's members hold operand values only (Cursor.operand_value)
        value = self._operand(member.value, {})
        return self._compare(column, "=", value, member.token, (member.token, member.value.token))

    # -- boolean conditions and sub-patterns ----------------------------------------------------

    def _conjuncts(self, clause: BoolFilter | SubPattern, scope: dict[str, int]) -> list[Condition]:
        """The clause's condition split at its top-level ``and``s (a row is kept when each holds)."""
        if isinstance(clause, SubPattern):
            return [self._sub_pattern(clause, scope)]
        parts: list[BoolExpr] = [clause.expr]
        found: list[Condition] = []
        while parts:
            expr = parts.pop(0)
            if isinstance(expr, AndOr) and expr.op == "and":
                parts[:0] = [expr.left, expr.right]
            else:
                found.append(self._condition(expr, scope))
        return found

    def _condition(self, expr: BoolExpr, scope: dict[str, int]) -> Condition:
        if isinstance(expr, Filter):
            return self._filter(expr, scope)
        if isinstance(expr, AndOr):
            return Junction(expr.op, self._condition(expr.left, scope), self._condition(expr.right, scope))
        if isinstance(expr, NotExpr):
            return Inverse(self._condition(expr.operand, scope))
        if isinstance(expr, NullTest):
            return NullCheck(self._operand(expr.operand, scope), expr.negated)
        operand = self._operand(expr, scope)
        if operand.type != BOOL:
            text = f"${expr.var}.{expr.prop}" if isinstance(expr, PropRef) else expr.token.text
            raise _error(
                f"a condition on its own must be Bool, and {text} is {operand.type}: "
                "compare it (= != < <= > >=, contains, starts_with) or test it (is null, is not null)",
                expr.token,
            )
        return Truth(operand)

    def _sub_pattern(self, clause: SubPattern, scope: dict[str, int]) -> SubQuery:
        block = self._block(clause.clauses, scope)[0]
        if clause.func == "exists":
            return SubQuery(block, None, None)
        assert clause.op is not None and clause.right is not None and clause.op_token is not None  # count: parsed with both
        right = self._operand(clause.right, scope)
        problem = comparison_problem(I64, clause.op, right.type)
        if problem is not None:
            raise _error(f"count {{ ... }} is a number (I64): {problem}", clause.op_token)
        return SubQuery(block, clause.op, right)

    # -- return and order --------------------------------------------------------------------

    def _outputs(self, items: tuple[ReturnItem, ...], scope: dict[str, int]) -> tuple[Output, ...]:
        outputs: list[Output] = []
        seen: dict[str, Token] = {}
        for item in items:
            expr = item.expr
            if isinstance(expr, (Nearest, TextSearch, Rrf)):
                score = self._score(expr, scope)
                output = Output(item.alias or _score_name(expr), None, _score_var(score), None, F64, score)
                token = expr.token
            elif isinstance(expr, Aggregate):
                column = None
                if expr.prop is not None:
                    column = self._column(PropRef(expr.var, expr.prop, expr.var_token, expr.var_token), scope)
                    problem = aggregate_problem(expr.func, column.type)
                    if problem is not None:
                        raise _error(problem, expr.token)
                else:
                    self._variable(expr.var, expr.var_token, scope)
                var = scope[expr.var]
                text = f"{expr.func}(${expr.var}{'.' + expr.prop if expr.prop else ''})"
                output = Output(
                    item.alias or text, expr.func, var, column, aggregate_type(expr.func, None if column is None else column.type)
                )
                token = expr.token
            else:
                column = self._column(expr, scope)
                output = Output(item.alias or f"{expr.var}.{expr.prop}", None, column.var, column, column.type)
                token = expr.token
            token = item.alias_token or token
            if output.name in seen:
                first = seen[output.name]
                raise _error(
                    f"two return columns are named {output.name!r} (the first at {first.line}:{first.column}); give one an alias with as",
                    token,
                )
            seen[output.name] = token
            outputs.append(output)
        return tuple(outputs)

    def _nearest(self, call: Nearest, scope: dict[str, int]) -> NearestScore:
        column = self._column(call.prop, scope)
        return check_nearest(call, column.var, column.type, self._declared, self._params)

    def _text_search(self, call: TextSearch, scope: dict[str, int]) -> TextMatch | Bm25Score:
        column = self._column(call.prop, scope)
        return check_text_search(call, column.var, column.type, self._declared, self._params)

    def _text_match(self, call: TextSearch, scope: dict[str, int]) -> TextMatch:
        found = self._text_search(call, scope)
        assert isinstance(found, TextMatch)  # the parser takes bm25 in return and order only
        return found

    def _score(self, call: Nearest | TextSearch | Rrf, scope: dict[str, int]) -> NearestScore | Bm25Score | RrfScore:
        if isinstance(call, Rrf):
            first, second = self._score(call.first, scope), self._score(call.second, scope)
            assert not isinstance(first, RrfScore) and not isinstance(second, RrfScore)  # the parser nests none
            return RrfScore(first, second, check_rrf_k(call.k, self._declared, self._params))
        if isinstance(call, Nearest):
            return self._nearest(call, scope)
        found = self._text_search(call, scope)
        assert isinstance(found, Bm25Score)  # the parser takes only bm25 in return and order
        return found

    def _check_search_use(self, returns: tuple[ReturnItem, ...], order: tuple[OrderItem, ...], grouped: bool, limit: int | None) -> None:
        """A grouped query takes no search function; an ordering by ``nearest`` needs a ``limit`` (:mod:`omnigraph.engine.gq.search`)."""
        calls = [item.expr for item in returns if isinstance(item.expr, (Nearest, TextSearch, Rrf))]
        scored = [item.target for item in order if isinstance(item.target, (Nearest, TextSearch, Rrf))]
        if grouped and calls + scored:
            first = (calls + scored)[0].token
            raise _error(f"{first.text}(...) cannot be used in a grouped query (a return item is an aggregate)", first)
        ordering = [target for target in scored if isinstance(target, Nearest)]
        if ordering and limit is None:
            raise _error("an ordering by nearest(...) needs a limit (add limit N after order)", ordering[0].token)

    def _sort_key(
        self,
        target: PropRef | Token | Nearest | TextSearch | Rrf,
        descending: bool,
        outputs: tuple[Output, ...],
        grouped: bool,
        scope: dict[str, int],
    ) -> SortKey:
        if isinstance(target, (Nearest, TextSearch, Rrf)):
            score = self._score(target, scope)
            found = next((index for index, output in enumerate(outputs) if output.score == score), None)
            return SortKey(found, None, descending, None if found is not None else score)
        if isinstance(target, Token):
            for index, output in enumerate(outputs):
                if output.name == target.text:
                    return SortKey(index, None, descending)
            raise _error(f"order by {target.text!r}: no return item is named so (order by $v.prop or an alias given with as)", target)
        column = self._column(target, scope)
        for index, output in enumerate(outputs):
            if output.func is None and output.column == column:
                return SortKey(index, None, descending)
        if grouped:
            raise _error(
                f"order by ${target.var}.{target.prop}: a grouped query orders by its returned group keys or aliases",
                target.token,
            )
        return SortKey(None, column, descending)


def _score_name(call: Nearest | TextSearch | Rrf) -> str:
    """The default column name of a search function: ``nearest($d.embedding)``, ``rrf(nearest($d.embedding), bm25($d.body))``."""
    if isinstance(call, Rrf):
        return f"rrf({_score_name(call.first)}, {_score_name(call.second)})"
    return f"{call.token.text}(${call.prop.var}.{call.prop.prop})"


def _score_var(score: NearestScore | Bm25Score | RrfScore) -> int:
    """The variable a search score is of (an ``rrf``'s: its first ranking's)."""
    return _score_var(score.first) if isinstance(score, RrfScore) else score.var


def _literal(literal: LiteralValue) -> Const:
    value = literal.value
    if isinstance(value, list):
        return _list_literal(literal)
    if literal.typed is not None:
        ptype = ScalarType(literal.typed)
        return Const(coerce_value(ptype, value), ptype)
    ltype: PropertyType | None
    if isinstance(value, bool):
        ltype = ScalarType("Bool")
    elif isinstance(value, int):
        ltype = integer_literal_type(value)
        if ltype is None:
            raise _error("integer literal out of range (beyond U64)", literal.token)
    elif isinstance(value, float):
        ltype = ScalarType("F64")
    else:
        ltype = STRING
    return Const(value, ltype)


def _list_literal(literal: LiteralValue) -> Const:
    """A list literal (after ``in``), typed by its items' one family.

    ``[Bool]``, ``[String]``, ``[F64]`` when an item is a decimal, else ``[I64]`` (``[U64]`` when
    an item is beyond ``I64``); ``[]`` is ``[String]`` here, retyped by what it is compared with.
    """
    types = [_literal(LiteralValue(item, literal.token)).type for item in literal.value]
    families = sorted({family(ptype) for ptype in types})
    if len(families) > 1:
        raise _error(f"the items of a list are of one type, not {' and '.join(families)}", literal.token)
    item = F64 if F64 in types else U64 if U64 in types else types[0] if types else STRING
    assert isinstance(item, ScalarType)
    return Const(literal.value, ListType(item))


def _edge_names(catalog: Catalog) -> list[str]:
    return [table.type_name for table in catalog.tables() if table.kind == "edge"]


class Var(msgspec.Struct, frozen=True):
    """A match variable bound to one node of ``table`` per row (one edge, when ``table`` is an edge's)."""

    name: str
    table: TableDef
    index: int

    @property
    def is_edge(self) -> bool:
        """Whether the variable binds an edge (``$a $k:knows $b``), not a node."""
        return self.table.kind == "edge"

    @property
    def anonymous(self) -> bool:
        """Whether the name starts with ``_``, as the names of ``$_`` occurrences (``_1``, ``_2``, ...) do."""
        return self.name.startswith("_")


class Column(msgspec.Struct, frozen=True):
    """``$var.column`` (``column`` is a property name or ``id``)."""

    var: int
    column: str
    type: PropertyType


class Const(msgspec.Struct, frozen=True):
    """A literal or bound parameter value (coerced to ``type``'s Python form; None = NULL)."""

    value: Any
    type: PropertyType


Operand = Column | Const


class Compare(msgspec.Struct, frozen=True):
    """``left op right``; ``op`` is ``= != < <= > >=``, ``contains`` or ``starts_with``."""

    left: Operand
    op: str
    right: Operand


class Hop(msgspec.Struct, frozen=True):
    """A traversal: pairs (source ``src``, destination ``dst``) joined by ``edge``.

    A pair is joined in ``min_hops..max_hops`` breadth-first hops (visited-set rule of the
    reference). ``undirected``: every edge also joins its destination to its source (the edge
    type's ends are then one node type). ``edge_var``: the variable that binds each joining
    edge (bounds ``{1,1}``), one row per edge.
    """

    src: int
    edge: TableDef
    dst: int
    min_hops: int
    max_hops: int
    undirected: bool = False
    edge_var: int | None = None


class Block(msgspec.Struct, frozen=True):
    """One conjunctive block: the variables it introduces, hops, comparisons, negations, other conditions, full-text matches."""

    variables: tuple[Var, ...]
    hops: tuple[Hop, ...]
    compares: tuple[Compare, ...]
    negations: tuple[Block, ...]
    conditions: tuple[Condition, ...] = ()
    text_matches: tuple[TextMatch, ...] = ()

    @property
    def nested(self) -> tuple[Block, ...]:
        """The blocks right inside this one: its negations, then the sub-patterns of its conditions."""
        return self.negations + tuple(sub.block for condition in self.conditions for sub in sub_queries(condition))


class Output(msgspec.Struct, frozen=True):
    """One return column: a value (``func`` None) or an aggregate over the group's rows.

    ``score`` is set for a ``nearest(...)``, ``bm25(...)`` or ``rrf(...)`` item (its value, ``F64``; ``column`` None).
    Otherwise ``column`` is None only for ``count``, which counts the rows of the group (each row binds
    ``var``). ``type`` is the column's type for rendering: the property type for values and
    ``min``/``max``, ``I64`` for ``count``, ``F64`` for ``avg`` and a float ``sum``, ``I64``-like
    integers (unbounded) for an integer ``sum``.
    """

    name: str
    func: AggregateFunc | None
    var: int
    column: Column | None
    type: PropertyType
    score: NearestScore | Bm25Score | RrfScore | None = None


class SortKey(msgspec.Struct, frozen=True):
    """An ``order`` key: an output (by index), a column of a variable that is not returned, or an unreturned ``nearest`` distance."""

    output: int | None
    column: Column | None
    descending: bool
    score: NearestScore | Bm25Score | RrfScore | None = None


class BoundRead(msgspec.Struct, frozen=True):
    """A checked read query; ``grouped`` when a return item is an aggregate."""

    name: str
    variables: tuple[Var, ...]
    block: Block
    outputs: tuple[Output, ...]
    grouped: bool
    order: tuple[SortKey, ...]
    limit: int | None


class Junction(msgspec.Struct, frozen=True):
    """``left and right`` or ``left or right`` (three-valued: true, false or unknown)."""

    op: Literal["and", "or"]
    left: Condition
    right: Condition


class Inverse(msgspec.Struct, frozen=True):
    """``not part``: true when ``part`` is false, unknown when it is unknown."""

    part: Condition


class NullCheck(msgspec.Struct, frozen=True):
    """``operand is null`` (``negated``: ``is not null``); never unknown."""

    operand: Operand
    negated: bool


class Truth(msgspec.Struct, frozen=True):
    """A ``Bool`` operand taken as the condition (unknown when it is null)."""

    operand: Operand


class SubQuery(msgspec.Struct, frozen=True):
    """``exists { block }`` (``op`` None), or ``count { block } op right``.

    The count is the number of distinct bindings of the block's own variables that satisfy it
    (0 or 1 for a block that introduces none), per row of the enclosing block; ``exists`` is never
    unknown.
    """

    block: Block
    op: str | None
    right: Operand | None


Condition = Compare | Junction | Inverse | NullCheck | Truth | SubQuery
"""A condition of a block beyond its plain comparisons; a row is kept when it is true."""


def sub_queries(condition: Condition) -> list[SubQuery]:
    """The ``exists``/``count`` sub-patterns of ``condition`` outside any nested block, left to right."""
    if isinstance(condition, SubQuery):
        return [condition]
    if isinstance(condition, Junction):
        return sub_queries(condition.left) + sub_queries(condition.right)
    if isinstance(condition, Inverse):
        return sub_queries(condition.part)
    return []
