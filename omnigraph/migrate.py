"""``omnigraph.migrate``: the format-4 to format-5 migration from Python, as ``omnigraph-migrate`` runs it.

This module is the one door into the migrator: ``omnigraph-migrate`` and the playbooks call these
functions, and so do CI jobs and operators that script the upgrade. Each does exactly what the
command of the same name does (the same checks, claim, ledger, barrier and refusals) and returns
a frozen result whose fields are the command's ``--json`` document. Refusals are the same
:mod:`omnigraph.errors` classes, whose ``exit_code`` is the command's exit status (``claim_held``
3, ``validation_failed`` 4, ``recovery_required`` 5, ``format_refused`` 6, ...)::

    report = omnigraph.migrate.preflight("graph", validate=True)
    outcome = omnigraph.migrate.run("graph", owner="ci")
    omnigraph.migrate.verify("graph")

``run`` on a graph already at format 5 (no claim held, ``verify`` passing) does nothing and
returns :class:`UpToDate`, so a job can run it again. ``run`` is :func:`prepare` (every image
validated while format-4 writers go on) then :func:`cutover` (the barrier, for what moved since
and the primary keys only); ``preflight``, ``run`` and ``cutover`` refuse while a registered
writer is live unless ``ignore_fleet`` (a format-4 server cannot write after the stamp). The
operator's tools for a migration that stopped (:func:`abort`, :func:`claim`, :func:`break_claim`,
the duplicate repair) are defined in ``omnigraph._migration_recovery`` and named here.

``queries`` (an :class:`AnswerQueries`: a ``.gq`` source and params by query name, e.g.
``AnswerQueries.from_files(Path("app.gq"), Path("params.json"))``) is the answer check of
``run``, ``resume`` and ``verify``: every read query is answered on every live branch before the
first primary key and again before the stamp, and any difference refuses the stamp
(:class:`~omnigraph.errors.AnswersChanged`, exit 4).

``progress`` takes an object with ``start(label, total)``, ``advance(amount=1)`` and ``finish()``
(:class:`Progress`); by default nothing is reported. ``executor`` is an image executor from
:func:`open_executor` (default: this process validates the images). ``storage_options`` are the
S3 settings of :func:`omnigraph.open`, which take precedence over the environment.

Importing this module loads only the run options (:data:`EXECUTORS`, :data:`MAX_PARALLEL`, ...);
each function imports the part of the migrator it drives when it is called, so a command's
``--help`` and ``status`` stay light.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import omnigraph
from omnigraph._migration_recovery import (
    abort,
    break_claim,
    claim,
    migration_ledger,
    read_repair_decisions,
    repair,
    repair_template,
    unit_sidecars,
    write_repair_decisions,
)
from omnigraph._migration_results import (
    Aborted,
    BrokenClaim,
    ClaimState,
    Copied,
    Duplicates,
    Migrated,
    Plan,
    Preflight,
    Prepared,
    Rebuilt,
    Repaired,
    Status,
    UpToDate,
    Verification,
)
from omnigraph.engine.progress import Progress, SilentProgress
from omnigraph.engine.storage.store import copy_root, open_store
from omnigraph.errors import ClaimHeld
from omnigraph.migrator.options import (
    DEFAULT_PARALLEL_LOCAL,
    DEFAULT_PARALLEL_OBJECT_STORE,
    EXECUTORS,
    MAX_PARALLEL,
    duration_seconds,
    executor_unavailable,
    ray_address_problem,
)

if TYPE_CHECKING:
    from omnigraph.migrator.executors import ImageExecutor
    from omnigraph.migrator.repair import DecisionsFile as RepairDecisions
    from omnigraph.migrator.verify import AnswerQueries

__all__ = [
    "DEFAULT_PARALLEL_LOCAL",
    "DEFAULT_PARALLEL_OBJECT_STORE",
    "EXECUTORS",
    "MAX_PARALLEL",
    "Aborted",
    "AnswerQueries",
    "BrokenClaim",
    "ClaimState",
    "Copied",
    "Duplicates",
    "ImageExecutor",
    "Migrated",
    "Plan",
    "Preflight",
    "Prepared",
    "Progress",
    "Rebuilt",
    "RepairDecisions",
    "Repaired",
    "SilentProgress",
    "Status",
    "UpToDate",
    "Verification",
    "abort",
    "break_claim",
    "claim",
    "claim_refusal",
    "copy",
    "cutover",
    "describe_fleet_entry",
    "duplicates",
    "duration_seconds",
    "executor_unavailable",
    "inventory_lines",
    "ledger_table",
    "migration_ledger",
    "open_executor",
    "plan",
    "preflight",
    "prepare",
    "ray_address_problem",
    "read_repair_decisions",
    "rebuild",
    "refence",
    "repair",
    "repair_template",
    "resume",
    "run",
    "status",
    "unit_sidecars",
    "up_to_date",
    "verify",
    "write_repair_decisions",
]


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
    from omnigraph.migrator.inspection import preflight as check_ready

    document = check_ready(open_store(uri, storage_options), validate, progress or SilentProgress(), ignore_fleet)
    return Preflight.from_document({"inventory": None, **document})


def plan(uri: str, *, storage_options: Mapping[str, str] | None = None) -> Plan:
    """The units a migration would process now, and its predicted cutover (read-only).

    The prediction is against the receipts of a prepared migration if one holds the claim, else as
    right after a prepare (``cutover``: units, images, changed and unreceived rows, seconds).

    Raises:
        NotFound: no graph at ``uri``.
    """
    from omnigraph.migrator.inspection import plan_command
    from omnigraph.migrator.online import predicted_cutover

    store = open_store(uri, storage_options)
    return Plan.from_document({**plan_command(store), "cutover": predicted_cutover(store).to_json()})


def up_to_date(uri: str, *, storage_options: Mapping[str, str] | None = None) -> UpToDate | None:
    """:class:`UpToDate` if the graph is already at format 5, unclaimed and passing ``verify`` (read-only).

    None at any other stamp or while a claim is held.

    Raises:
        NotFound: no graph at ``uri``.
        DriftDetected: the graph is at stamp 5 but not fully fenced.
    """
    from omnigraph.migrator.verify import up_to_date as fenced_already

    outcome = fenced_already(open_store(uri, storage_options))
    return None if outcome is None else UpToDate.from_document(outcome.to_json())


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
    max_outage: float | None = None,
) -> Migrated | UpToDate:
    """Migrate every branch of the graph to format 5 in place: :func:`prepare` online, then :func:`cutover`.

    Writers go on while every pinned image is validated under an online claim; prepare rounds
    repeat until little changed since, then the barrier goes up for the cutover only: what moved
    since is validated from the changed rows, the primary keys are installed unit by unit, then
    verify, stamp 5, release. Given ``max_outage`` (seconds), a cutover predicted longer is refused
    and live writers' commits are waited for at most that long. Duplicate or null ids stop it
    behind the barrier (where their repair works), as before.
    Crash-safe: a run that died is continued with :func:`resume` (its token is in :func:`status`).

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
        ValidationFailed: duplicate or null ids; the claim is kept for repair.
        CutoverDeferred: the predicted outage exceeds ``max_outage``, or writers kept committing
            under the barrier (lowered again); the online claim is kept for :func:`cutover`.
        DriftDetected: something moved under the barrier (a writer was not stopped).
        ExecutorFailed: the executor could not validate the images.
    """
    from omnigraph.migrator.online import run_migration
    from omnigraph.migrator.verify import UpToDate as Fenced

    outcome = run_migration(
        open_store(uri, storage_options),
        owner or omnigraph.default_actor(),
        progress or SilentProgress(),
        ignore_fleet,
        executor,
        queries,
        parallel,
        max_outage,
    )
    if isinstance(outcome, Fenced):
        return UpToDate.from_document(outcome.to_json())
    return Migrated.from_document(outcome.to_json())


def prepare(
    uri: str,
    *,
    token: str | None = None,
    owner: str | None = None,
    executor: ImageExecutor | None = None,
    progress: Progress | None = None,
    storage_options: Mapping[str, str] | None = None,
    parallel: int | None = None,
) -> Prepared:
    """Validate every pinned image of every branch online and record a receipt for each; writers go on.

    Without ``token`` a new migration takes an online claim (it bars other migrations, not the
    graph's format-4 writers); with it, the migration of that claim catches up: only images that
    appeared or moved since their receipts are validated. The claim stays held for
    :func:`cutover`. The result predicts the cutover (units, changed rows, seconds).

    Raises:
        NotFound: no graph at ``uri``, or no claim carrying ``token``.
        FormatRefused: the stamp is not 4.
        ClaimHeld: another migration holds the claim, or a process acting for it is alive.
        TableDrift: a table was changed outside the engine in a way that changes rows.
        PreconditionFailed: the migration of ``token`` is past its online phase, broken or aborted.
        ValidationFailed: duplicate or null ids (the graph stays at stamp 4 and writable).
        ExecutorFailed: the executor could not validate the images.
    """
    from omnigraph.migrator.online import prepare_migration

    store = open_store(uri, storage_options)
    outcome = prepare_migration(store, owner or omnigraph.default_actor(), progress or SilentProgress(), executor, token, parallel)
    return Prepared.from_document(outcome.to_json())


def cutover(
    uri: str,
    *,
    token: str,
    owner: str | None = None,
    max_outage: float | None = None,
    ignore_fleet: bool = False,
    executor: ImageExecutor | None = None,
    progress: Progress | None = None,
    storage_options: Mapping[str, str] | None = None,
    queries: AnswerQueries | None = None,
    parallel: int | None = None,
) -> Migrated:
    """Raise the barrier and finish the prepared migration whose claim carries ``token``.

    Refused with nothing written when the predicted outage exceeds ``max_outage`` seconds
    (default 5). Under the barrier: commits of live writers are waited for, what moved since the
    receipts is validated from the changed rows, the primary keys are installed, then verify,
    stamp 5, release. ``outage_seconds`` of the result is how long the barrier was up.

    Raises:
        CutoverDeferred: the estimate exceeds the bound, or writers kept committing under the
            barrier (lowered again); the graph is writable at stamp 4 and the receipts are kept.
        ValidationFailed: a duplicate or null id appeared since prepare; the barrier stays up for repair.
        FleetActive: a registered writer is live (and not ``ignore_fleet``).
        NotFound, PreconditionFailed, ClaimHeld, DriftDetected, AnswersChanged: as for :func:`resume`.
    """
    from omnigraph.migrator.online import DEFAULT_MAX_OUTAGE, cutover_migration

    store = open_store(uri, storage_options)
    outcome = cutover_migration(
        store,
        token,
        owner or omnigraph.default_actor(),
        progress or SilentProgress(),
        executor,
        queries,
        parallel,
        DEFAULT_MAX_OUTAGE if max_outage is None else max_outage,
        ignore_fleet,
    )
    return Migrated.from_document(outcome.to_json())


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
    """Continue the migration whose claim carries ``token`` from its ledger.

    It continues after a crash, or a repair of duplicates under the claim. A migration that died
    before its barrier (stamp 4, its online claim) is continued by its :func:`cutover`, refused
    (``CutoverDeferred``) when predicted over 5 s of outage. Answers the migration recorded are
    checked before the stamp; ``queries`` is needed only if it died before recording them, and
    must be the same. ``parallel`` as for :func:`run`.

    Raises:
        AnswersChanged: an answer of the answer check changed; the stamp was not written.
        NotFound: no graph, or no claim to resume.
        PreconditionFailed: ``token`` is not the claim's, or the claim was broken (abort it).
        ClaimHeld: a process acting for the claim is still alive on this host.
        ValidationFailed: duplicate or null ids remain.
        MigrationRefused: a table fork is not the one its sidecar planned.
        DriftDetected: something moved under the barrier.
        CutoverDeferred: a migration still at stamp 4 whose cutover is predicted over 5 s.
        FleetActive: a migration still at stamp 4, with a registered writer live.
    """
    from omnigraph.migrator.online import continue_migration

    store = open_store(uri, storage_options)
    outcome = continue_migration(
        store, token, owner or omnigraph.default_actor(), progress or SilentProgress(), executor, queries, parallel
    )
    return Migrated.from_document(outcome.to_json())


def refence(
    uri: str,
    *,
    owner: str | None = None,
    executor: ImageExecutor | None = None,
    progress: Progress | None = None,
    storage_options: Mapping[str, str] | None = None,
    parallel: int | None = None,
) -> Migrated:
    """Fence again a stamp-5 graph: the whole migration protocol again under a new claim.

    That is for a graph that a format-4 writer published to after the stamp (or that pins an image
    without the primary key). ``owner``, ``executor`` and ``parallel`` as for :func:`run`.

    Raises:
        NotFound: no graph at ``uri``.
        FormatRefused: the graph is not at stamp 5.
        PreconditionFailed: nothing needs fencing again.
        ClaimHeld: a migration claim is held.
        RecoveryRequired: a commit is in flight by a live process on this host.
        ValidationFailed: duplicates the old writer let in (repair them, then :func:`resume`).
        DriftDetected: something moved under the barrier.
    """
    from omnigraph.migrator.run import refence_migration

    outcome = refence_migration(
        open_store(uri, storage_options), owner or omnigraph.default_actor(), progress or SilentProgress(), executor, parallel
    )
    return Migrated.from_document(outcome.to_json())


def status(uri: str, *, tail: int | None = None, storage_options: Mapping[str, str] | None = None) -> Status:
    """The stamp, the claim holder, the latest migration's ledger and the command to run next (read-only).

    The claim holder comes with every process acting for it; the ledger with its last ``tail``
    records, or all.

    Raises:
        NotFound: no graph at ``uri``.
        LedgerCorrupt: a ledger record cannot be read.
    """
    from omnigraph.migrator.status import status as migration_status

    document, _ = migration_status(open_store(uri, storage_options), tail)
    return Status.from_document(document)


def claim_refusal(uri: str, program: str = omnigraph.ENGINE, *, storage_options: Mapping[str, str] | None = None) -> ClaimHeld | None:
    """The ``claim_held`` a read-write open of ``uri`` by ``program`` meets now, naming the command that releases the claim.

    The command is the one ``status`` prints (``cutover``, ``resume`` or ``abort`` with the
    claim's token, or waiting while a process acting for it is alive), so it is for the operator's
    own tools (the CLI), not for a client of a server. None when no claim bars that open now.
    """
    from omnigraph._handles import program_profile
    from omnigraph.engine.access.permission import Ground, current_permission
    from omnigraph.engine.manifest.manifest import Manifest
    from omnigraph.migrator.status import next_step

    store = open_store(uri, storage_options)
    permission = current_permission(Manifest(store), program_profile(program))
    if permission.ground is not Ground.CLAIM_HELD:
        return None
    return permission.claim_refusal(store.uri, next_step(store))


def ledger_table(shown: Status) -> str:
    """The human table of the ledger records ``shown`` holds, as ``omnigraph-migrate status`` prints it.

    Rows are ``seq | at | kind | summary``, then one line of state; empty without a ledger.
    """
    from omnigraph.ledger.fold import FoldedState
    from omnigraph.ledger.ledger import LedgerReplay
    from omnigraph.ledger.records import RECORD_ADAPTER
    from omnigraph.ledger.render import render_table

    if shown.ledger is None:
        return ""
    document = shown.to_dict()["ledger"]
    records = [(int(record.pop("seq")), RECORD_ADAPTER.validate_python(record)) for record in document["records"]]
    return render_table(LedgerReplay(records=records, state=FoldedState.model_validate(document["state"])))


def verify(uri: str, *, storage_options: Mapping[str, str] | None = None, queries: AnswerQueries | None = None) -> Verification:
    """Check every live table on every branch has the primary key ``[id]`` and nothing is unpublished (read-only).

    With ``queries``, also check that they answer as when the migration that stamped the graph
    recorded them.

    Raises:
        AnswersChanged: with ``queries``, an answer differs from the recorded one.
        PreconditionFailed: with ``queries``, that migration recorded no answers, or other queries.
        NotFound: no graph at ``uri``.
        ClaimHeld: the migration claim is still held (the details name the next command).
        DriftDetected: the graph is not fully fenced (the problems are listed).
    """
    from omnigraph.migrator.verify import verify as verify_fencing

    return Verification.from_document(verify_fencing(open_store(uri, storage_options), queries))


def duplicates(uri: str, *, progress: Progress | None = None, storage_options: Mapping[str, str] | None = None) -> Duplicates:
    """Every duplicate or null id of every pinned image (read-only, takes no claim).

    An empty inventory means the ids are ready for their primary keys.

    Raises:
        NotFound: no graph at ``uri``.
    """
    from omnigraph.migrator.inspection import duplicates as scan_ids

    return Duplicates.from_document(scan_ids(open_store(uri, storage_options), progress or SilentProgress()))


def inventory_lines(inventory: Sequence[Mapping[str, Any]]) -> list[str]:
    """One tab-separated line per inventory entry, as ``omnigraph-migrate duplicates`` prints them.

    The fields are kind, type, id, problem, rows, branches and image.
    """
    from omnigraph.ledger.records import InventoryEntry
    from omnigraph.migrator.plan import inventory_lines as lines_of

    return lines_of([InventoryEntry.model_validate(dict(entry)) for entry in inventory])


def describe_fleet_entry(entry: Mapping[str, Any]) -> str:
    """One line naming a fleet record of :attr:`Preflight.fleet`.

    It gives program, role, format, host, pid, address, start, heartbeat age and status.
    """
    from omnigraph.migrator.inspection import describe

    return describe(dict(entry))


def open_executor(name: str, ray_address: str | None = None) -> AbstractContextManager[ImageExecutor]:
    """The image executor ``name`` (one of :data:`EXECUTORS`), started for the block.

    ``ray`` runs on the cluster at ``ray_address`` (``HOST:PORT`` or ``auto``), else on a private
    local instance. Check :func:`executor_unavailable` and :func:`ray_address_problem` first.

    Raises:
        ExecutorFailed: the executor could not start.
    """
    from omnigraph.migrator.executors import open_executor as start_executor

    return start_executor(name, ray_address)


def copy(source: str, destination: str, *, storage_options: Mapping[str, str] | None = None) -> Copied:
    """Copy a graph root (every branch and version) to an empty ``destination``, for rehearsals.

    ``source`` is only read. Branches of the copy keep reading their inherited data files from
    ``source`` (Lance records the root's URI), so the copy is not a backup.

    Raises:
        BadRequest: ``destination`` is not empty.
        NotFound: no such bucket.
    """
    copied = copy_root(open_store(source, storage_options), open_store(destination, storage_options))
    return Copied(source=source, destination=destination, objects=len(copied), bytes=sum(size for _, size in copied))


def rebuild(
    uri: str,
    destination: str,
    *,
    actor: str | None = None,
    report: Callable[[str], None] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> Rebuilt:
    """Copy the graph's current data, every branch, into a new format-5 graph at ``destination`` by export and load.

    Not in place, and without history (``docs/operations.md``, "rebuild"). ``report`` is told each
    branch as it is exported and loaded.

    Raises:
        NotFound: no graph at ``uri``.
        BadRequest: ``destination`` is not empty.
        FormatRefused: a migration holds the barrier of the graph.
    """
    from omnigraph.migrator.rebuild import rebuild_graph

    outcome = rebuild_graph(
        open_store(uri, storage_options), open_store(destination, storage_options), actor or omnigraph.default_actor(), report
    )
    return Rebuilt.from_document({**outcome.to_json(), "source": uri, "destination": destination})  # the roots as given


def __getattr__(name: str) -> Any:
    """:class:`AnswerQueries`, :class:`ImageExecutor` and :class:`RepairDecisions`, imported on first access.

    They are defined in :mod:`omnigraph.migrator.verify`, :mod:`omnigraph.migrator.executors` and
    :mod:`omnigraph.migrator.repair` (as ``DecisionsFile``).
    """
    if name == "AnswerQueries":
        from omnigraph.migrator.verify import AnswerQueries

        globals()[name] = AnswerQueries
        return AnswerQueries
    if name == "ImageExecutor":
        from omnigraph.migrator.executors import ImageExecutor

        globals()[name] = ImageExecutor
        return ImageExecutor
    if name == "RepairDecisions":
        from omnigraph.migrator.repair import DecisionsFile

        globals()[name] = DecisionsFile
        return DecisionsFile
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names, the lazy ones included."""
    return sorted(set(globals()) | set(__all__))
