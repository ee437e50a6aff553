"""Types of read-query operands and which comparisons between them are allowed.

Families: numbers (``I32`` ... ``F64``: compared numerically across integer and float types),
strings (``String`` and enums), ``Bool``, ``Date``, ``DateTime``, lists ``[T]`` and vectors.

* ``= != < <= > >=``: both sides of one family, neither a list nor a vector; ``Bool`` takes
  ``=`` and ``!=`` only. ``Date`` and ``DateTime`` are different families (a ``Date`` property
  compares with ``date("...")`` or a ``Date`` parameter, not with a string).
* ``contains``: two strings (substring), or a list and a value of its item family
  (membership). ``starts_with``: two strings.
* ``sum``/``avg`` take numbers; ``min``/``max`` take numbers, strings, ``Bool``, ``Date`` and
  ``DateTime``.

Literals: a string is ``String``, ``true``/``false`` ``Bool``, an integer ``I64`` (``U64`` above
the ``I64`` range; beyond ``U64`` refused), a decimal ``F64``, ``date("...")`` ``Date`` and
``datetime("...")`` ``DateTime``.
"""

from __future__ import annotations

from omnigraph.engine.schema.types import INTEGER_RANGES, EnumType, ListType, PropertyType, ScalarType, VectorType

NUMBERS = frozenset({"I32", "I64", "U32", "U64", "F32", "F64"})
ORDERED = ("=", "!=", "<", "<=", ">", ">=")
STRING = ScalarType("String")
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
