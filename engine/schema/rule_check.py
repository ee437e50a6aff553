"""Checking values against a type's ``@range`` and ``@check`` rules (nulls are exempt).

One implementation for every write path: the JSONL reader checks each record
(:func:`row_violation`), the columnar reader and the merge/mutate checks take Arrow rows
(:func:`table_violations`). A violation names the type, the property, the rule and the value;
callers add the id and the input line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from omnigraph.engine.schema.constraints import CheckRule, RangeRule
from omnigraph.engine.schema.tables import TableDef


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
