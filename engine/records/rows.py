"""The typed rows a parse yields: :class:`NodeRow` and :class:`EdgeRow`.

They live apart from the parser (:mod:`omnigraph.engine.records.parse`) so that the Arrow conversion
(:mod:`omnigraph.engine.records.arrow`), which the parser re-exports, can import them without importing
the parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NodeRow:
    """A validated node record: ``values`` holds every declared property, coerced (None = null)."""

    line: int
    type_name: str
    id: str
    values: dict[str, Any]


@dataclass(frozen=True)
class EdgeRow:
    """A validated edge record; ``src``/``dst`` are endpoint node ids (checked later)."""

    line: int
    type_name: str
    id: str
    src: str
    dst: str
    values: dict[str, Any]
