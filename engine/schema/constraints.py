"""Checked constraints and metadata of a schema: what a write must satisfy, and what is only kept.

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
:class:`omnigraph.engine.schema.tables.TableDef`. Nulls are exempt from every value rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from omnigraph.engine.schema.printer import quote

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
