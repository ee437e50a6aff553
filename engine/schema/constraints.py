"""[omnigraph.engine.schema.constraints]
Checking values against a type's ``@range`` and ``@check`` rules (nulls are exempt).

One implementation for every write path: the JSONL reader checks each record
(:func:`row_violation`), the columnar reader and the merge/mutate checks take Arrow rows
(:func:`table_violations`). A violation names the type, the property, the rule and the value;
callers add the id and the input line.


[omnigraph.engine.schema.constraints]
Checked constraints and metadata of a schema: what a write must satisfy, and what is only kept.

- :class:`Cardinality`: ``@card(min..max)`` on an edge type ``E: A -> B``: every ``A`` node is
  the source of at least ``min`` and at most ``max`` (None = unbounded) ``E`` edges. Default
  ``0..`` (no constraint).
- :class:`RangeRule`: ``@range(p, low..high)``: a non-null numeric value lies in ``[low, high]``
  (an omitted bound is open).
- :class:`CheckRule`: ``@check(p, "regex")``: a non-null String value matches the Python regular
  expression as a whole (:func:`re.fullmatch`).
- :class:`Metadata`: any other annotation (``@description``, ``@instruction``, ``@embed``,
  ``@rename_from`` and unknown ones), kept with its arguments as JSON values; it changes no
  write.

Composite ``@unique(p, q)`` and ``@index(p, q)`` are tuples of member names on
:class:`omnigraph.engine.schema.catalog.TableDef`. Nulls are exempt from every value rule.

"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pyarrow as pa

from omnigraph.engine.schema.catalog import TableDef
from omnigraph.engine.schema.parser import quote


@dataclass(frozen=True)
class ValueViolation:
    """A value one rule refuses; ``index`` is the row's position in the checked table (0 for a row)."""

    table: TableDef
    rule: RangeRule | CheckRule
    value: Any
    index: int = 0

    @property
    def kind(self) -> str:
        return "range_violation" if isinstance(self.rule, RangeRule) else "check_violation"

    def describe(self) -> str:
        """``T.p value V is outside @range(p, a..b)`` or ``... does not match @check(p, 're')``."""
        what = "is outside" if isinstance(self.rule, RangeRule) else "does not match"
        return f"{self.table.type_name}.{self.rule.property} value {self.value!r} {what} {self.rule.describe()}"

    def details(self) -> dict[str, Any]:
        return {"type_name": self.table.type_name, "property": self.rule.property, "rule": self.rule.describe(), "value": self.value}


def _refuses(rule: RangeRule | CheckRule, value: Any) -> bool:
    if value is None:
        return False
    return not rule.allows(value)


def row_violation(table: TableDef, values: dict[str, Any]) -> ValueViolation | None:
    """The first rule (ranges, then checks, in source order) that one row's ``values`` break."""
    for rule in (*table.ranges, *table.checks):
        value = values.get(rule.property)
        if _refuses(rule, value):
            return ValueViolation(table, rule, value)
    return None


def table_violations(table: TableDef, rows: pa.Table) -> list[ValueViolation]:
    """Every rule each row of ``rows`` (with the table's property columns) breaks, by row then rule."""
    found: list[ValueViolation] = []
    for rule in (*table.ranges, *table.checks):
        for index, value in enumerate(rows.column(rule.property).to_pylist()):
            if _refuses(rule, value):
                found.append(ValueViolation(table, rule, value, index))
    return sorted(found, key=lambda v: v.index)


Bound = int | float


def _bound(value: Bound | None) -> str:
    return "" if value is None else str(value)


@dataclass(frozen=True)
class Cardinality:
    """Bounds on the number of edges of one edge type per source node."""

    min: int = 0
    max: int | None = None

    @property
    def constrains(self) -> bool:
        """Whether any count is refused (``0..`` refuses none)."""
        return self.min > 0 or self.max is not None

    def allows(self, count: int) -> bool:
        return count >= self.min and (self.max is None or count <= self.max)

    def describe(self) -> str:
        """``min..max``, with ``*`` for an unbounded maximum."""
        return f"{self.min}..{'*' if self.max is None else self.max}"


@dataclass(frozen=True)
class RangeRule:
    """``@range(property, low..high)``."""

    property: str
    low: Bound | None
    high: Bound | None

    def allows(self, value: Bound) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def describe(self) -> str:
        return f"@range({self.property}, {_bound(self.low)}..{_bound(self.high)})"


@dataclass(frozen=True)
class CheckRule:
    """``@check(property, pattern)``; ``pattern`` compiled once, on first use."""

    property: str
    pattern: str

    @cached_property
    def _compiled(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    def allows(self, value: str) -> bool:
        return self._compiled.fullmatch(value) is not None

    def describe(self) -> str:
        return f"@check({self.property}, {quote(self.pattern)})"


@dataclass(frozen=True)
class Metadata:
    """A kept annotation: its name, its arguments as JSON values (None without parentheses;
    a range is ``{"low": ..., "high": ...}``) and whether the language knows it."""

    name: str
    args: tuple[Any, ...] | None = None
    known: bool = field(default=True)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "args": None if self.args is None else list(self.args), "known": self.known}
