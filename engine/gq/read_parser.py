"""The read-query grammar of ``.gq`` (the body of a query that starts with ``match``)::

    read      := "match" "{" clause+ "}" "return" "{" item (SEP item)* "}"
                 ("order" "{" key (SEP key)* "}")? ("limit" INT)?
    clause    := VAR ":" TYPE ("{" (NAME ":" operand (SEP NAME ":" operand)*)? "}")?   binding
               | VAR EDGE VAR ("{" INT "," INT "}")?                                   traversal
               | operand CMP operand                                                   filter
               | "not" "{" clause+ "}"                                                 negation
    operand   := VAR "." NAME | literal | PARAM
    CMP       := "=" | "!=" | "<" | "<=" | ">" | ">=" | "contains" | "starts_with"
    item      := (VAR "." NAME | "count" "(" VAR ")" | AGG "(" VAR "." NAME ")") ("as" NAME)?
    AGG       := "sum" | "avg" | "min" | "max"
    key       := (VAR "." NAME | NAME) ("asc" | "desc")?

``SEP`` is a comma or a line break; match clauses are separated by whitespace only. ``VAR`` and
``PARAM`` are both spelled ``$name``: ``$name`` is a variable where a binding, traversal or
``.prop`` needs one, a parameter elsewhere. Literals are :meth:`omnigraph.engine.gq.cursor.Cursor.operand_value`'s.
Bounds: ``{min,max}`` with ``1 <= min <= max``; ``{n,}`` (no upper bound) is refused.
"""

from __future__ import annotations

from omnigraph.engine.gq.cursor import Cursor
from omnigraph.engine.gq.lexer import Token
from omnigraph.engine.gq.syntax import (
    Aggregate,
    Assignment,
    Binding,
    Clause,
    Filter,
    Negation,
    Operand,
    OrderItem,
    PropRef,
    ReadBody,
    ReturnItem,
    Traversal,
)

COMPARISONS = ("contains", "starts_with")
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


def _clause(cursor: Cursor) -> Clause:
    token = cursor.peek
    if token.kind == "name" and token.text == "not" and cursor.ahead(1).text == "{":
        cursor.next()
        return Negation(_block(cursor, "not"), token)
    if token.kind == "param":
        following = cursor.ahead(1)
        if following.kind == "punct" and following.text == ":":
            return _binding(cursor)
        if following.kind == "name" and following.text not in COMPARISONS:
            return _traversal(cursor)
    left = _operand(cursor)
    op = cursor.peek
    if op.kind == "op" or (op.kind == "name" and op.text in COMPARISONS):
        cursor.next()
    else:
        raise cursor.fail("expected a comparison (= != < <= > >= contains starts_with)")
    return Filter(left, op.text, _operand(cursor), op)


def _operand(cursor: Cursor) -> Operand:
    token = cursor.peek
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


def _traversal(cursor: Cursor) -> Traversal:
    src = cursor.next()
    edge = cursor.next()
    dst = cursor.expect("param", what=f"a variable ($name) after the edge {edge.text}")
    low, high = 1, 1
    if cursor.at("punct", "{"):
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
    return Traversal(src.text[1:], edge.text, dst.text[1:], low, high, src, edge, dst)


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


def _item_expr(cursor: Cursor) -> PropRef | Aggregate:
    token = cursor.peek
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
        return Aggregate(token.text, var.text[1:], prop, token, var)
    if token.kind == "param" and cursor.ahead(1).text == ".":
        operand = _operand(cursor)
        assert isinstance(operand, PropRef)
        return operand
    raise cursor.fail("expected a return item: $v.prop, count($v) or sum|avg|min|max($v.prop)")


def _order(cursor: Cursor) -> tuple[OrderItem, ...]:
    cursor.expect("punct", "{", "'{' after order")
    keys: list[OrderItem] = []
    while not cursor.at("punct", "}"):
        target: PropRef | Token
        if cursor.at("param"):
            if cursor.ahead(1).text != ".":
                raise cursor.fail("order by $v.prop or a return alias")
            operand = _operand(cursor)
            assert isinstance(operand, PropRef)
            target = operand
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
