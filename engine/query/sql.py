"""Operands and comparisons of a bound read query as DuckDB SQL.

Variable ``i`` is the SQL alias ``v{i}`` of its node table; values travel as numbered
parameters (``$1``, ``$2``, ...), each cast to an explicit type so that DuckDB pushes a
comparison of a column with a constant into the Lance scan (and a BTREE on the column serves
it). Numbers compare numerically (the reference's rule): an integer constant takes the type of
the integer column it is compared with when it fits (else both sides are ``HUGEINT``); a
comparison between an integer and a float, or two float types, is made in ``DOUBLE``. NULL on
either side makes a comparison NULL, which never matches.

pylance 14's scanner cannot take a pushed filter on an unsigned integer column (its Substrait
conversion refuses ``U32``/``U64`` fields, and the whole scan fails). A comparison that reads
such a column is therefore written ``coalesce(comparison, FALSE)``: the same rows in a WHERE
clause (NULL is not true either way), but an expression DuckDB does not push, so it filters
those rows itself.
"""

from __future__ import annotations

from typing import Any

from omnigraph.engine.gq.bound_read import Column, Compare, Const, Operand
from omnigraph.engine.gq.read_types import family
from omnigraph.engine.schema.types import FLOAT_SCALARS, INTEGER_RANGES, EnumType, ListType, PropertyType, ScalarType, VectorType

SQL_SCALARS = {
    "I32": "INTEGER",
    "I64": "BIGINT",
    "U32": "UINTEGER",
    "U64": "UBIGINT",
    "F32": "FLOAT",
    "F64": "DOUBLE",
    "String": "VARCHAR",
    "Bool": "BOOLEAN",
    "Date": "DATE",
    "DateTime": "TIMESTAMP",
}
_OPS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class SqlParams:
    """The parameter values of one SQL statement, numbered in the order they are added."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def add(self, value: Any, sql_type: str) -> str:
        self.values.append(value)
        return f"CAST(${len(self.values)} AS {sql_type})"


def quote(name: str) -> str:
    """A DuckDB identifier (``node:Person``, a property name)."""
    return '"' + name.replace('"', '""') + '"'


def sql_type(ptype: PropertyType) -> str:
    if isinstance(ptype, EnumType):
        return "VARCHAR"
    if isinstance(ptype, ListType):
        return f"{sql_type(ptype.item)}[]"
    if isinstance(ptype, VectorType):
        return f"FLOAT[{ptype.dim}]"
    assert isinstance(ptype, ScalarType)
    return SQL_SCALARS[ptype.name]


def column_sql(column: Column) -> str:
    return f"v{column.var}.{quote(column.column)}"


def _is_float(ptype: PropertyType) -> bool:
    return isinstance(ptype, ScalarType) and ptype.name in FLOAT_SCALARS


def _fits(value: Any, ptype: PropertyType) -> bool:
    if value is None:
        return True
    assert isinstance(ptype, ScalarType)
    low, high = INTEGER_RANGES[ptype.name]
    return isinstance(value, int) and low <= value <= high


def _numeric_types(
    left: PropertyType, right: PropertyType, left_const: Const | None, right_const: Const | None
) -> tuple[str | None, str | None]:
    """The SQL types both sides of a numeric comparison are cast to (None: as they are);
    ``left_const``/``right_const`` is the side when it is a constant."""
    if left == right:
        return None, None
    if _is_float(left) or _is_float(right):
        return "DOUBLE", "DOUBLE"
    if right_const is not None and _fits(right_const.value, left):
        return None, sql_type(left)
    if left_const is not None and _fits(left_const.value, right):
        return sql_type(right), None
    return "HUGEINT", "HUGEINT"


def _const(operand: Operand) -> Const | None:
    return operand if isinstance(operand, Const) else None


def operand_sql(operand: Operand, cast: str | None, params: SqlParams) -> str:
    """``operand`` as SQL, cast to ``cast`` when given."""
    if isinstance(operand, Const):
        return params.add(operand.value, cast or sql_type(operand.type))
    text = column_sql(operand)
    return text if cast is None or cast == sql_type(operand.type) else f"CAST({text} AS {cast})"


def _unsigned(operand: Operand) -> bool:
    return isinstance(operand, Column) and isinstance(operand.type, ScalarType) and operand.type.name in ("U32", "U64")


def compare_sql(compare: Compare, params: SqlParams) -> str:
    """``compare`` as a SQL condition (never true when a side is NULL)."""
    text = _compare_sql(compare, params)
    if _unsigned(compare.left) or _unsigned(compare.right):
        return f"coalesce({text}, FALSE)"
    return text


def _compare_sql(compare: Compare, params: SqlParams) -> str:
    left, op, right = compare.left, compare.op, compare.right
    if op == "starts_with":
        return f"starts_with({operand_sql(left, None, params)}, {operand_sql(right, None, params)})"
    if op == "contains" and not isinstance(left.type, ListType):
        return f"contains({operand_sql(left, None, params)}, {operand_sql(right, None, params)})"
    if op == "contains":
        assert isinstance(left.type, ListType)
        item = left.type.item
        if family(item) != "number":
            return f"list_contains({operand_sql(left, None, params)}, {operand_sql(right, sql_type(item), params)})"
        item_cast, right_cast = _numeric_types(item, right.type, None, _const(right))
        list_cast = None if item_cast is None else f"{item_cast}[]"
        return f"list_contains({operand_sql(left, list_cast, params)}, {operand_sql(right, right_cast, params)})"
    left_cast = right_cast = None
    if family(left.type) == "number" and family(right.type) == "number":
        left_cast, right_cast = _numeric_types(left.type, right.type, _const(left), _const(right))
    return f"({operand_sql(left, left_cast, params)} {_OPS[op]} {operand_sql(right, right_cast, params)})"
