"""The migration protocol under the claim, from the barrier to the release (DESIGN section 7,
steps 3 to 7): what ``run``, ``refence`` and ``resume`` drive once they hold the claim.

:func:`drive` continues a :class:`~omnigraph.migrator.context.Migration` from whatever its ledger says is
done: barrier stamp ``migrating`` (if not up yet), plan (adopting out-of-band commits that change
no row first), validation of every image not yet found clean since the plan, the answer check's baseline when
queries are given (:mod:`omnigraph.migrator.answers`: every read query on every live branch, recorded
before the first PK effect), every unit not yet completed (:mod:`omnigraph.migrator.unit`, several at
once: :mod:`omnigraph.migrator.unit_pool`), verification against the ledger, the recorded answers
taken again (``answers_changed`` on any difference), stamp ``5`` last, then the release of the
claim (:func:`release_claim`). Every step is a ledger record, so a crash anywhere is continued by ``resume --token``.

A validation failure records the full inventory and raises ``validation_failed`` before any PK
effect, leaving the barrier up and the claim held: the graph stays closed to every writer while
the operator repairs the duplicates under the claim, then resumes (planning and validating
afresh) or aborts. Images are validated by the migration's executor
(:mod:`omnigraph.migrator.executors`): the records, results and exit codes are the same on any executor.

Failpoints: ``migrate.after_barrier``, ``migrate.after_plan``, ``migrate.after_image_records``,
``migrate.after_validate``, ``migrate.after_units``, ``migrate.before_stamp``,
``migrate.after_stamp``, ``migrate.before_release``, ``migrate.after_release`` and the unit
failpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omnigraph.claims.claim import inspect, release
from omnigraph.engine.errors import FormatRefused, PreconditionFailed, ValidationFailed
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5, FORMAT_MIGRATING
from omnigraph.ledger.fold import ImageState
from omnigraph.ledger.ledger import LedgerReplay
from omnigraph.ledger.records import (
    AnswerDigest,
    AnswersChecked,
    AnswersRecorded,
    BarrierSet,
    ClaimReleased,
    ImageValidated,
    PlanRecorded,
    StampWritten,
    UnitsStarted,
    UnitStep,
    ValidationFailedRecord,
    Verified,
)
from omnigraph.ledger.records import DriftDetected as DriftRecord
from omnigraph.migrator import sidecar as sidecars
from omnigraph.migrator.answers import (
    AnswerQueries,
    answer_cases,
    answers_changed,
    compare_answers,
    read_graph,
    recorded_queries,
    refuse_other_queries,
    requested_queries,
    take_answers,
)
from omnigraph.migrator.context import Migration
from omnigraph.migrator.errors import DriftDetected
from omnigraph.migrator.fan_out import default_parallel, read_snapshots
from omnigraph.migrator.inventory import inventory, validate_images
from omnigraph.migrator.layout import CLAIM_PATH
from omnigraph.migrator.out_of_band import adopt_before_plan
from omnigraph.migrator.plan import MigrationPlan, build_plan
from omnigraph.migrator.unit_pool import run_units
from omnigraph.migrator.verify import migration_drift, structural_problems


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

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "migrated",
            "migration_id": self.migration_id,
            "token": self.token,
            "units": self.units,
            "images": self.images,
            "stamp": self.stamp,
            "answer_check": answer_cases(list(self.answers), []),
        }


def drive(m: Migration, queries: AnswerQueries | None = None, parallel: int | None = None) -> MigrationOutcome:
    """Continue ``m`` from its ledger to stamp 5 and the release of its claim (module docstring).

    The graph must be at stamp 4 (the barrier is raised) or ``migrating``; any other stamp is
    ``format_refused``. ``queries`` are the answer check's: refused (``precondition_failed``,
    before any effect) if the migration recorded, or was started with, other queries, or if
    units already progressed without a baseline. The check the migration was started with, or
    whose answers it recorded, is taken whether or not ``queries`` are given. ``parallel`` units
    (of distinct graph branches) are in flight at once (:mod:`omnigraph.migrator.unit_pool`; default
    :func:`~omnigraph.migrator.fan_out.default_parallel` for the store).
    """
    queries = _answer_queries(m, queries)
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
    if queries is not None and m.ledger.replay().state.answers_sha256 is None:
        m.record(
            AnswersRecorded,
            source=queries.source,
            params=queries.params_json,
            queries_sha256=queries.sha256,
            answers=take_answers(read_graph(m.store.uri), queries),
        )
        failpoint("migrate.after_answers")
    replay = m.ledger.replay()
    identifiers = _fork_identifiers(replay)
    pending = [u for u in plan.units if replay.state.units[u.unit_id].status != "completed"]
    if pending and replay.state.phase != "installing":
        m.record(UnitsStarted)
    m.progress.start("migrating units", len(plan.units))
    m.progress.advance(len(plan.units) - len(pending))
    run_units(m, pending, images, identifiers, parallel or default_parallel(m.store))
    m.progress.finish()
    failpoint("migrate.after_units")
    _verify_then_stamp(m)
    answers = tuple(m.ledger.replay().state.answers)
    return MigrationOutcome(m.migration_id, m.token, len(plan.units), len(plan.images()), FORMAT_5, answers)


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
    """The answer check :func:`drive` takes: the queries the migration recorded or was started
    with, else ``given``; the refusals of :func:`drive`. Reads the ledger only."""
    replay = m.ledger.replay()
    known = requested_queries(replay)
    resume = f"omnigraph-migrate resume {m.store.uri} --token {m.token}"
    refuse_other_queries(given, known.sha256 if known else None, f", or run `{resume}` without them: it checks the recorded queries")
    progressed = any(unit.status != "planned" for unit in replay.state.units.values())
    if known is None and given is not None and (progressed or sidecars.remaining(m.store, m.migration_id)):
        raise PreconditionFailed(
            "this migration installed primary keys without an answer check, and the check's baseline "
            f"must be taken before the first one; run `{resume}` without --queries",
            {"migration_id": m.migration_id},
        )
    return known or given


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
    """Validate the images not yet found clean, one ledger record each; ``validation_failed``
    with the inventory if any is broken; the validated state of every image otherwise."""
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
            f"(`omnigraph-migrate playbook run duplicate-repair {m.store.uri}`) and "
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
    """The identifier of every fork the ledger recorded, by unit id."""
    identifiers: dict[str, str] = {}
    for _, record in replay.records:
        if isinstance(record, UnitStep) and record.step in ("fork_created", "fork_adopted"):
            identifiers[record.unit_id] = record.detail.removeprefix("identifier=")
    return identifiers


def _verify_then_stamp(m: Migration) -> None:
    """``drift_detected`` (stamp not written) if the graph moved from what the ledger says or is
    not structurally fenced; otherwise stamp 5 with the current heads, then the release."""
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
    _check_answers(m)
    failpoint("migrate.before_stamp")
    m.manifest.write_stamp(FORMAT_5, None, _current_heads(m.manifest))
    m.record(StampWritten, format=FORMAT_5)
    failpoint("migrate.after_stamp")
    release_claim(m)


def _check_answers(m: Migration) -> None:
    """Take the recorded answers again (if any were recorded); ``answers_changed`` on any
    difference, after recording it. The barrier stays up and the claim held."""
    replay = m.ledger.replay()
    queries = recorded_queries(replay)
    if queries is None:
        return
    recorded = list(replay.state.answers)
    changed = compare_answers(read_graph(m.store.uri), queries, recorded)
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


def _current_heads(manifest: Manifest) -> dict[str, str]:
    """Every live branch's head commit id: what stamp 5 records as its fenced heads."""
    branches = list(manifest.branches())
    snapshots = read_snapshots(manifest, branches)
    return {branch: snapshot.head.commit_id for branch, snapshot in zip(branches, snapshots, strict=True)}
