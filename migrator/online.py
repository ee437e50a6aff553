"""The online upgrade: ``prepare`` while writers go on, ``cutover`` under a short barrier, and ``run`` as both.

``prepare`` (:func:`prepare_migration`, stamp stays ``4``): a new migration takes an *online*
claim (it bars other migrations, not the graph's format-4 writers), or the migration whose online
claim carries ``--token`` goes on. One round plans every unit of every live branch, validates every
pinned image its receipts do not cover (:mod:`omnigraph.migrator.receipts`: an image whose receipt
holds is skipped, one that moved is validated from the rows changed since its receipt, any other
whole), records ``prepared`` with the predicted cutover (:class:`CutoverEstimate`) and exits with
the claim still held. Each round first records the schema identity (``_schema.pg``) its receipts
are taken with; a round that finds the schema changed since the earlier receipts takes them all
again (:mod:`omnigraph.migrator.schema_receipt`). Duplicate or null ids are reported with the
inventory (``validation_failed``, exit 4) while the graph is still at stamp ``4`` and writable:
before any outage.

``cutover --token`` (:func:`cutover_migration`): refused (``SchemaChanged``, a
``migration_refused``, nothing written) when ``_schema.pg`` changed since the receipts were taken,
naming ``prepare --token``; refused (``cutover_deferred``, nothing written) when the predicted
outage exceeds ``max_outage``; otherwise the migration is driven from its ledger
(:func:`omnigraph.migrator.run.drive`): barrier, commits of live writers drained (waiting
at most ``max_outage`` for them; a writer still committing then lowers the barrier again) and the
plan brought up to date (only what moved since the receipts is validated), units, verification,
stamp ``5``, release. The outage is the time from the last ``barrier_set`` to ``claim_released``
(``outage_seconds`` of the ledger's state, :class:`omnigraph.ledger.fold.FoldedState`).

``run`` (:func:`run_migration`): the preconditions of a migration, an online claim, prepare rounds
until what a cutover would validate is at most :data:`CATCH_UP_ROWS` rows and its estimate within
the outage bound (at most :data:`PREPARE_ROUNDS` rounds), then the cutover; ``run`` refuses by the
estimate only when given a bound.

The estimate (:func:`estimate`) is a model, not a promise: a fixed cost for the barrier, the
drain, the plan and the stamp; a cost per unit, ``parallel`` units at a time; the rows to read
from receipts at :data:`DELTA_ROWS_PER_SECOND` and the rows of images without a receipt at
:data:`WHOLE_ROWS_PER_SECOND`. Costs are per store kind (local or object store); the figures come
from ``bench/outage_bench.py`` on a developer machine.

Failpoints: ``migrate.after_claim`` (``run``), ``prepare.after_claim``, ``prepare.after_plan``,
``prepare.after_receipts``, ``prepare.after_round``, and those of :func:`~omnigraph.migrator.run.drive`.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import socket
from dataclasses import dataclass
from typing import Any

from omnigraph.claims.acting import acting_for
from omnigraph.claims.claim import inspect
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import NotFound, PreconditionFailed, ValidationFailed
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.graph import open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.progress import Progress, SilentProgress
from omnigraph.engine.storage.names import FORMAT_4
from omnigraph.engine.storage.store import GraphStore
from omnigraph.ledger.records import PlanRecorded, Prepared, Resumed, ValidationFailedRecord
from omnigraph.migrator.claim import Migration, attach, begin, replay_started
from omnigraph.migrator.errors import CutoverDeferred
from omnigraph.migrator.executors import ImageExecutor, default_parallel
from omnigraph.migrator.inspection import (
    held_claim,
    refuse_broken,
    refuse_live_writers,
    refuse_settled_row_drift,
    refuse_unless_stamp_4,
)
from omnigraph.migrator.layout import CLAIM_PATH
from omnigraph.migrator.plan import MigrationPlan, build_plan, inventory, pinned_images
from omnigraph.migrator.receipts import ImageStanding, receipts, stand_all, validate_plan_images
from omnigraph.migrator.run import MigrationOutcome, drive, recorded_plan, refuse_aborted, resume_migration
from omnigraph.migrator.schema_receipt import refuse_schema_changed, schema_standing
from omnigraph.migrator.verify import AnswerQueries, UpToDate, already_fenced, check_queries

DEFAULT_MAX_OUTAGE = 5.0
"""The outage bound (seconds) a cutover keeps when none is given."""
CATCH_UP_ROWS = 100_000
"""``run`` prepares again while a cutover would read more rows than this."""
PREPARE_ROUNDS = 5
"""Prepare rounds ``run`` makes at most before its cutover."""
BARRIER_SECONDS = {"local": 0.3, "object_store": 2.0}
"""The fixed part of a cutover: barrier, drain, plan, verification, stamp, release."""
UNIT_SECONDS = {"local": 0.05, "object_store": 0.5}
"""One unit (fork if inherited, primary key, manifest row), ``parallel`` units at a time."""
DELTA_ROWS_PER_SECOND = 500_000
"""Rows a cutover reads per second to validate a moved image from its receipt (ids read, hashed and probed)."""
WHOLE_ROWS_PER_SECOND = 2_000_000
"""Rows a cutover validates per second in an image without a receipt (the whole-image validator)."""


@dataclass(frozen=True)
class CutoverEstimate:
    """What a cutover would do now, and how long the barrier would be up."""

    units: int
    images: int
    changed_rows: int
    """Rows read to validate images that moved since their receipts, from those receipts."""
    unreceived_rows: int
    """Rows of images without a receipt or a base, validated whole."""
    seconds: float
    floor_seconds: float
    """What the cutover would take with every image received: no catch-up brings it lower."""

    def to_json(self) -> dict[str, Any]:
        """The estimate as printed by ``prepare`` and ``cutover``."""
        return {
            "units": self.units,
            "images": self.images,
            "changed_rows": self.changed_rows,
            "unreceived_rows": self.unreceived_rows,
            "estimated_seconds": self.seconds,
            "floor_seconds": self.floor_seconds,
        }


def estimate(store: GraphStore, plan: MigrationPlan, standings: list[ImageStanding], parallel: int | None = None) -> CutoverEstimate:
    """The predicted cutover of ``plan`` whose images stand as ``standings`` (module docstring)."""
    kind = "local" if store.is_local else "object_store"
    workers = max(1, parallel or default_parallel(store))
    changed = sum(s.rows_to_read for s in standings if s.delta is not None)
    whole = sum(s.rows_to_read for s in standings if s.delta is None)
    floor = BARRIER_SECONDS[kind] + math.ceil(len(plan.units) / workers) * UNIT_SECONDS[kind]
    seconds = floor + changed / DELTA_ROWS_PER_SECOND + whole / WHOLE_ROWS_PER_SECOND
    return CutoverEstimate(len(plan.units), len(plan.images()), changed, whole, round(seconds, 3), round(floor, 3))


def current_estimate(m: Migration, parallel: int | None = None) -> CutoverEstimate:
    """The cutover a fresh plan of the graph would need against the migration's receipts (reads only).

    A migration whose holder died before its first ledger record has no receipt yet, and none
    holds once ``_schema.pg`` is not the schema they were taken with.
    """
    plan = build_plan(m.manifest)
    schema = schema_standing(m.store, m.migration_id)
    try:
        found = {} if schema.changed else receipts(m.ledger.replay(), schema.receipts_from)
    except NotFound:
        found = {}
    return estimate(m.store, plan, stand_all(m.store, pinned_images(plan), found), parallel)


def predicted_cutover(store: GraphStore, parallel: int | None = None) -> CutoverEstimate:
    """The cutover a migration of ``store`` would need now (reads only).

    Against the receipts of the migration whose online claim is held, if one is; otherwise as
    right after a prepare, every image received (what ``plan`` prints before any migration).
    """
    holder = inspect(store, CLAIM_PATH)
    if holder is not None and holder.online:
        return current_estimate(attach(store, holder, SilentProgress()), parallel)
    plan = build_plan(Manifest.of_graph(store))
    return estimate(store, plan, [], parallel)


@dataclass(frozen=True)
class PrepareOutcome:
    """A prepare round that left every image it planned with a clean receipt; the claim stays held."""

    migration_id: str
    token: str
    images: int
    validated: int
    """Images validated in this round (the others had a receipt that holds)."""
    changed_rows: int
    """Rows this round read to validate images from their receipts."""
    rounds: int
    cutover: CutoverEstimate

    def to_json(self) -> dict[str, Any]:
        """The JSON document of ``prepare``."""
        return {
            "status": "prepared",
            "migration_id": self.migration_id,
            "token": self.token,
            "images": self.images,
            "validated": self.validated,
            "changed_rows": self.changed_rows,
            "rounds": self.rounds,
            "cutover": self.cutover.to_json(),
        }


def prepare_round(m: Migration, parallel: int | None = None) -> PrepareOutcome:
    """One online round (module docstring); ``validation_failed`` (exit 4) with the inventory if an image is broken."""
    replay = m.ledger.replay()
    plan = build_plan(m.manifest)
    if recorded_plan(replay) != plan:
        m.record(PlanRecorded, branches=plan.branches, units=plan.units)
        failpoint("prepare.after_plan")
    reports, standings = validate_plan_images(m, plan, m.ledger.replay(), retake=True)
    failpoint("prepare.after_receipts")
    broken = inventory(plan, reports)
    if broken:
        m.record(ValidationFailedRecord, inventory=broken)
        raise ValidationFailed(
            f"{len(broken)} duplicate or null id(s) found before any outage; the graph is still at stamp 4 and "
            "writable, and no primary key was installed. Repair them behind the barrier: "
            f"`omnigraph-migrate cutover {m.store.uri} --token {m.token}` stops at them with the barrier up, then "
            f"`omnigraph-migrate playbook run duplicate-repair {m.store.uri}`; or remove them with the format-4 writer "
            f"and run `omnigraph-migrate prepare {m.store.uri} --token {m.token}` again.",
            {"migration_id": m.migration_id, "token": m.token, "inventory": [e.model_dump(mode="json") for e in broken]},
        )
    cutover = current_estimate(m, parallel)
    m.record(
        Prepared,
        images=len(standings),
        validated=len(reports),
        units=cutover.units,
        changed_rows=cutover.changed_rows + cutover.unreceived_rows,
        estimated_cutover_seconds=cutover.seconds,
    )
    failpoint("prepare.after_round")
    rounds = 1 + sum(1 for _, record in replay.records if isinstance(record, Prepared))  # this round's is recorded above
    changed = sum(r.changed_rows or 0 for r in reports.values())
    return PrepareOutcome(m.migration_id, m.token, len(standings), len(reports), changed, rounds, cutover)


def _refuse_unless_online(m: Migration) -> None:
    """``precondition_failed`` unless the graph is at stamp 4 and the claim is an online one (``prepare`` goes on)."""
    stamp, _ = m.manifest.read_stamp()
    if stamp != FORMAT_4 or not m.claim.online:
        raise PreconditionFailed(
            f"migration {m.migration_id} is past its online phase (stamp {stamp}); continue it with "
            f"`omnigraph-migrate resume {m.store.uri} --token {m.token}`",
            {"expected": "stamp 4 under an online claim", "actual": f"stamp {stamp}, online claim: {m.claim.online}"},
        )


def _preconditions(store: GraphStore, manifest: Manifest) -> None:
    """A new migration needs stamp 4, no claim, no intent of a gone writer and no out-of-band commit that changes rows.

    Commits in flight (armed intents of live writers) are left to the cutover's drain, and their
    tables are not judged as drift.
    """
    refuse_unless_stamp_4(store, manifest, live_writers=True)
    refuse_settled_row_drift(store, manifest)


def prepare_migration(
    store: GraphStore,
    owner: str,
    progress: Progress,
    executor: ImageExecutor | None = None,
    token: str | None = None,
    parallel: int | None = None,
) -> PrepareOutcome:
    """One prepare round: of a new migration under an online claim, or of the one whose claim carries ``token``.

    A new one needs stamp 4, no claim and no out-of-band commit that changes rows (writers may go
    on). With ``token`` the graph must still be at stamp 4 under that online claim, and no other
    process may be acting for it (``claim_held``).
    """
    if token is None:
        _preconditions(store, Manifest.of_graph(store))
        with begin(store, owner, progress, executor, online=True) as m:
            failpoint("prepare.after_claim")
            return prepare_round(m, parallel)
    m = _held(store, token, progress, executor)
    with acting_for(store, CLAIM_PATH, m.claim, action="prepare", owner=owner):
        _refuse_unless_online(m)  # read while acting for the claim: no cutover raises the barrier meanwhile
        replay_started(m, m.claim)  # its holder may have died before the first record
        m.record(Resumed, owner=owner, host=socket.gethostname(), pid=os.getpid())
        return prepare_round(m, parallel)


def _held(store: GraphStore, token: str, progress: Progress, executor: ImageExecutor | None) -> Migration:
    """The migration whose claim carries ``token``, neither broken nor aborted."""
    refuse_broken(store, token)
    m = attach(store, held_claim(store, token), progress, executor)
    refuse_aborted(m)
    return m


def _warm_up() -> None:
    """Import what validating changed rows needs (DuckDB) before the barrier rises: the outage does not pay for it."""
    importlib.import_module("duckdb")


def _refuse_over_bound(m: Migration, cutover: CutoverEstimate, max_outage: float) -> None:
    """``cutover_deferred`` (nothing written) if the predicted outage exceeds ``max_outage`` seconds."""
    if cutover.seconds <= max_outage:
        return
    raise_to = f"`omnigraph-migrate cutover {m.store.uri} --token {m.token} --max-outage {math.ceil(cutover.seconds * 1.5)}s`"
    broken = m.ledger.replay().state.phase == "validation_failed"  # a catch-up stops at the same duplicates
    if cutover.floor_seconds <= max_outage and not broken:
        advice = (
            f"Catch up with `omnigraph-migrate prepare {m.store.uri} --token {m.token}` (writers go on), then run the "
            f"cutover again; or raise the bound: {raise_to}"
        )
    else:
        advice = (
            f"No catch-up brings it under the bound ({cutover.units} unit(s) alone take about {cutover.floor_seconds:.1f}s); "
            f"raise the bound: {raise_to}"
        )
    raise CutoverDeferred(
        f"the cutover is estimated at {cutover.seconds:.1f}s of outage ({cutover.units} unit(s), "
        f"{cutover.changed_rows} changed row(s) since the receipts, {cutover.unreceived_rows} row(s) without a receipt), "
        f"over the bound of {max_outage:g}s; the barrier was not raised and nothing was written. {advice}",
        {"estimated_seconds": cutover.seconds, "max_outage_seconds": max_outage, "estimate": cutover.to_json()},
    )


def cutover_migration(
    store: GraphStore,
    token: str,
    owner: str,
    progress: Progress,
    executor: ImageExecutor | None = None,
    queries: AnswerQueries | None = None,
    parallel: int | None = None,
    max_outage: float = DEFAULT_MAX_OUTAGE,
    ignore_fleet: bool = False,
) -> MigrationOutcome:
    """The cutover of the migration whose claim carries ``token`` (module docstring).

    At stamp 4 it needs the schema the receipts were taken with (``SchemaChanged`` otherwise, with
    nothing written), no live registered writer unless ``ignore_fleet`` (a format-4 server cannot
    write after the stamp) and an estimate within ``max_outage``. A migration past stamp 4 (a
    cutover that stopped) is continued as ``resume --token`` does, waiting at most ``max_outage``
    for live writers' commits.
    """
    m = _held(store, token, progress, executor)
    stamp, _ = m.manifest.read_stamp()
    if stamp != FORMAT_4:
        return resume_migration(store, token, owner, progress, executor, queries, parallel, drain_seconds=max_outage)
    refuse_schema_changed(m)  # before anything is written; drive checks again
    refuse_live_writers(store, ignore_fleet)
    if queries is not None:
        check_queries(open_graph(store, FENCED_PROFILE, write=False), queries)
    _refuse_over_bound(m, current_estimate(m, parallel), max_outage)
    _warm_up()
    with acting_for(store, CLAIM_PATH, m.claim, action="cutover", owner=owner):
        replay_started(m, m.claim)  # its holder may have died before the first record
        m.record(Resumed, owner=owner, host=socket.gethostname(), pid=os.getpid())
        return drive(m, queries, parallel, drain_seconds=max_outage)


def continue_migration(
    store: GraphStore,
    token: str,
    owner: str,
    progress: Progress,
    executor: ImageExecutor | None = None,
    queries: AnswerQueries | None = None,
    parallel: int | None = None,
) -> MigrationOutcome:
    """``resume --token``: the migration of that claim, continued to stamp 5.

    One still at stamp 4 under its online claim (a ``run`` or ``prepare`` that died before its
    barrier) is continued by its cutover, bounded by :data:`DEFAULT_MAX_OUTAGE`
    (:func:`cutover_migration`); any other by :func:`~omnigraph.migrator.run.resume_migration`.
    """
    holder = inspect(store, CLAIM_PATH)
    if holder is not None and holder.token == token and holder.online and Manifest(store).read_stamp()[0] == FORMAT_4:
        return cutover_migration(store, token, owner, progress, executor, queries, parallel)
    return resume_migration(store, token, owner, progress, executor, queries, parallel)


def run_migration(
    store: GraphStore,
    owner: str,
    progress: Progress,
    ignore_fleet: bool = False,
    executor: ImageExecutor | None = None,
    queries: AnswerQueries | None = None,
    parallel: int | None = None,
    max_outage: float | None = None,
) -> MigrationOutcome | UpToDate:
    """Migrate the format-4 graph at ``store`` to format 5: prepare online, catch up, cut over (module docstring).

    On a graph already fenced, nothing to do (:class:`~omnigraph.migrator.verify.UpToDate`).
    Refused while a registered writer is live unless ``ignore_fleet``. ``executor`` validates the
    images (default: this process); it is started before the claim is taken. ``queries`` are the
    answer check's (``bad_request`` before anything is written if one does not bind).
    ``parallel`` units are in flight at once. ``max_outage`` (seconds), if given, bounds the
    predicted cutover (``cutover_deferred`` beyond it, the claim kept) and the wait for live
    writers' commits under the barrier; without it the cutover is not refused by its estimate.
    Duplicate or null ids found online do not stop ``run`` at stamp 4: their repair works behind
    the barrier, so the cutover raises it and stops at them there (``validation_failed``), as
    :func:`~omnigraph.migrator.run.drive` does.
    """
    manifest = Manifest.of_graph(store)
    up_to_date = already_fenced(store, manifest)
    if up_to_date is not None:
        return up_to_date
    _preconditions(store, manifest)
    refuse_live_writers(store, ignore_fleet)
    if queries is not None:
        check_queries(open_graph(store, FENCED_PROFILE, write=False), queries)
    with begin(store, owner, progress, executor, queries.check() if queries else None, online=True) as m:
        failpoint("migrate.after_claim")
        # Duplicates are recorded; the cutover validates those images again behind the barrier and stops there.
        with contextlib.suppress(ValidationFailed):
            _catch_up(m, parallel, max_outage)
        refuse_live_writers(store, ignore_fleet)  # one may have registered while the images were validated
        if max_outage is not None:
            _refuse_over_bound(m, current_estimate(m, parallel), max_outage)
        return drive(m, queries, parallel, drain_seconds=max_outage)


def _catch_up(m: Migration, parallel: int | None, max_outage: float | None) -> PrepareOutcome:
    """Prepare rounds until a cutover reads at most :data:`CATCH_UP_ROWS` rows within the bound (:data:`PREPARE_ROUNDS` at most)."""
    prepared = prepare_round(m, parallel)
    bound = DEFAULT_MAX_OUTAGE if max_outage is None else max_outage
    while prepared.rounds < PREPARE_ROUNDS and (
        prepared.cutover.changed_rows + prepared.cutover.unreceived_rows > CATCH_UP_ROWS or prepared.cutover.seconds > bound
    ):
        prepared = prepare_round(m, parallel)
    return prepared
