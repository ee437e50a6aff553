"""The results of :mod:`omnigraph.migrate`: one frozen dataclass per ``omnigraph-migrate --json`` document.

Each has the field names of the command's ``--json`` document, and ``to_dict()`` gives it back;
:mod:`omnigraph.migrate` names every class (``omnigraph.migrate.Preflight``, ...), which is where
applications take them from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omnigraph.results import Result

__all__ = [
    "Aborted",
    "BrokenClaim",
    "ClaimState",
    "Copied",
    "Duplicates",
    "Migrated",
    "Plan",
    "Preflight",
    "Prepared",
    "Rebuilt",
    "Repaired",
    "Status",
    "UpToDate",
    "Verification",
]


@dataclass(frozen=True)
class Preflight(Result):
    """``omnigraph-migrate preflight --json``: the graph is ready; its branches, units and images.

    Ready means stamp 4, no pending write, no claim, no live registered writer. With ``validate``
    it also holds the duplicate/null inventory (empty, or :class:`~omnigraph.errors.ValidationFailed`
    is raised).
    """

    graph: str
    stamp: str
    ready: bool
    fleet: tuple[Mapping[str, Any], ...]
    branches: tuple[Mapping[str, Any], ...]
    units: tuple[Mapping[str, Any], ...]
    images: int
    out_of_band: tuple[Mapping[str, Any], ...]
    inventory: tuple[Mapping[str, Any], ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document (``inventory`` only when the ids were scanned)."""
        document = super().to_dict()
        if self.inventory is None:
            del document["inventory"]
        return document


@dataclass(frozen=True)
class Plan(Result):
    """``omnigraph-migrate plan --json``: the units (branch, table, pinned image) a migration would process."""

    graph: str
    stamp: str
    branches: tuple[Mapping[str, Any], ...]
    units: tuple[Mapping[str, Any], ...]
    images: int
    cutover: Mapping[str, Any]
    """The predicted cutover: ``units``, ``images``, ``changed_rows``, ``unreceived_rows``,
    ``estimated_seconds``, ``floor_seconds`` (as for ``prepare``)."""


@dataclass(frozen=True)
class Migrated(Result):
    """``run``, ``resume`` or ``refence --json`` of a migration that wrote stamp 5 and released its claim."""

    status: str
    migration_id: str
    token: str
    units: int
    images: int
    stamp: str
    answer_check: tuple[Mapping[str, Any], ...]
    """One entry per (query, branch) of the answer check: ``query``, ``graph_branch``, ``params``,
    ``rows``, ``ok``, ``message`` (empty without one)."""
    outage_seconds: float | None
    """Seconds the barrier was up (writers refused): every ``barrier_set`` to the ``barrier_lowered``
    or ``claim_released`` after it, from the ledger."""


@dataclass(frozen=True)
class Prepared(Result):
    """``omnigraph-migrate prepare --json``: a prepare round ended; the online claim stays held.

    ``cutover`` is the predicted cutover: ``units``, ``images``, ``changed_rows`` (rows to read
    from receipts), ``unreceived_rows`` (rows of images to validate whole), ``estimated_seconds``.
    """

    status: str
    migration_id: str
    token: str
    images: int
    validated: int
    changed_rows: int
    rounds: int
    cutover: Mapping[str, Any]


@dataclass(frozen=True)
class UpToDate(Result):
    """``run --json`` on a graph already at format 5 with no claim held and ``verify`` passing."""

    status: str
    graph: str
    stamp: str
    message: str
    verify: Mapping[str, Any]


@dataclass(frozen=True)
class Status(Result):
    """``omnigraph-migrate status --json``: the stamp, the claim and who acts for it, the ledger, and what next.

    The ledger is the latest migration's; ``next`` is the one command to run next.
    """

    graph: str
    stamp: str | None
    claim: Mapping[str, Any] | None
    acting: tuple[Mapping[str, Any], ...]
    migration_id: str | None
    ledger: Mapping[str, Any] | None
    ledger_records: int
    units_by_state: Mapping[str, int]
    elapsed_seconds: float | None
    phase: str | None
    """The ledger's phase (``prepared`` between prepare and cutover), None without a ledger."""
    barrier_age_seconds: float | None
    """How long the barrier has been up, behind it only (stamp ``migrating``)."""
    outage_seconds: float | None
    """How long writers were held by the migration's barrier in all (None before any barrier)."""
    next: str


@dataclass(frozen=True)
class Verification(Result):
    """``omnigraph-migrate verify --json`` of a fully fenced graph.

    ``ok`` is always True here: a graph that is not fully fenced is
    :class:`~omnigraph.errors.DriftDetected`, with this document as details.
    """

    graph: str
    stamp: str
    ok: bool
    problems: tuple[str, ...]
    drift: tuple[Mapping[str, Any], ...]
    answer_check: tuple[Mapping[str, Any], ...]
    """With ``queries``: one entry per recorded answer, each unchanged (empty without)."""


@dataclass(frozen=True)
class Duplicates(Result):
    """``omnigraph-migrate duplicates --json``: every duplicate or null id of every pinned image."""

    graph: str
    images: int
    inventory: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class Copied(Result):
    """``omnigraph-migrate copy --json``: how many objects and bytes were copied."""

    source: str
    destination: str
    objects: int
    bytes: int


@dataclass(frozen=True)
class Aborted(Result):
    """``omnigraph-migrate abort --json``: stamp 4 is back and the claim released.

    Installed primary keys stay: the migration is rolled forward only.
    """

    migration_id: str
    stamp: str
    sidecars_removed: tuple[str, ...]


@dataclass(frozen=True)
class ClaimState(Result):
    """``omnigraph-migrate claim show --json``: the claim (or None), who acts for it, and the stamp.

    Every process recorded as acting for the claim comes with its liveness, and
    ``holder_process`` is the word for all of them.
    """

    graph: str
    stamp: str | None
    stamp_migration_id: str | None
    claim: Mapping[str, Any] | None
    holder_process: str | None
    acting: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class BrokenClaim(Result):
    """``omnigraph-migrate claim break --json``: the break record and the command to run next."""

    graph: str
    stamp: str | None
    broken: Mapping[str, Any]
    next: str


@dataclass(frozen=True)
class Repaired(Result):
    """``omnigraph-migrate repair --json``: one ledger record per repair commit applied."""

    commits: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class Rebuilt(Result):
    """``omnigraph-migrate rebuild --json``: the source, the new format-5 graph and every branch copied.

    Each branch has its name, parent and rows per table key, in creation order.
    """

    source: str
    destination: str
    stamp: str
    branches: tuple[Mapping[str, Any], ...]
