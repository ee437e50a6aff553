"""One migration unit, step by step and idempotently, and the pool of units in flight at once.

One unit (:func:`migrate_unit`, DESIGN section 7, step 6). Every step first looks at what is
already true, so running a unit again after a crash continues where it stopped and never redoes
an effect:

1. revalidate: the claim token, the branch incarnation, the pinned tuple (or this migration's own
   published marker), and for an owned table that its HEAD is the pinned version (or the pinned
   version plus this migration's PK commit);
2. sidecar (``failpoint unit.after_sidecar``): while it exists, the unit is in progress;
3. inherited image: fork the graph branch's table branch from exactly the pinned version, or
   adopt an existing fork only if its parent ref (and the identifier recorded in the ledger, if
   any) match the sidecar (``unit.after_fork``);
4. install the PK ``[id]`` where absent, ``present`` if already ``[id]``, refuse anything else
   (``unit.after_pk``);
5. publish the branch manifest row at the achieved image with the migration marker, head
   unmoved (``unit.after_publish``);
6. check the rows are unchanged: the physical fingerprint equals the validated image's, else the
   re-read id digest must equal it (``unit.after_digest``);
7. ledger ``unit_completed`` with what each step achieved (the fork's identity, the PK, the
   publish, the rows check), delete the sidecar.

A unit writes three migration documents to the store (its sidecar, its ``unit_completed``, the
sidecar's deletion) besides Lance's own commits (fork, PK, publish). A resume finds an
in-progress unit by its sidecar and redoes each step's check, never the step's effect. Anything
that moved under the barrier is ``drift_detected``; a sidecar that declares other effects, a fork
this migration did not make and a fork interrupted inside Lance that cannot be made again are
``migration_refused``.

The pool (:func:`run_units`, ``--parallel N``): a bounded pool of threads. Units of one graph
branch run one after another, in plan order, because each publishes a row of that branch's
``__manifest`` and two publishes from one base conflict (which the unit protocol reports as
drift). Units of different graph branches touch distinct Lance table branches and distinct
manifest branches, so up to ``parallel`` graph branches have a unit in flight at a time. Every
unit keeps its own protocol (:func:`migrate_unit`): a crash at any point leaves each in-flight
unit resumable from its sidecar, so ``resume`` continues them all.

The first unit that fails stops the pool: no unit starts after it, the units already in flight
finish (or fail), and the failure of the earliest graph branch in plan order is raised. Ledger
records stay one strict sequence (:meth:`omnigraph.migrator.claim.Migration.record` is
serialized); their order between branches depends on timing.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import msgspec

from omnigraph.engine.door.table_store import KEY_COLUMN, CommitConflict, install_primary_key
from omnigraph.engine.errors import BadRequest
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.manifest.rows import TableEntry
from omnigraph.engine.storage.lance_io import (
    ForeignFork,
    Fork,
    ForkInterrupted,
    ImageRef,
    fork_or_adopt,
    open_dataset,
    open_pinned,
    primary_key,
    remove_unreferenced_fork,
)
from omnigraph.ledger.fold import ImageState
from omnigraph.ledger.records import DriftItem, UnitCompleted, UnitPlan
from omnigraph.migrator import layout
from omnigraph.migrator.claim import Migration
from omnigraph.migrator.errors import DriftDetected, MigrationRefused
from omnigraph.migrator.executors import fan_out, validate_image
from omnigraph.migrator.layout import ManifestDelta, PlannedFork, UnitSidecar, physical_fingerprint
from omnigraph.migrator.options import MAX_PARALLEL
from omnigraph.migrator.plan import is_inherited

_PK_COMMIT_OPERATION = "UpdateConfig"


def _drift(what: str, expected: str, actual: str) -> DriftDetected:
    item = DriftItem(what=what, expected=expected, actual=actual)
    return DriftDetected(
        f"{what}: expected {expected}, found {actual}. A writer was not stopped; the stamp will not "
        "be written. Stop every writer, then abort this migration and run it again.",
        {"moved": [item.model_dump(mode="json")]},
    )


def target_branch(unit: UnitPlan) -> str | None:
    """The Lance table branch the unit's PK ends up on."""
    return unit.graph_branch if is_inherited(unit) else unit.pinned_table_branch


def _is_own_pk_commit(m: Migration, unit: UnitPlan, branch: str | None, head: int, base: int) -> bool:
    if head != base + 1:
        return False
    dataset = open_dataset(m.store, unit.table_path, branch)
    transaction = dataset.read_transaction(head)
    if transaction is None:  # a version written without a transaction record is not this migration's
        return False
    return type(transaction.operation).__name__ == _PK_COMMIT_OPERATION and primary_key(dataset.schema) == [KEY_COLUMN]


def _check_entry(m: Migration, unit: UnitPlan, entry: TableEntry | None) -> None:
    """The branch must still pin the planned image, or this migration's own published one."""
    if entry is None:
        raise _drift(f"{unit.table_key} on {unit.graph_branch}", "present", "absent")
    ours = entry.migration_id == m.migration_id and entry.migration_unit == unit.unit_id
    if (entry.table_branch, entry.table_version) != (unit.pinned_table_branch, unit.pinned_table_version) and not ours:
        raise _drift(
            f"{unit.table_key} on {unit.graph_branch}",
            f"{unit.pinned_table_branch or 'main'}@v{unit.pinned_table_version}",
            f"{entry.table_branch or 'main'}@v{entry.table_version}",
        )


def _revalidate(m: Migration, unit: UnitPlan) -> None:
    m.require_claim()
    branch = m.manifest.branch(unit.graph_branch)
    if branch is None or branch.incarnation != unit.branch_incarnation:
        raise _drift(
            f"graph branch {unit.graph_branch}",
            f"incarnation {unit.branch_incarnation}",
            "deleted" if branch is None else f"incarnation {branch.incarnation}",
        )
    _check_entry(m, unit, m.manifest.snapshot(unit.graph_branch).tables.get(unit.table_key))
    if not is_inherited(unit):
        head = open_dataset(m.store, unit.table_path, unit.pinned_table_branch).version
        base = unit.pinned_table_version
        if head != base and not _is_own_pk_commit(m, unit, unit.pinned_table_branch, head, base):
            raise _drift(
                f"HEAD of {unit.table_path} on table branch {unit.pinned_table_branch or 'main'}",
                f"v{base}",
                f"v{head}",
            )


def _sidecar_for(m: Migration, unit: UnitPlan) -> UnitSidecar:
    fork = (
        PlannedFork(branch=unit.graph_branch, parent_branch=unit.pinned_table_branch, parent_version=unit.pinned_table_version)
        if is_inherited(unit)
        else None
    )
    return UnitSidecar(
        migration_id=m.migration_id,
        token=m.token,
        unit=unit,
        planned_fork=fork,
        planned_pk=[KEY_COLUMN],
        manifest_delta=ManifestDelta(
            graph_branch=unit.graph_branch,
            table_key=unit.table_key,
            table_branch=target_branch(unit),
            migration_id=m.migration_id,
            migration_unit=unit.unit_id,
        ),
    )


def _fork(m: Migration, unit: UnitPlan, fork: PlannedFork, recorded_identifier: str | None) -> dict[str, str]:
    """Fork the planned table branch, or adopt the one an earlier attempt made; the ``unit_completed`` fields of what was done.

    An adopted fork's parent ref, and the identifier a ledger of an earlier release recorded if
    any, must match the sidecar. A fork an earlier attempt was killed inside (its data without a ref) is removed and made
    again: the sidecar planned that fork, and under the claim no other process forks the name.
    """

    def fork_now() -> Fork:
        return fork_or_adopt(m.store, unit.table_path, fork.branch, fork.parent_branch, fork.parent_version, identifier=recorded_identifier)

    try:
        try:
            made = fork_now()
        except ForkInterrupted:
            if not remove_unreferenced_fork(m.store, unit.table_path, fork.branch):
                raise
            made = fork_now()
    except ForkInterrupted as interrupted:
        raise MigrationRefused(
            f"{unit.table_path}: Lance branch {fork.branch!r} exists as data without a ref "
            f"({interrupted.cause}); an earlier fork was interrupted inside Lance. Inspect "
            f"{unit.table_path}/tree/{fork.branch} by hand before resuming.",
            {"unit_id": unit.unit_id, "table_path": unit.table_path, "branch": fork.branch},
        ) from interrupted.cause
    except ForeignFork as foreign:
        existing = foreign.existing
        raise MigrationRefused(
            f"{unit.table_path} already has a Lance branch {fork.branch!r} forked from "
            f"({existing.parent_branch or 'main'}, v{existing.parent_version}) with identifier "
            f"{existing.identifier}; the sidecar plans a fork from ({fork.parent_branch or 'main'}, "
            f"v{fork.parent_version})"
            + (f" with identifier {recorded_identifier}" if recorded_identifier else "")
            + ". It was not made by this migration; refusing to adopt it.",
            {"unit_id": unit.unit_id, "table_path": unit.table_path, "branch": fork.branch},
        ) from foreign
    return {"fork": "created" if made.created else "adopted", "fork_identifier": made.branch.identifier}


def _install(m: Migration, unit: UnitPlan, branch: str | None) -> tuple[int, str]:
    """The PK on ``branch`` (installed now, or by an earlier attempt): its version and ``installed`` or ``present``."""
    dataset = open_dataset(m.store, unit.table_path, branch)
    base = unit.pinned_table_version
    if dataset.version != base:
        if not _is_own_pk_commit(m, unit, branch, dataset.version, base):
            raise _drift(f"HEAD of {unit.table_path} on table branch {branch or 'main'}", f"v{base}", f"v{dataset.version}")
        return int(dataset.version), "present"
    try:
        outcome, version = install_primary_key(dataset)
    except CommitConflict as conflict:
        raise _drift(f"HEAD of {unit.table_path} on table branch {branch or 'main'}", f"v{base}", "a concurrent commit") from conflict
    return version, "installed" if outcome == "installed" else "present"


def _publish(m: Migration, unit: UnitPlan, branch: str | None, version: int) -> int | None:
    """Publish the unit's manifest row at the achieved image.

    Returns the manifest version, or None if an earlier attempt published it.
    """
    snapshot = m.manifest.snapshot(unit.graph_branch)
    entry = snapshot.table(unit.table_key)
    _check_entry(m, unit, entry)
    achieved = msgspec.structs.replace(
        entry, table_branch=branch, table_version=version, migration_id=m.migration_id, migration_unit=unit.unit_id
    )
    if entry == achieved:
        return None
    try:
        return m.manifest.publish(snapshot, [achieved], head=None)
    except CommitConflict as conflict:
        raise _drift(f"__manifest branch {unit.graph_branch}", f"v{snapshot.manifest_version}", "a concurrent publish") from conflict


def _check_rows(m: Migration, unit: UnitPlan, image: ImageState, branch: str | None, version: int) -> tuple[str, str]:
    """Check that the rows of the achieved image are the validated ones; drift otherwise.

    Returns their digest and how that was established (``same data files``, else ``ids re-read``).
    """
    dataset = open_pinned(m.store, ImageRef(unit.table_path, branch, version))
    if physical_fingerprint(dataset) == image.fingerprint:
        return image.digest, "same data files"
    report = validate_image(dataset)
    if report.digest != image.digest:
        raise _drift(f"rows of {unit.table_key} on {unit.graph_branch}", f"digest {image.digest}", f"digest {report.digest}")
    return report.digest, "ids re-read"


def migrate_unit(m: Migration, unit: UnitPlan, image: ImageState, recorded_fork_identifier: str | None) -> None:
    """Run (or continue) one unit to completion; see the module docstring."""
    _revalidate(m, unit)
    declared = _sidecar_for(m, unit)
    layout.write_or_match(m.store, declared)
    failpoint("unit.after_sidecar")
    branch = target_branch(unit)
    fork: dict[str, str] = {}
    if declared.planned_fork is not None:
        fork = _fork(m, unit, declared.planned_fork, recorded_fork_identifier)
        failpoint("unit.after_fork")
    version, pk = _install(m, unit, branch)
    failpoint("unit.after_pk")
    manifest_version = _publish(m, unit, branch, version)
    failpoint("unit.after_publish")
    digest, rows_check = _check_rows(m, unit, image, branch, version)
    failpoint("unit.after_digest")
    m.record(
        UnitCompleted,
        unit_id=unit.unit_id,
        table_branch=branch,
        table_version=version,
        digest=digest,
        pk=pk,
        manifest_version=manifest_version,
        rows_check=rows_check,
        **fork,
    )
    layout.delete(m.store, m.migration_id, unit.unit_id)


def by_graph_branch(units: list[UnitPlan]) -> list[list[UnitPlan]]:
    """``units`` grouped by graph branch, each group in the given order, groups in order of their first unit."""
    groups: dict[str, list[UnitPlan]] = {}
    for unit in units:
        groups.setdefault(unit.graph_branch, []).append(unit)
    return list(groups.values())


def run_units(
    m: Migration,
    units: list[UnitPlan],
    images: Mapping[str, ImageState],
    fork_identifiers: Mapping[str, str],
    parallel: int,
) -> None:
    """Run every unit of ``units`` (in plan order) to completion, ``parallel`` graph branches at a time.

    See the module docstring. ``m.progress`` advances once per completed unit. ``parallel`` outside
    1 to :data:`~omnigraph.migrator.options.MAX_PARALLEL` is ``bad_request`` (nothing done).
    """
    if not 1 <= parallel <= MAX_PARALLEL:
        raise BadRequest(f"parallel must be from 1 to {MAX_PARALLEL}, not {parallel}", {"parallel": parallel})
    stop = threading.Event()
    progress_lock = threading.Lock()

    def run_group(group: list[UnitPlan]) -> None:
        for unit in group:
            if stop.is_set():
                return
            try:
                migrate_unit(m, unit, images[unit.image_id], fork_identifiers.get(unit.unit_id))
            except BaseException:
                stop.set()
                raise
            with progress_lock:
                m.progress.advance()

    fan_out(run_group, by_graph_branch(units), parallel)
