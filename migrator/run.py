"""The protocol that carries a migration behind its barrier to stamp 5, and the commands ``refence`` and ``resume``.

``run``, ``prepare`` and ``cutover`` are in :mod:`omnigraph.migrator.online`; every command ends in
:func:`drive`. ``refence`` (:func:`refence_migration`) fences a stamp-5 graph again after a
format-4 writer published to it. ``resume --token`` (:func:`resume_migration`) continues the same
migration from its ledger: completed units are skipped and the others continue step by step (see
:mod:`omnigraph.migrator.unit`). Given answer queries (:mod:`omnigraph.migrator.verify`) a command
binds them against the catalog before anything is written, and the driver records and re-checks
their answers.

The protocol (DESIGN section 7, steps 3 to 7): :func:`drive` continues a
:class:`~omnigraph.migrator.claim.Migration` from whatever its ledger says is done. It relies on
the migration's receipts only with the schema they were taken with: a ``_schema.pg`` changed since
is refused before anything is written (:mod:`omnigraph.migrator.schema_receipt`). At stamp 4 it
first takes the answer check's answers (when queries are given), then raises the barrier (stamp
``migrating``). Until a unit progresses it brings the plan up to date (:func:`_absorb`): it waits
for the commits of live writers (:func:`_drain`), resolves those of dead ones, adopts out-of-band
commits that change no row, plans, and validates every image its receipts do not cover
(:mod:`omnigraph.migrator.receipts`: from the rows changed since a receipt where it can), again
while branch heads move, at most :data:`ABSORB_ROUNDS` times; a fencing migration that cannot
settle puts stamp 4 back (``barrier_lowered``, ``cutover_deferred``). Then the answer check's
baseline (:func:`omnigraph.migrator.verify.baseline_answers`: the answers taken before the barrier
for branches that did not move, the others queried again), every unit not yet completed
(:mod:`omnigraph.migrator.unit`, several at once), verification against the ledger (a commit that
landed after the units started cannot be absorbed: a fencing migration aborts itself, stamp 4
again), the recorded answers taken again (``answers_changed`` on any difference), stamp ``5``
last, the key indexes of every branch (:func:`index_keys_at_stamp_5`), then the release of the
claim (:func:`release_claim`). Every step is a ledger record, so a
crash anywhere is continued by ``resume --token``.

A validation failure records the full inventory and raises ``validation_failed`` before any PK
effect, leaving the barrier up and the claim held: the graph stays closed to every writer while
the operator repairs the duplicates under the claim, then resumes (planning and validating
afresh) or aborts. Images validated whole go to the migration's executor
(:mod:`omnigraph.migrator.executors`): the records, results and exit codes are the same on any
executor.

Failpoints: ``refence.after_barrier``, ``migrate.before_barrier``, ``migrate.after_barrier``,
``migrate.after_plan``, ``migrate.after_image_records``, ``migrate.after_validate``,
``migrate.after_answers``, ``migrate.after_units``, ``migrate.before_stamp``,
``migrate.after_stamp``, ``migrate.before_release``, ``migrate.after_release``,
``cutover.after_lower``, and those of :mod:`omnigraph.migrator.claim` and
:mod:`omnigraph.migrator.unit` (``migrate.after_claim`` is :mod:`omnigraph.migrator.online`'s).
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from omnigraph.claims.acting import acting_for
from omnigraph.claims.claim import inspect, release
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import FormatRefused, NotFound, PreconditionFailed, ValidationFailed
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.graph import open_graph
from omnigraph.engine.maintenance.optimize import index_keys
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.progress import Progress
from omnigraph.engine.reconcile import recovery
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5, FORMAT_MIGRATING
from omnigraph.engine.storage.store import GraphStore
from omnigraph.ledger.ledger import LedgerReplay
from omnigraph.ledger.records import (
    AnswerDigest,
    AnswersChecked,
    AnswersRecorded,
    BarrierLowered,
    BarrierSet,
    ClaimReleased,
    PlanRecorded,
    Resumed,
    StampWritten,
    UnitsStarted,
    UnitStep,
    ValidationFailedRecord,
    Verified,
)
from omnigraph.ledger.records import DriftDetected as DriftRecord
from omnigraph.migrator import layout
from omnigraph.migrator.claim import Migration, abort_held, attach, begin, replay_started
from omnigraph.migrator.errors import CutoverDeferred, DriftDetected
from omnigraph.migrator.executors import ImageExecutor, default_parallel
from omnigraph.migrator.inspection import (
    held_claim,
    refuse_broken,
    refuse_unless_refence_needed,
)
from omnigraph.migrator.layout import CLAIM_PATH
from omnigraph.migrator.plan import (
    MigrationPlan,
    adopt_before_plan,
    build_plan,
    inventory,
)
from omnigraph.migrator.receipts import validate_plan_images
from omnigraph.migrator.schema_receipt import refuse_schema_changed
from omnigraph.migrator.unit import run_units
from omnigraph.migrator.verify import (
    AnswerQueries,
    answer_cases,
    answers_changed,
    baseline_answers,
    check_queries,
    compare_answers,
    migration_drift,
    recorded_queries,
    refuse_other_queries,
    requested_queries,
    structural_problems,
    take_answers,
)


@dataclass(frozen=True)
class MigrationOutcome:
    """A migration that reached stamp 5 and released its claim."""

    migration_id: str
    token: str
    units: int
    images: int
    stamp: str
    answers: tuple[AnswerDigest, ...] = ()
    """The answers the stamp was checked against (empty without an answer check)."""
    outage_seconds: float | None = None
    """Seconds the barrier was up (:attr:`omnigraph.ledger.fold.FoldedState.outage_seconds`)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON document of a finished migration, with one answer-check case per answer."""
        return {
            "status": "migrated",
            "migration_id": self.migration_id,
            "token": self.token,
            "units": self.units,
            "images": self.images,
            "stamp": self.stamp,
            "answer_check": answer_cases(list(self.answers), []),
            "outage_seconds": self.outage_seconds,
        }


def drive(
    m: Migration, queries: AnswerQueries | None = None, parallel: int | None = None, drain_seconds: float | None = None
) -> MigrationOutcome:
    """Continue ``m`` from its ledger to stamp 5 and the release of its claim (module docstring).

    Refused first, with nothing written, if ``_schema.pg`` is not the schema the migration's
    receipts were taken with (``SchemaChanged``, :mod:`omnigraph.migrator.schema_receipt`). The
    graph must be at stamp 4 (the barrier is raised) or ``migrating``; any other stamp is
    ``format_refused``. ``queries`` are the answer check's: refused (``precondition_failed``,
    before any effect) if the migration recorded, or was started with, other queries, or if
    units already progressed without a baseline. The check the migration was started with, or
    whose answers it recorded, is taken whether or not ``queries`` are given. ``parallel`` units
    (of distinct graph branches) are in flight at once (:mod:`omnigraph.migrator.unit`; default
    :func:`~omnigraph.migrator.executors.default_parallel` for the store).

    Until a unit progresses, the plan is brought up to date first (:func:`_absorb`): commits that
    landed since the last plan are validated from the rows they changed, for a bounded number of
    rounds; a fencing migration that cannot settle lowers the barrier again (``cutover_deferred``).
    ``drain_seconds`` bounds each wait for live writers' commits (default :data:`DRAIN_SECONDS`).
    """
    refuse_schema_changed(m)
    queries = _answer_queries(m, queries)
    before = _answers_before_the_barrier(m, queries)
    failpoint("migrate.before_barrier")
    _raise_barrier(m)
    replay = m.ledger.replay()
    plan = recorded_plan(replay)
    if plan is None or not _units_progressed(m, replay):
        plan = _absorb(m, plan, DRAIN_SECONDS if drain_seconds is None else drain_seconds)
    else:
        _validate(m, plan, replay)
    failpoint("migrate.after_validate")
    if queries is not None and m.ledger.replay().state.answers_sha256 is None:
        answers, requeried = baseline_answers(open_graph(m.store, FENCED_PROFILE, write=False), queries, before)
        m.record(
            AnswersRecorded,
            source=queries.source,
            params=queries.params_json,
            queries_sha256=queries.sha256,
            answers=answers,
            requeried=requeried,
        )
        failpoint("migrate.after_answers")
    replay = m.ledger.replay()
    images = dict(replay.state.images)
    identifiers = _fork_identifiers(replay)
    pending = [u for u in plan.units if replay.state.units[u.unit_id].status != "completed"]
    if pending and replay.state.phase != "installing":
        m.record(UnitsStarted)
    m.progress.start("migrating units", len(plan.units))
    m.progress.advance(len(plan.units) - len(pending))
    try:
        run_units(m, pending, images, identifiers, parallel or default_parallel(m.store))
    except DriftDetected as late:  # a unit found its table moved: a commit that landed after the plan stood
        _stop_for_late_commits(m, late.message, late.details)
    m.progress.finish()
    failpoint("migrate.after_units")
    _verify_then_stamp(m)
    replay = m.ledger.replay()
    return MigrationOutcome(
        m.migration_id, m.token, len(plan.units), len(plan.images()), FORMAT_5, tuple(replay.state.answers), replay.state.outage_seconds
    )


ABSORB_ROUNDS = 5
"""Plans a cutover makes at most before it gives up on writers that keep committing under the barrier."""
DRAIN_SECONDS = 10.0
"""How long a cutover waits, under the barrier, for the commits of live writers to end."""


def _units_progressed(m: Migration, replay: LedgerReplay) -> bool:
    """True once any unit left ``planned`` or left a sidecar: the plan can no longer be replaced."""
    return any(unit.status != "planned" for unit in replay.state.units.values()) or bool(layout.remaining(m.store, m.migration_id))


def _absorb(m: Migration, recorded: MigrationPlan | None, drain_seconds: float) -> MigrationPlan:
    """Bring the plan up to date under the barrier and validate what it pins; the plan validated.

    Each round waits for the commits of live writers to end (:func:`_drain`; those of dead writers
    are resolved), adopts out-of-band commits that change no row, plans, records the plan if it
    differs from the last one, and validates every image its receipts do not cover (from the rows
    changed since a receipt where it can). If no branch head moved meanwhile, the plan stands.
    After :data:`ABSORB_ROUNDS` rounds, or a drain that does not end, a fencing migration lowers
    the barrier (:func:`_lower_barrier`); a refence stops with ``drift_detected``.
    """
    for round_number in range(1, ABSORB_ROUNDS + 1):
        waiting = _drain(m, drain_seconds)
        if waiting:
            _give_up(
                m,
                f"{len(waiting)} commit(s) of live writers did not end within {drain_seconds:g}s under the barrier: {', '.join(waiting)}",
                f"; a writer that is hung must be stopped first, and `omnigraph recover {m.store.uri}` then resolves its commit",
            )
        recovery.resolve_intents(m.store, m.manifest)
        try:
            adopt_before_plan(m.store, m.manifest, m.migration_id, m.token)
        except DriftDetected as drifted:
            _give_up(m, drifted.message)
        plan = build_plan(m.manifest)
        if recorded is None or plan != recorded or m.ledger.replay().state.phase in ("barrier", "validation_failed"):
            m.record(PlanRecorded, branches=plan.branches, units=plan.units)
            failpoint("migrate.after_plan")
        recorded = plan
        _validate(m, plan, m.ledger.replay())
        moved = [b.head_commit_id for b in build_plan(m.manifest).branches] != [b.head_commit_id for b in plan.branches]
        if not moved and not _live_commits(m):
            return plan
        if round_number == ABSORB_ROUNDS:
            break
    _give_up(m, f"branch heads kept moving under the barrier for {ABSORB_ROUNDS} rounds (a writer that does not read the stamp)")


def _live_commits(m: Migration) -> list[str]:
    """The armed commits of live writers, each as ``operation id (program on host, pid N)``."""
    return [
        f"{i.operation_id} ({i.program} on {i.host}, pid {i.pid})"
        for i in recovery.list_intents(m.store)
        if recovery.owner_is_alive(m.store, i)
    ]


def _drain(m: Migration, seconds: float) -> list[str]:
    """Wait up to ``seconds`` for every armed commit of a live writer to end; the ones still armed."""
    deadline = time.monotonic() + seconds
    while True:
        live = _live_commits(m)
        if not live or time.monotonic() >= deadline:
            return live
        time.sleep(0.05)


def _give_up(m: Migration, reason: str, also: str = "") -> NoReturn:
    """Lower the barrier of a fencing migration for ``reason`` (``cutover_deferred``); a refence stops (``drift_detected``).

    ``also`` is advice that follows the command to run next.
    """
    if _barrier_raised_at(m) != FORMAT_4:
        raise DriftDetected(
            f"{reason}; the stamp was not written. Stop every writer, then `omnigraph-migrate resume {m.store.uri} --token {m.token}`"
            f"{also}",
            {"reason": reason},
        )
    _lower_barrier(m, reason)
    raise CutoverDeferred(
        f"{reason}. The barrier was lowered again: the graph is at stamp 4 and writable, and the receipts are kept. "
        f"Run `omnigraph-migrate cutover {m.store.uri} --token {m.token}` again{also}",
        {"reason": reason, "migration_id": m.migration_id, "token": m.token},
    )


def _stop_for_late_commits(m: Migration, moved: str, details: dict[str, Any]) -> NoReturn:
    """Stop a migration whose graph moved after its units started, with ``drift_detected``; the stamp is not written.

    The plan can no longer absorb it. A fencing migration lowers the barrier by aborting (stamp 4,
    writers go on, installed keys stay) and names ``run`` again; a refence keeps the barrier and
    names ``abort``.
    """
    if _barrier_raised_at(m) == FORMAT_4:
        abort_held(m, f"a writer committed under the barrier after the units started: {moved}")
        raise DriftDetected(
            "a commit landed under the barrier after the primary keys were being installed (a format-4 writer "
            "that does not read the stamp); the format-5 stamp was NOT written and the migration was aborted: the "
            "graph is at stamp 4 and writable again (installed primary keys stay). Run "
            f"`omnigraph-migrate run {m.store.uri}` again once that writer is stopped or restarted. {moved}",
            details,
        )
    raise DriftDetected(
        "a change under the migration barrier; the format-5 stamp was NOT written. A writer was not stopped. "
        f"Stop every writer, `omnigraph-migrate abort {m.store.uri} --token {m.token}`, then run the migration again. {moved}",
        details,
    )


def _barrier_raised_at(m: Migration) -> str:
    """The stamp the migration's last barrier replaced: ``4`` for a fencing migration, ``5`` for a refence."""
    records = m.ledger.replay().records
    return next((r.previous_format for _, r in reversed(records) if isinstance(r, BarrierSet)), FORMAT_4)


def _lower_barrier(m: Migration, reason: str) -> None:
    """Put stamp 4 back before any unit progressed, recording ``barrier_lowered``; the claim stays."""
    m.require_claim()
    m.manifest.write_stamp(FORMAT_4, None)
    m.record(BarrierLowered, reason=reason)
    failpoint("cutover.after_lower")


def release_claim(m: Migration) -> None:
    """Record ``claim_released`` (once) and release the claim if it is still there."""
    state = m.ledger.replay().state
    if not state.claim_released:
        m.record(ClaimReleased)
    failpoint("migrate.before_release")
    if inspect(m.store, CLAIM_PATH) is not None:
        release(m.store, CLAIM_PATH, m.token)
    failpoint("migrate.after_release")


def _answer_queries(m: Migration, given: AnswerQueries | None) -> AnswerQueries | None:
    """The answer check :func:`drive` takes: the queries the migration recorded or was started with, else ``given``.

    Makes the refusals of :func:`drive`. Reads the ledger only.
    """
    replay = m.ledger.replay()
    known = requested_queries(replay)
    resume = f"omnigraph-migrate resume {m.store.uri} --token {m.token}"
    refuse_other_queries(given, known.sha256 if known else None, f", or run `{resume}` without them: it checks the recorded queries")
    progressed = any(unit.status != "planned" for unit in replay.state.units.values())
    if known is None and given is not None and (progressed or layout.remaining(m.store, m.migration_id)):
        raise PreconditionFailed(
            "this migration installed primary keys without an answer check, and the check's baseline "
            f"must be taken before the first one; run `{resume}` without --queries",
            {"migration_id": m.migration_id},
        )
    return known or given


def _answers_before_the_barrier(m: Migration, queries: AnswerQueries | None) -> list[AnswerDigest] | None:
    """The answer check's answers on every branch, taken while the graph is still at stamp 4 (None if it is not, or nothing to take).

    Behind the barrier only the branches whose heads moved since are queried again
    (:func:`~omnigraph.migrator.verify.baseline_answers`), so the baseline adds little to the outage.
    """
    if queries is None or m.ledger.replay().state.answers_sha256 is not None or m.manifest.read_stamp()[0] != FORMAT_4:
        return None
    return take_answers(open_graph(m.store, FENCED_PROFILE, write=False), queries)


def _raise_barrier(m: Migration) -> None:
    stamp, _ = m.manifest.read_stamp()
    if stamp == FORMAT_4:
        m.manifest.write_stamp(FORMAT_MIGRATING, m.migration_id)
        m.record(BarrierSet, previous_format=FORMAT_4)
        failpoint("migrate.after_barrier")
    elif stamp != FORMAT_MIGRATING:
        raise FormatRefused(f"unexpected format stamp {stamp!r} under the migration claim", {"stamp": stamp})


def recorded_plan(replay: LedgerReplay) -> MigrationPlan | None:
    """The plan the ledger recorded last, or None before any."""
    state = replay.state
    return MigrationPlan(list(state.branches), list(state.plan)) if state.plan else None


def _validate(m: Migration, plan: MigrationPlan, replay: LedgerReplay) -> None:
    """Validate the images of ``plan`` its receipts do not cover (:mod:`omnigraph.migrator.receipts`).

    ``validation_failed`` with the inventory if any is broken.
    """
    reports, _ = validate_plan_images(m, plan, replay)
    failpoint("migrate.after_image_records")
    broken = inventory(plan, reports)
    if broken:
        m.record(ValidationFailedRecord, inventory=broken)
        raise ValidationFailed(
            f"{len(broken)} duplicate or null id(s) found; no primary key was installed. The barrier "
            f"stays up (the graph is closed to writers). Repair them under the claim "
            f"(`omnigraph-migrate playbook run duplicate-repair {m.store.uri}`) and "
            f"`omnigraph-migrate resume {m.store.uri} --token {m.token}`, or "
            f"`omnigraph-migrate abort {m.store.uri} --token {m.token}`.",
            {
                "migration_id": m.migration_id,
                "token": m.token,
                "inventory": [entry.model_dump(mode="json") for entry in broken],
            },
        )


def _fork_identifiers(replay: LedgerReplay) -> dict[str, str]:
    """The identifier of every fork the ledger recorded, by unit id."""
    identifiers: dict[str, str] = {}
    for _, record in replay.records:
        if isinstance(record, UnitStep) and record.step in ("fork_created", "fork_adopted"):
            identifiers[record.unit_id] = record.detail.removeprefix("identifier=")
    return identifiers


def _verify_then_stamp(m: Migration) -> None:
    """Verify the graph, then write stamp 5 with the current heads and release the claim.

    ``drift_detected`` (stamp not written) if the graph moved from what the ledger says or is not
    structurally fenced.
    """
    m.require_claim()
    state = m.ledger.replay().state
    drift = migration_drift(m.store, m.manifest, state)
    if drift:
        m.record(DriftRecord, moved=drift)
        m.record(Verified, ok=False, problems=[f"{d.what}: expected {d.expected}, found {d.actual}" for d in drift])
        moved = "; ".join(f"{d.what}: expected {d.expected}, found {d.actual}" for d in drift)
        _stop_for_late_commits(m, moved, {"moved": [d.model_dump(mode="json") for d in drift], "migration_id": m.migration_id})
    problems = structural_problems(m.store, m.manifest)
    m.record(Verified, ok=not problems, problems=problems)
    if problems:
        raise DriftDetected(
            "verification failed; the format-5 stamp was NOT written: " + "; ".join(problems),
            {"problems": problems, "migration_id": m.migration_id},
        )
    _check_answers(m)
    failpoint("migrate.before_stamp")
    # The heads verified, not the heads now: a commit that lands after the verification is not fenced,
    # and the writer audit finds it after the stamp (``refence``).
    m.manifest.write_stamp(FORMAT_5, None, {branch.graph_branch: branch.head_commit_id for branch in state.branches})
    m.record(StampWritten, format=FORMAT_5)
    failpoint("migrate.after_stamp")
    index_keys_at_stamp_5(m)
    release_claim(m)


def index_keys_at_stamp_5(m: Migration) -> None:
    """The last step before the claim's release: the key indexes of every branch's owned tables.

    A BTREE on ``id`` of every table and on ``src``/``dst`` of every edge table, built where
    missing and refreshed where rows are not covered
    (:func:`omnigraph.engine.maintenance.optimize.index_keys`), each branch's published as one
    graph commit by the engine acting under the claim. It looks at what is already true, so a
    ``resume`` after a crash here (at stamp 5, claim held) runs it again and completes it; the
    read-write open first adopts the index commits a crashed run left unpublished.
    """
    graph = open_graph(m.store, FENCED_PROFILE, write=True, claim_token=m.token)
    index_keys(graph, actor=f"omnigraph-migrate {m.migration_id}", progress=m.progress)


def _check_answers(m: Migration) -> None:
    """Take the recorded answers again (if any were recorded).

    ``answers_changed`` on any difference, after recording it. The barrier stays up and the claim
    held.
    """
    replay = m.ledger.replay()
    queries = recorded_queries(replay)
    if queries is None:
        return
    recorded = list(replay.state.answers)
    changed = compare_answers(open_graph(m.store, FENCED_PROFILE, write=False), queries, recorded)
    m.record(AnswersChecked, ok=not changed, changed=changed)
    if changed:
        raise answers_changed(
            f"{len(changed)} of {len(recorded)} answer(s) of the answer check changed under the barrier",
            "The format-5 stamp was NOT written and the barrier stays up (the graph is closed to writers). "
            "Nothing the migration does changes a row: find what did, then "
            f"`omnigraph-migrate abort {m.store.uri} --token {m.token}` puts stamp 4 back",
            recorded,
            changed,
            migration_id=m.migration_id,
            token=m.token,
        )


def refence_migration(
    store: GraphStore, owner: str, progress: Progress, executor: ImageExecutor | None = None, parallel: int | None = None
) -> MigrationOutcome:
    """Fence again a stamp-5 graph that a format-4 writer published to after the stamp.

    Needs stamp 5 and a readiness problem (:func:`omnigraph.engine.access.writer_audit.readiness_problems`: a
    format-4 head after the stamp, or a pinned image without PK ``[id]``), no claim and no commit
    in flight by a live process on this host. It then runs the whole migration protocol again
    under a new claim: barrier (stamp ``migrating``, ``barrier_set`` with previous format 5),
    interrupted commits of dead writers resolved, plan, validation of every image (a duplicate
    the old writer let in stops it at ``validation_failed``, repaired like any other), PK
    installed where missing, verify, and stamp 5 recording the current heads as fenced. A crash
    is resumed with ``resume --token``; ``abort --token`` puts stamp 4 back, as for any migration.
    ``executor`` and ``parallel`` as for :func:`omnigraph.migrator.online.run_migration`.
    """
    manifest = Manifest.of_graph(store)
    refuse_unless_refence_needed(store, manifest, owner)
    with begin(store, owner, progress, executor) as m:
        m.manifest.write_stamp(FORMAT_MIGRATING, m.migration_id)
        m.record(BarrierSet, previous_format=FORMAT_5)
        failpoint("refence.after_barrier")
        recovery.resolve_intents(store, m.manifest)
        return drive(m, parallel=parallel)


def resume_migration(
    store: GraphStore,
    token: str,
    owner: str,
    progress: Progress,
    executor: ImageExecutor | None = None,
    queries: AnswerQueries | None = None,
    parallel: int | None = None,
    drain_seconds: float | None = None,
) -> MigrationOutcome:
    """Continue the migration whose claim carries ``token`` from its ledger.

    ``executor`` validates the images not yet found clean (started only if there is one). A claim
    broken with ``token`` is not resumed (its holder's claim is gone for good): the refusal names
    ``abort --token``, which lowers the barrier it left. An aborted migration is not resumed
    either. Before stamp 5, a migration whose ``_schema.pg`` changed since its receipts were taken
    is refused with nothing written (``SchemaChanged``, naming ``abort --token``, or ``prepare
    --token`` at stamp 4). Refused (``claim_held``) while a process recorded as acting for the
    claim (its creator, or an earlier resume, abort or repair that has not ended) is alive on this
    host; this process is recorded as acting for it before anything else
    (:mod:`omnigraph.claims.acting`), and ``resumed`` names it (``owner``) in the ledger. At stamp 5 (the holder died after the stamp) it
    only records the stamp and releases the claim. Answers recorded by the migration are checked
    before the stamp whether or not ``queries`` are given; given, they must be the recorded ones
    (see :func:`drive`); ``parallel`` as for :func:`omnigraph.migrator.online.run_migration`;
    ``drain_seconds`` bounds each wait for live writers' commits (:func:`drive`).
    """
    refuse_broken(store, token)
    claim = held_claim(store, token)
    m = attach(store, claim, progress, executor)
    refuse_aborted(m)
    if m.manifest.read_stamp()[0] != FORMAT_5:  # at stamp 5 it only releases the claim
        refuse_schema_changed(m)
    if queries is not None:
        check_queries(open_graph(store, FENCED_PROFILE, write=False), queries)
    with acting_for(store, CLAIM_PATH, claim, action="resume", owner=owner):
        return _resume(m, owner, queries, parallel, drain_seconds)


def refuse_aborted(m: Migration) -> None:
    """``precondition_failed`` if the migration's ledger says it was aborted.

    Reads only: a ledger that cannot be read is refused here, before anything is written.
    """
    try:
        aborted = m.ledger.replay().state.aborted
    except NotFound:
        return  # its holder died before the first record: nothing was aborted
    if aborted:
        raise PreconditionFailed(
            f"migration {m.migration_id} was aborted; finish the abort with "
            f"`omnigraph-migrate abort {m.store.uri} --token {m.token}`, then start a new run",
            {"expected": "a migration that was not aborted", "actual": "aborted"},
        )


def _resume(m: Migration, owner: str, queries: AnswerQueries | None, parallel: int | None, drain_seconds: float | None) -> MigrationOutcome:
    """The body of :func:`resume_migration`, acting for the claim."""
    token = m.token
    state = replay_started(m, m.claim, queries.check() if queries else None).state
    m.record(Resumed, owner=owner, host=socket.gethostname(), pid=os.getpid())
    stamp, _ = m.manifest.read_stamp()
    if stamp == FORMAT_5:
        if not state.stamp_written:
            m.record(StampWritten, format=FORMAT_5)
        index_keys_at_stamp_5(m)
        release_claim(m)
        replay = m.ledger.replay()
        return MigrationOutcome(
            m.migration_id,
            token,
            len(replay.state.plan),
            len(replay.state.images),
            FORMAT_5,
            tuple(replay.state.answers),
            replay.state.outage_seconds,
        )
    return drive(m, queries, parallel, drain_seconds)
