"""The integrity check's report, and the shapes of what the caller of the check passes in.

One :class:`Finding` per problem, the :class:`CheckReport` of a whole graph
(:func:`omnigraph.engine.maintenance.check.check_graph` builds it), and the shapes of what the
caller passes in: an id scanner (:data:`IdScanner`, reporting an :class:`IdScan`) and the claim
findings (:data:`ClaimFindings`).

A finding's ``kind`` is stable (scripts match on it); what resolves each kind is
:data:`omnigraph.engine.maintenance.fixes.FIXES`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import lance
from pydantic import BaseModel, ConfigDict, Field

from omnigraph.engine.storage.store import GraphStore

ImageKey = tuple[str, str | None, int]


class IdScan(Protocol):
    """What an id scanner reports about one image (read-only)."""

    @property
    def rows(self) -> int:
        """How many rows the image has."""

    @property
    def null_ids(self) -> int:
        """How many of them have a null id."""

    @property
    def duplicates(self) -> list[tuple[str, int]]:
        """Each id held by more than one row, with its row count."""


IdScanner = Callable[[lance.LanceDataset], IdScan]


class Finding(BaseModel):
    """One integrity problem. ``kind`` is stable (scripts match on it); ``details`` its facts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    branch: str | None = None
    table_key: str | None = None
    table_path: str | None = None
    message: str
    details: dict[str, Any] = Field(default_factory=dict)

    def sort_key(self) -> tuple[str, str, str, str, str]:
        """The order of findings in a report: kind, branch, table key, table path, message."""
        return (self.kind, self.branch or "", self.table_key or "", self.table_path or "", self.message)


ClaimFindings = Callable[[GraphStore, str | None], list[Finding]]
"""What the caller knows about the migration claim of a graph at a stamp, as findings."""


class CheckReport(BaseModel):
    """The whole check: what was examined and every finding, sorted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    graph: str
    stamp: str | None
    branches: list[str]
    images_checked: int
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        """True if the check found nothing."""
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        """The report's JSON document: every field (findings included) plus ``ok``."""
        return {**self.model_dump(mode="json"), "ok": self.ok}
