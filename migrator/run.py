"""``run``, ``resume``, ``abort`` and ``refence``: the migration protocol of DESIGN section 7.

``run``: on a graph already at stamp 5 with no claim held and ``verify`` passing, nothing to do
(:class:`UpToDate`, exit 0, nothing written: re-running the upgrade is safe). Otherwise
preflight checks, claim, barrier stamp ``migrating``, plan, validate every image, then
every unit, then verify and stamp ``5`` last, then release the claim. Every step is a ledger
record. ``resume --token`` continues the same migration from its ledger: completed units are
skipped and the others continue step by step (see :mod:`migrator.unit`). A validation failure
leaves the barrier up and the claim held: the graph stays closed to every writer while the
operator repairs the duplicates under the claim, then resumes (a resume after a failed
validation plans and validates afresh), or aborts. ``abort --token`` (before stamp ``5`` only) puts stamp ``4`` back and releases the
claim; installed PKs and migration forks stay (roll-forward only). Images are validated by an
executor (:mod:`migrator.executors`): this process, or tasks on a Ray cluster; the records,
results and exit codes are the same either way.

Failpoints: ``migrate.after_claim``, ``migrate.after_barrier``, ``migrate.after_plan``,
``migrate.after_image_records``, ``migrate.after_validate``, ``migrate.after_units``, ``migrate.before_stamp``, ``migrate.after_stamp``,
``migrate.before_release``, ``migrate.after_release``, ``abort.before_release``,
``refence.after_barrier`` and the unit failpoints.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

import engine
from claims import acquire, inspect, read_break, release
from engine.access import readiness_problems
from engine.errors import (
    ClaimHeld,
    FormatRefused,
    NotFound,
    PreconditionFailed,
    RecoveryRequired,
    ValidationFailed,
)
from engine.failpoints import failpoint
from engine.maintenance.progress import Progress, SilentProgress
from engine.manifest import Manifest
from engine.reconcile import intents, recovery
from engine.schema.ids import new_ulid
from engine.storage import FORMAT_4, FORMAT_5, FORMAT_MIGRATING, GraphStore, open_store
from ledger import (
    Aborted,
    BarrierSet,
    ClaimReleased,
    ImageState,
    ImageValidated,
    Ledger,
    LedgerReplay,
    MigrationStarted,
    PlanRecorded,
    Resumed,
    StampWritten,
    UnitStep,
    ValidationFailedRecord,
    Verified,
)
from ledger import (
    DriftDetected as DriftRecord,
)
from migrator import sidecar as sidecars
from migrator.claim_ops import refuse_live_holder
from migrator.context import Migration
from migrator.errors import DriftDetected
from migrator.executors import ImageExecutor, LocalExecutor
from migrator.fleet_check import refuse_live_writers
from migrator.inventory import inventory, validate_images
from migrator.layout import CLAIM_OPERATION, CLAIM_PATH, ledger_dir
from migrator.out_of_band import adopt_before_plan, out_of_band_reports, refuse_row_drift
from migrator.plan import MigrationPlan, build_plan
from migrator.unit import migrate_unit
from migrator.verify import migration_drift, structural_problems, verify_graph


@dataclass(frozen=True)
class MigrationOutcome:
    migration_id: str
    token: str
    units: int
    images: int
    stamp: str

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "migrated",
            "migration_id": self.migration_id,
            "token": self.token,
            "units": self.units,
            "images": self.images,
            "stamp": self.stamp,
        }


@dataclass(frozen=True)
class UpToDate:
    """``run`` found the graph already fenced (stamp 5, no claim, ``verify`` passes): nothing done."""

    graph: str
    verified: dict[str, Any]

    @property
    def message(self) -> str:
        return f"{self.graph} is already at format 5, nothing to do"

    def to_json(self) -> dict[str, Any]:
        return {"status": "up_to_date", "graph": self.graph, "stamp": FORMAT_5, "message": self.message, "verify": self.verified}


def already_fenced(store: GraphStore, manifest: Manifest) -> UpToDate | None:
    """:class:`UpToDate` if the graph is at stamp 5 with no claim held and ``verify`` passes.

    None for any other stamp, or at stamp 5 while a claim is held (the caller refuses those). At
    stamp 5 a failing ``verify`` raises its ``drift_detected`` error. Read-only.
    """
    stamp, _ = manifest.read_stamp()
    if stamp != FORMAT_5 or inspect(store, CLAIM_PATH) is not None:
        return None
    return UpToDate(store.uri, verify_graph(store, manifest))


def refuse_unless_stamp_4(store: GraphStore, manifest: Manifest) -> None:
    """The graph must be at format 4, with no claim and no write-path intents."""
    stamp, migration_id = manifest.read_stamp()
    if stamp == FORMAT_5 and (holder := inspect(store, CLAIM_PATH)) is not None:
        raise ClaimHeld(
            f"{store.uri} is stamped 5 but the claim of migration {holder.migration_id} is still held by "
            f"{holder.owner} on {holder.host} (pid {holder.pid}); if that process is gone, "
            f"`omnigraph-migrate resume {store.uri} --token {holder.token}` releases it",
            {"stamp": stamp, "holder": holder.model_dump(mode="json")},
        )
    if stamp == FORMAT_MIGRATING:
        holder = inspect(store, CLAIM_PATH)
        raise ClaimHeld(
            f"migration {migration_id} holds the barrier on {store.uri}"
            + (f" (claim held by {holder.owner} on {holder.host}, pid {holder.pid})" if holder else "")
            + f"; see `omnigraph-migrate status {store.uri}`, then `resume --token` or `abort --token`",
            {"stamp": stamp, "migration_id": migration_id, "holder": holder.model_dump(mode="json") if holder else None},
        )
    if stamp == FORMAT_5:
        raise FormatRefused(
            f"{store.uri} is already at format 5 (fenced); there is nothing to migrate. "
            f"`omnigraph-migrate verify {store.uri}` checks it.",
            {"stamp": stamp},
        )
    if stamp != FORMAT_4:
        raise FormatRefused(f"{store.uri} has format stamp {stamp!r}; only format 4 can be migrated", {"stamp": stamp})
    holder = inspect(store, CLAIM_PATH)
    if holder is not None:
        raise ClaimHeld(
            f"a migration claim exists on {store.uri}: {holder.owner} on {holder.host} (pid {holder.pid}), "
            f"migration {holder.migration_id}; inspect it with `omnigraph-migrate status {store.uri}`",
            {"holder": holder.model_dump(mode="json"), "path": CLAIM_PATH},
        )
    pending = intents.list_intents(store)
    if pending:
        ids = [i.operation_id for i in pending]
        raise RecoveryRequired(
            ids[0],
            f"{len(ids)} interrupted write(s) are pending recovery on {store.uri}; open the graph "
            f"read-write with the old binary (for example `omnigraph-v4 branch list` is read-only, "
            f"`omnigraph-v4 branch create tmp {store.uri}` then `branch delete tmp`) to resolve them first",
            pending=ids,
        )


def run_migration(
    uri: str, owner: str, progress: Progress, ignore_fleet: bool = False, executor: ImageExecutor | None = None
) -> MigrationOutcome | UpToDate:
    """Migrate the format-4 graph at ``uri`` to format 5 (see the module docstring); refused while
    a registered writer is live unless ``ignore_fleet`` (:mod:`migrator.fleet_check`).

    ``executor`` validates the images (default: this process); it is started before the claim is
    taken, so an executor that cannot start leaves the graph untouched."""
    store = open_store(uri)
    manifest = Manifest(store)
    if not manifest.exists():
        raise NotFound(f"no graph at {store.uri}")
    up_to_date = already_fenced(store, manifest)
    if up_to_date is not None:
        return up_to_date
    refuse_unless_stamp_4(store, manifest)
    refuse_live_writers(store, ignore_fleet)
    refuse_row_drift(store, out_of_band_reports(store, manifest))
    executor = executor or LocalExecutor()
    executor.start()
    migration_id = new_ulid()
    claim = acquire(store, CLAIM_PATH, operation=CLAIM_OPERATION, migration_id=migration_id, owner=owner)
    m = Migration(store, manifest, Ledger(store, ledger_dir(migration_id)), migration_id, claim.token, progress, executor)
    m.record(
        MigrationStarted,
        owner=owner,
        host=socket.gethostname(),
        pid=os.getpid(),
        tool_version=engine.__version__,
        graph_uri=store.uri,
    )
    failpoint("migrate.after_claim")
    return _continue(m)


def refence_migration(uri: str, owner: str, progress: Progress, executor: ImageExecutor | None = None) -> MigrationOutcome:
    """Fence again a stamp-5 graph that a format-4 writer published to after the stamp.

    Needs stamp 5 and a readiness problem (:func:`engine.access.writer_audit.readiness_problems`: a
    format-4 head after the stamp, or a pinned image without PK ``[id]``), no claim and no commit
    in flight by a live process on this host. It then runs the whole migration protocol again
    under a new claim: barrier (stamp ``migrating``, ``barrier_set`` with previous format 5),
    interrupted commits of dead writers resolved, plan, validation of every image (a duplicate
    the old writer let in stops it at ``validation_failed``, repaired like any other), PK
    installed where missing, verify, and stamp 5 recording the current heads as fenced. A crash
    is resumed with ``resume --token``; ``abort --token`` puts stamp 4 back, as for any migration.
    ``executor`` validates the images, as for :func:`run_migration`.
    """
    store = open_store(uri)
    manifest = Manifest(store)
    if not manifest.exists():
        raise NotFound(f"no graph at {store.uri}")
    stamp, _ = manifest.read_stamp()
    if stamp != FORMAT_5:
        raise FormatRefused(
            f"refence fences a stamp-5 graph again; {store.uri} is at stamp {stamp} "
            f"(see `omnigraph-migrate status {store.uri}`)",
            {"stamp": stamp},
        )
    problems = readiness_problems(store, manifest)
    if not problems:
        raise PreconditionFailed(
            f"{store.uri} has no format-4 commit after its stamp and every pinned table has PK [id]: "
            f"nothing to fence again (`omnigraph-migrate verify {store.uri}` checks the rest)",
            {"expected": "a graph that needs fencing again", "actual": "fenced"},
        )
    holder = inspect(store, CLAIM_PATH)
    if holder is not None:
        raise ClaimHeld(
            f"a migration claim exists on {store.uri}: {holder.owner} on {holder.host} (pid {holder.pid}), "
            f"migration {holder.migration_id}; inspect it with `omnigraph-migrate status {store.uri}`",
            {"holder": holder.model_dump(mode="json"), "path": CLAIM_PATH},
        )
    live = [i for i in intents.list_intents(store) if intents.owner_is_alive(i)]
    if live:
        raise RecoveryRequired(
            live[0].operation_id,
            f"{live[0].program} (pid {live[0].pid}) is committing to {store.uri} on this host; stop it, "
            f"then run `omnigraph-migrate refence {store.uri} --owner {owner}` again",
        )
    executor = executor or LocalExecutor()
    executor.start()
    migration_id = new_ulid()
    claim = acquire(store, CLAIM_PATH, operation=CLAIM_OPERATION, migration_id=migration_id, owner=owner)
    m = Migration(store, manifest, Ledger(store, ledger_dir(migration_id)), migration_id, claim.token, progress, executor)
    m.record(
        MigrationStarted, owner=owner, host=socket.gethostname(), pid=os.getpid(),
        tool_version=engine.__version__, graph_uri=store.uri,
    )
    manifest.write_stamp(FORMAT_MIGRATING, migration_id)
    m.record(BarrierSet, previous_format=FORMAT_5)
    failpoint("refence.after_barrier")
    recovery.resolve_intents(store, manifest)
    return _continue(m)


def _raise_barrier(m: Migration) -> None:
    stamp, _ = m.manifest.read_stamp()
    if stamp == FORMAT_4:
        m.manifest.write_stamp(FORMAT_MIGRATING, m.migration_id)
        m.record(BarrierSet, previous_format=FORMAT_4)
        failpoint("migrate.after_barrier")
    elif stamp != FORMAT_MIGRATING:
        raise FormatRefused(f"unexpected format stamp {stamp!r} under the migration claim", {"stamp": stamp})


def _plan_of(replay: LedgerReplay) -> MigrationPlan | None:
    state = replay.state
    return MigrationPlan(list(state.branches), list(state.plan)) if state.plan else None


def _validated_clean_since_plan(replay: LedgerReplay) -> set[str]:
    """Images found clean after the last plan was recorded.

    An earlier plan's results do not count, and neither does an image found broken: a run that
    died between recording an image and recording the validation failure must not resume past
    the duplicates, so broken images are validated (and inventoried) again."""
    clean: set[str] = set()
    for _, record in replay.records:
        if isinstance(record, PlanRecorded):
            clean = set()
        elif isinstance(record, ImageValidated):
            if record.null_ids == 0 and record.duplicate_ids == 0:
                clean.add(record.image_id)
            else:
                clean.discard(record.image_id)
    return clean


def _validate(m: Migration, plan: MigrationPlan, replay: LedgerReplay) -> dict[str, ImageState]:
    done = _validated_clean_since_plan(replay)
    todo = {image_id for image_id in plan.images() if image_id not in done}
    reports = validate_images(m.store, plan, m.progress, only=todo, executor=m.executor)
    images = plan.images()
    for image_id, report in reports.items():
        unit = images[image_id][0]
        m.record(
            ImageValidated,
            image_id=image_id,
            table_path=unit.table_path,
            table_branch=unit.pinned_table_branch,
            table_version=unit.pinned_table_version,
            rows=report.rows,
            digest=report.digest,
            fingerprint=report.fingerprint,
            null_ids=report.null_ids,
            duplicate_ids=len(report.duplicates),
        )
    failpoint("migrate.after_image_records")
    broken = inventory(plan, reports)
    if broken:
        m.record(ValidationFailedRecord, inventory=broken)
        raise ValidationFailed(
            f"{len(broken)} duplicate or null id(s) found; no primary key was installed. The barrier "
            f"stays up (the graph is closed to writers). Repair them under the claim "
            f"(`omnigraph-migrate playbook run playbooks/duplicate-repair.yaml {m.store.uri}`) and "
            f"`omnigraph-migrate resume {m.store.uri} --token {m.token}`, or "
            f"`omnigraph-migrate abort {m.store.uri} --token {m.token}`.",
            {
                "migration_id": m.migration_id,
                "token": m.token,
                "inventory": [entry.model_dump(mode="json") for entry in broken],
            },
        )
    return dict(m.ledger.replay().state.images)


def _fork_identifiers(replay: LedgerReplay) -> dict[str, str]:
    identifiers: dict[str, str] = {}
    for _, record in replay.records:
        if isinstance(record, UnitStep) and record.step in ("fork_created", "fork_adopted"):
            identifiers[record.unit_id] = record.detail.removeprefix("identifier=")
    return identifiers


def _continue(m: Migration) -> MigrationOutcome:
    _raise_barrier(m)
    replay = m.ledger.replay()
    plan = _plan_of(replay)
    if plan is None or replay.state.phase == "validation_failed":
        # First run, or a resume after a failed validation (and any repair under the claim):
        # plan afresh; the ledger accepts a new plan while no unit has progressed. Out-of-band
        # commits that change no row are adopted first, so the plan pins them.
        adopt_before_plan(m.store, m.manifest, m.migration_id, m.token)
        plan = build_plan(m.manifest)
        m.record(PlanRecorded, branches=plan.branches, units=plan.units)
        failpoint("migrate.after_plan")
        replay = m.ledger.replay()
    images = _validate(m, plan, replay)
    failpoint("migrate.after_validate")
    replay = m.ledger.replay()
    identifiers = _fork_identifiers(replay)
    pending = [u for u in plan.units if replay.state.units[u.unit_id].status != "completed"]
    m.progress.start("migrating units", len(plan.units))
    m.progress.advance(len(plan.units) - len(pending))
    for unit in pending:
        migrate_unit(m, unit, images[unit.image_id], identifiers.get(unit.unit_id))
        m.progress.advance()
    m.progress.finish()
    failpoint("migrate.after_units")
    _verify_then_stamp(m)
    return MigrationOutcome(m.migration_id, m.token, len(plan.units), len(plan.images()), FORMAT_5)


def _verify_then_stamp(m: Migration) -> None:
    m.require_claim()
    state = m.ledger.replay().state
    drift = migration_drift(m.store, m.manifest, state)
    if drift:
        m.record(DriftRecord, moved=drift)
        m.record(Verified, ok=False, problems=[f"{d.what}: expected {d.expected}, found {d.actual}" for d in drift])
        raise DriftDetected(
            f"{len(drift)} change(s) under the migration barrier; the format-5 stamp was NOT written. "
            "A writer was not stopped. Stop every writer, `abort --token`, then run the migration again. "
            + "; ".join(f"{d.what}: expected {d.expected}, found {d.actual}" for d in drift),
            {"moved": [d.model_dump(mode="json") for d in drift], "migration_id": m.migration_id},
        )
    problems = structural_problems(m.store, m.manifest)
    m.record(Verified, ok=not problems, problems=problems)
    if problems:
        raise DriftDetected(
            "verification failed; the format-5 stamp was NOT written: " + "; ".join(problems),
            {"problems": problems, "migration_id": m.migration_id},
        )
    failpoint("migrate.before_stamp")
    m.manifest.write_stamp(FORMAT_5, None, current_heads(m.manifest))
    m.record(StampWritten, format=FORMAT_5)
    failpoint("migrate.after_stamp")
    _release(m)


def current_heads(manifest: Manifest) -> dict[str, str]:
    """Every live branch's head commit id: what stamp 5 records as its fenced heads."""
    return {branch: manifest.snapshot(branch).head.commit_id for branch in manifest.branches()}


def _release(m: Migration) -> None:
    state = m.ledger.replay().state
    if not state.claim_released:
        m.record(ClaimReleased)
    failpoint("migrate.before_release")
    if inspect(m.store, CLAIM_PATH) is not None:
        release(m.store, CLAIM_PATH, m.token)
    failpoint("migrate.after_release")


def held_migration(uri: str, token: str, progress: Progress, executor: ImageExecutor | None = None) -> Migration:
    """The migration whose claim carries ``token``; ``not_found`` / ``precondition_failed`` otherwise.

    ``executor`` validates whatever images it still has to validate (default: this process)."""
    store = open_store(uri)
    holder = inspect(store, CLAIM_PATH)
    if holder is None:
        raise NotFound(
            f"no migration claim on {store.uri}: nothing to resume or abort "
            f"(`omnigraph-migrate status {store.uri}` shows the last migration)",
            {"uri": store.uri},
        )
    if holder.token != token:
        raise PreconditionFailed(
            f"the token does not match the claim held by {holder.owner} on {holder.host} "
            f"(migration {holder.migration_id}); use the token shown by `omnigraph-migrate status`",
            {"expected": "the holder's token", "actual": token, "holder": holder.model_dump(mode="json")},
        )
    return Migration(
        store, Manifest(store), Ledger(store, ledger_dir(holder.migration_id)), holder.migration_id, token, progress,
        executor or LocalExecutor(),
    )


def resume_migration(
    uri: str, token: str, owner: str, progress: Progress, executor: ImageExecutor | None = None
) -> MigrationOutcome:
    """Continue the migration whose claim carries ``token`` from its ledger; ``executor`` validates
    the images not yet found clean (started only if there is one).

    A claim broken with ``token`` is not resumed (its holder's claim is gone for good): the
    refusal names ``abort --token``, which lowers the barrier it left."""
    _refuse_broken(uri, token)
    m = held_migration(uri, token, progress, executor)
    try:
        state = m.ledger.replay().state
    except NotFound:
        # The holder died between taking the claim and its first ledger record.
        holder = inspect(m.store, CLAIM_PATH)
        assert holder is not None
        m.record(
            MigrationStarted,
            owner=holder.owner,
            host=holder.host,
            pid=holder.pid,
            tool_version=holder.tool_version,
            graph_uri=m.store.uri,
        )
        state = m.ledger.replay().state
    if state.aborted:
        raise PreconditionFailed(
            f"migration {m.migration_id} was aborted; finish the abort with "
            f"`omnigraph-migrate abort {m.store.uri} --token {token}`, then start a new run",
            {"expected": "a migration that was not aborted", "actual": "aborted"},
        )
    m.record(Resumed, owner=owner, host=socket.gethostname(), pid=os.getpid())
    stamp, _ = m.manifest.read_stamp()
    if stamp == FORMAT_5:
        if not state.stamp_written:
            m.record(StampWritten, format=FORMAT_5)
        _release(m)
        replay = m.ledger.replay()
        return MigrationOutcome(m.migration_id, token, len(replay.state.plan), len(replay.state.images), FORMAT_5)
    return _continue(m)


def _abortable_migration(uri: str, token: str) -> tuple[Migration, bool]:
    """The migration ``abort --token`` acts on, and whether its claim was broken.

    Normally the claim carries ``token`` and its holder is not alive on this host. A claim broken
    with ``token`` (``claim break``) also qualifies while the barrier still names its migration,
    so the barrier a dead holder left can be lowered."""
    store = open_store(uri)
    if inspect(store, CLAIM_PATH) is None:
        record = read_break(store, CLAIM_PATH, token)
        stamp, migration_id = Manifest(store).read_stamp()
        if record is not None and stamp == FORMAT_MIGRATING and migration_id == record.claim.migration_id:
            ledger = Ledger(store, ledger_dir(record.claim.migration_id))
            return Migration(store, Manifest(store), ledger, record.claim.migration_id, token, SilentProgress()), True
    m = held_migration(uri, token, SilentProgress())
    holder = inspect(m.store, CLAIM_PATH)
    if holder is not None:
        refuse_live_holder(holder, "abort the migration")
    return m, False


def _refuse_broken(uri: str, token: str) -> None:
    store = open_store(uri)
    if inspect(store, CLAIM_PATH) is not None:
        return
    record = read_break(store, CLAIM_PATH, token)
    if record is not None:
        raise PreconditionFailed(
            f"the claim of migration {record.claim.migration_id} was broken by {record.breaker} "
            f"({record.reason}); a broken migration is not resumed. "
            f"`omnigraph-migrate abort {store.uri} --token {token}` lowers the barrier it left, then run "
            "the migration again",
            {"expected": "a held claim", "actual": "broken", "migration_id": record.claim.migration_id},
        )


def abort_migration(uri: str, token: str, reason: str) -> dict[str, Any]:
    """Put stamp 4 back and release the claim (before stamp 5 only); PKs and forks stay.

    Refused while the claim's holder is a live process on this host. A claim already broken
    with ``token`` is accepted while its migration still holds the barrier (nothing to release).

    Idempotent: an abort interrupted after its ledger records is finished by running it again
    (a resume of an aborted migration is refused and says so)."""
    m, broken = _abortable_migration(uri, token)
    state = m.ledger.replay().state
    stamp, _ = m.manifest.read_stamp()
    if stamp == FORMAT_5:
        raise FormatRefused(
            f"migration {m.migration_id} already wrote stamp 5; it cannot be aborted. "
            f"Finish it with `omnigraph-migrate resume {m.store.uri} --token {token}`.",
            {"stamp": stamp},
        )
    if stamp == FORMAT_MIGRATING:
        m.manifest.write_stamp(FORMAT_4, None)
    if not state.aborted:
        m.record(Aborted, stamp_restored=FORMAT_4, reason=reason)
    leftovers = sidecars.remaining(m.store, m.migration_id)
    for unit_id in leftovers:
        sidecars.delete(m.store, m.migration_id, unit_id)
    if not state.claim_released and not broken:
        m.record(ClaimReleased)
    failpoint("abort.before_release")
    if not broken:
        release(m.store, CLAIM_PATH, token)
    return {"migration_id": m.migration_id, "stamp": FORMAT_4, "sidecars_removed": leftovers}
