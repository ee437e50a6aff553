"""Node ids implied by a block's equalities on every ``@key`` member, for the join planner.

``$p: Person { name: "Ann" }`` (``name`` the key) can only bind the node whose id is ``"Ann"``.
Stating ``v.id = 'Ann'`` as well changes no answer, but lets DuckDB carry the constant through
the joins on ``id`` (``edge.src = v.id``) into the edge table's Lance scan, so a traversal from
one keyed node reads only that node's edges instead of joining the whole edge table first.

Only exact constants of an exactly matching kind derive an id: strings (and enums), booleans,
integers within the key's type, Dates and DateTimes. Float keys never do (a float constant may
equal a stored float numerically while spelling a different id, or the reverse).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from omnigraph.engine.gq.bound_read import Block, Column, Compare, Const
from omnigraph.engine.schema.ids import derive_node_id
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import INTEGER_RANGES, EnumType, ScalarType

_KINDS: dict[str, type | tuple[type, ...]] = {"String": str, "Bool": bool, "Date": dt.date, "DateTime": dt.datetime}


def _exact(table: TableDef, prop: str, value: Any) -> bool:
    ptype = table.property(prop).type
    if isinstance(ptype, EnumType):
        return isinstance(value, str)
    if not isinstance(ptype, ScalarType):
        return False
    if ptype.name in INTEGER_RANGES:
        low, high = INTEGER_RANGES[ptype.name]
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    kind = _KINDS.get(ptype.name)
    if kind is None:
        return False
    if ptype.name == "Date":
        return isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    return isinstance(value, kind)


def _equality(compare: Compare) -> tuple[Column, Any] | None:
    if compare.op != "=":
        return None
    for column, const in ((compare.left, compare.right), (compare.right, compare.left)):
        if isinstance(column, Column) and isinstance(const, Const) and const.value is not None:
            return column, const.value
    return None


def implied_ids(block: Block) -> list[tuple[int, str]]:
    """(variable index, id) for each variable of ``block`` whose key members all equal constants."""
    found: list[tuple[int, str]] = []
    for var in block.variables:
        key = var.table.key
        if key is None:
            continue
        values: dict[str, Any] = {}
        for compare in block.compares:
            equality = _equality(compare)
            if (
                equality is not None
                and equality[0].var == var.index
                and equality[0].column in key
                and _exact(var.table, equality[0].column, equality[1])
            ):
                values.setdefault(equality[0].column, equality[1])
        if set(values) == set(key):
            found.append((var.index, derive_node_id(var.table, values)))
    return found
