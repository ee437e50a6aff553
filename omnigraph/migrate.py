"""``omnigraph.migrate``: the format-4 to format-5 migration from Python, as ``omnigraph-migrate`` runs it.

CI jobs and operators script the upgrade with these functions; each does exactly what the
command of the same name does (the same checks, claim, ledger, barrier and refusals) and returns
a frozen result whose fields are the command's ``--json`` document. Refusals are the same
:mod:`omnigraph.errors` classes, whose ``exit_code`` is the command's exit status (``claim_held``
3, ``validation_failed`` 4, ``recovery_required`` 5, ``format_refused`` 6, ...)::

    report = omnigraph.migrate.preflight("graph", validate=True)
    outcome = omnigraph.migrate.run("graph", owner="ci")
    omnigraph.migrate.verify("graph")

``run`` on a graph already at format 5 (no claim held, ``verify`` passing) does nothing and
returns :class:`UpToDate`, so a job can run it again. Every writer (servers, CLIs, applications
holding a read-write :class:`omnigraph.Graph`) must be stopped before ``run``: ``preflight`` and
``run`` refuse while a registered writer is live unless ``ignore_fleet``.

``queries`` (an :class:`AnswerQueries`: a ``.gq`` source and params by query name, e.g.
``AnswerQueries.from_files(Path("app.gq"), Path("params.json"))``) is the answer check of
``run``, ``resume`` and ``verify``: every read query is answered on every live branch before the
first primary key and again before the stamp, and any difference refuses the stamp
(:class:`~omnigraph.errors.AnswersChanged`, exit 4).

``progress`` takes an object with ``start(label, total)``, ``advance(amount=1)`` and ``finish()``
(:class:`Progress`); by default nothing is reported. ``executor`` is an image executor of
:mod:`omnigraph.migrator.executors` (default: this process validates the images).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omnigraph.engine.graph import default_actor
from omnigraph.engine.progress import Progress, SilentProgress
from omnigraph.engine.storage.store import copy_root, open_store, storage_options_scope
from omnigraph.migrator import inspection
from omnigraph.migrator.inspection import UpToDate as _UpToDate
from omnigraph.results import Result

# The migration itself (``run``, ``resume``, ``abort``) and the answer check's query engine
# (:class:`AnswerQueries`, imported on first access) are imported where they are used: the
# read-only ``preflight``, ``plan`` and ``status`` load neither.
if TYPE_CHECKING:
    from omnigraph.migrator.executors import ImageExecutor
    from omnigraph.migrator.verify import AnswerQueries

__all__ = [
    "Aborted",
    "AnswerQueries",
    "Copied",
    "Migrated",
    "Plan",
    "Preflight",
    "Progress",
    "SilentProgress",
    "Status",
    "UpToDate",
    "Verification",
    "abort",
    "copy",
    "plan",
    "preflight",
    "resume",
    "run",
    "status",
    "verify",
]


@dataclass(frozen=True)
class Preflight(Result):
    """``omnigraph-migrate preflight --json``: the graph is ready (stamp 4, no pending write, no
    claim, no live registered writer); its branches, units and images; with ``validate`` the
    duplicate/null inventory (empty, or :class:`~omnigraph.errors.ValidationFailed` is raised)."""

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


@dataclass(frozen=True)
class Migrated(Result):
    """``run``/``resume --json`` of a migration that wrote stamp 5 and released its claim."""

    status: str
    migration_id: str
    token: str
    units: int
    images: int
    stamp: str
    answer_check: tuple[Mapping[str, Any], ...]
    """One entry per (query, branch) of the answer check: ``query``, ``graph_branch``, ``params``,
    ``rows``, ``ok``, ``message`` (empty without one)."""


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
    """``omnigraph-migrate status --json``: the stamp, the claim and who acts for it, the latest
    migration's ledger, and ``next``, the one command to run next."""

    graph: str
    stamp: str | None
    claim: Mapping[str, Any] | None
    acting: tuple[Mapping[str, Any], ...]
    migration_id: str | None
    ledger: Mapping[str, Any] | None
    ledger_records: int
    units_by_state: Mapping[str, int]
    elapsed_seconds: float | None
    next: str


@dataclass(frozen=True)
class Verification(Result):
    """``omnigraph-migrate verify --json`` of a fully fenced graph (``ok`` is always True here:
    a graph that is not is :class:`~omnigraph.errors.DriftDetected`, with this document as details)."""

    graph: str
    stamp: str
    ok: bool
    problems: tuple[str, ...]
    drift: tuple[Mapping[str, Any], ...]
    answer_check: tuple[Mapping[str, Any], ...]
    """With ``queries``: one entry per recorded answer, each unchanged (empty without)."""


def preflight(
    uri: str,
    *,
    validate: bool = False,
    ignore_fleet: bool = False,
    progress: Progress | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> Preflight:
    """The read-only readiness check; with ``validate`` also the id scan of every pinned image.

    Raises:
        NotFound: no graph at ``uri``.
        FormatRefused: the stamp is not 4.
        RecoveryRequired: write intents are pending (``omnigraph recover`` resolves them).
        ClaimHeld: a migration claim is held.
        FleetActive: a registered writer is live (and not ``ignore_fleet``).
        TableDrift: a table was changed outside the engine in a way that changes rows.
        ValidationFailed: with ``validate``, duplicate or null ids (``details["inventory"]``).
    """
    with storage_options_scope(storage_options):
        document = inspection.preflight(uri, validate, progress or SilentProgress(), ignore_fleet)
    return Preflight.from_document({"inventory": None, **document})


def plan(uri: str, *, storage_options: Mapping[str, str] | None = None) -> Plan:
    """The units a migration would process now (read-only).

    Raises:
        NotFound: no graph at ``uri``.
    """
    with storage_options_scope(storage_options):
        return Plan.from_document(inspection.plan_command(uri))


def _outcome(outcome: Any) -> Migrated | UpToDate:
    if isinstance(outcome, _UpToDate):
        return UpToDate.from_document(outcome.to_json())
    return Migrated.from_document(outcome.to_json())


def run(
    uri: str,
    *,
    owner: str | None = None,
    ignore_fleet: bool = False,
    executor: ImageExecutor | None = None,
    progress: Progress | None = None,
    storage_options: Mapping[str, str] | None = None,
    queries: AnswerQueries | None = None,
    parallel: int | None = None,
) -> Migrated | UpToDate:
    """Migrate every branch of the graph to format 5 in place: claim, barrier, plan, validate,
    install the primary keys unit by unit, verify, stamp 5, release. Crash-safe: a run that
    died is continued with :func:`resume` (its token is in :func:`status`).

    ``owner`` is recorded in the claim and the ledger (default ``OMNIGRAPH_ACTOR``, else the
    login name). ``queries``: the answer check (module docstring). ``parallel``: how many units
    (of distinct branches) are in flight at once (default 16 on an object store, 1 on local disk).

    Raises:
        NotFound: no graph at ``uri``.
        BadRequest: a read query of ``queries`` does not check against the schema (nothing written).
        AnswersChanged: an answer of the answer check changed; the stamp was not written.
        FormatRefused: the stamp is neither 4 nor a releasable 5.
        ClaimHeld: another migration holds the claim.
        FleetActive: a registered writer is live (and not ``ignore_fleet``).
        RecoveryRequired: write intents are pending.
        TableDrift: a table was changed outside the engine in a way that changes rows.
        ValidationFailed: duplicate or null ids; the barrier and the claim are kept for repair.
        DriftDetected: something moved under the barrier (a writer was not stopped).
        ExecutorFailed: the executor could not validate the images.
    """
    from omnigraph.migrator.run import run_migration

    with storage_options_scope(storage_options):
        return _outcome(
            run_migration(uri, owner or default_actor(), progress or SilentProgress(), ignore_fleet, executor, queries, parallel)
        )


def resume(
    uri: str,
    *,
    token: str,
    owner: str | None = None,
    executor: ImageExecutor | None = None,
    progress: Progress | None = None,
    storage_options: Mapping[str, str] | None = None,
    queries: AnswerQueries | None = None,
    parallel: int | None = None,
) -> Migrated:
    """Continue the migration whose claim carries ``token`` from its ledger (after a crash, or a
    repair of duplicates under the claim). Answers the migration recorded are checked before the
    stamp; ``queries`` is needed only if it died before recording them, and must be the same.
    ``parallel`` as for :func:`run`.

    Raises:
        AnswersChanged: an answer of the answer check changed; the stamp was not written.
        NotFound: no graph, or no claim to resume.
        PreconditionFailed: ``token`` is not the claim's, or the claim was broken (abort it).
        ClaimHeld: a process acting for the claim is still alive on this host.
        ValidationFailed: duplicate or null ids remain.
        MigrationRefused: a table fork is not the one its sidecar planned.
        DriftDetected: something moved under the barrier.
    """
    from omnigraph.migrator.run import resume_migration

    with storage_options_scope(storage_options):
        outcome = resume_migration(uri, token, owner or default_actor(), progress or SilentProgress(), executor, queries, parallel)
    return Migrated.from_document(outcome.to_json())


def status(uri: str, *, tail: int | None = None, storage_options: Mapping[str, str] | None = None) -> Status:
    """The stamp, the claim holder (and every process acting for it), the latest migration's
    ledger (its last ``tail`` records, or all) and the command to run next (read-only).

    Raises:
        NotFound: no graph at ``uri``.
        LedgerCorrupt: a ledger record cannot be read.
    """
    with storage_options_scope(storage_options):
        document, _ = inspection.status(uri, tail)
    return Status.from_document(document)


def verify(uri: str, *, storage_options: Mapping[str, str] | None = None, queries: AnswerQueries | None = None) -> Verification:
    """Check every live table on every branch has the primary key ``[id]`` and nothing is
    unpublished (read-only); with ``queries``, also that they answer as when the migration that
    stamped the graph recorded them.

    Raises:
        AnswersChanged: with ``queries``, an answer differs from the recorded one.
        PreconditionFailed: with ``queries``, that migration recorded no answers, or other queries.
        NotFound: no graph at ``uri``.
        ClaimHeld: the migration claim is still held (the details name the next command).
        DriftDetected: the graph is not fully fenced (the problems are listed).
    """
    with storage_options_scope(storage_options):
        return Verification.from_document(inspection.verify(uri, queries))


@dataclass(frozen=True)
class Copied(Result):
    """``omnigraph-migrate copy --json``: how many objects and bytes were copied."""

    source: str
    destination: str
    objects: int
    bytes: int


def copy(source: str, destination: str, *, storage_options: Mapping[str, str] | None = None) -> Copied:
    """Copy a graph root (every branch and version) to an empty ``destination``, for rehearsals.
    ``source`` is only read. Branches of the copy keep reading their inherited data files from
    ``source`` (Lance records the root's URI), so the copy is not a backup.

    Raises:
        BadRequest: ``destination`` is not empty.
        NotFound: no such bucket.
    """
    with storage_options_scope(storage_options):
        copied = copy_root(open_store(source), open_store(destination))
    return Copied(source=source, destination=destination, objects=len(copied), bytes=sum(size for _, size in copied))


@dataclass(frozen=True)
class Aborted(Result):
    """``omnigraph-migrate abort --json``: stamp 4 is back and the claim released (installed
    primary keys stay: the migration is rolled forward only)."""

    migration_id: str
    stamp: str
    sidecars_removed: tuple[str, ...]


def abort(
    uri: str, *, token: str, reason: str = "aborted by operator", actor: str | None = None, storage_options: Mapping[str, str] | None = None
) -> Aborted:
    """Give up the migration whose claim carries ``token`` (before stamp 5 only): put stamp 4
    back and release the claim. Old writers may run again, so a later :func:`run` validates every
    image again.

    Raises:
        NotFound: no graph, or no claim to abort.
        PreconditionFailed: ``token`` is not the claim's.
        FormatRefused: the graph is already at stamp 5.
        ClaimHeld: a process acting for the claim is still alive on this host.
    """
    from omnigraph.migrator.claim_ops import abort_migration

    with storage_options_scope(storage_options):
        return Aborted.from_document(abort_migration(uri, token, reason, actor or default_actor()))


def __getattr__(name: str) -> Any:
    """:class:`AnswerQueries` (of :mod:`omnigraph.migrator.verify`), imported on first access."""
    if name != "AnswerQueries":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from omnigraph.migrator.verify import AnswerQueries

    globals()[name] = AnswerQueries
    return AnswerQueries


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
