"""The write protocol: one graph commit = prepare, arm, effects, publish, disarm.

:func:`commit` is the one seam every write goes through. An attempt:

1. Prepare: ``prepare(snapshot, previous)`` validates against the branch snapshot and returns
   one :class:`~omnigraph.engine.ops.write_plan.CommitPlan` (it raises ``key_conflict``/``bad_request``/
   ``resource_limit`` itself; the per-commit limits are :mod:`omnigraph.engine.ops.limits`). A plan with
   nothing to publish ends the commit here. Every table to write must then be at the version the
   manifest pins (:func:`omnigraph.engine.reconcile.pins.check_pins`); any other verdict abandons the
   attempt before anything is armed and is acted on as a step of its own: wait for a live
   writer's commit, resolve a dead writer's, settle out-of-band commits (which publishes its own
   adoption commit, or refuses with ``table_drift``), or just refresh a stale snapshot; then the
   next attempt starts.
2. Arm: ``__recovery/<op>.json`` (create-if-absent) records every table's state before.
3. Effects (:mod:`omnigraph.engine.ops.write_effects`), per table in key order: fork if inherited, then one
   router operation from the pinned version.
4. Publish (:mod:`omnigraph.engine.ops.write_publish`): one ``__manifest`` commit (table rows + head row)
   from the snapshot's version, rebased over concurrent publishes when that is safe.
5. Disarm: delete the intent.

A storage conflict before any table effect deletes the intent and re-runs the whole attempt from
step 1 with a fresh snapshot (bounded by :data:`RETRY_SECONDS`, with jittered backoff); a strict
insert therefore re-probes its ids and ends as ``key_conflict`` once a concurrent winner is
published, and never turns into an upsert. A conflict after an effect landed is
``recovery_required`` with the intent kept. An attempt that fails after arming for any other
reason (a storage error, say) keeps its intent too. Either way the process gives that commit up
(:func:`omnigraph.engine.reconcile.recovery.abandon`): its own next pin check or read-write open resolves the
intent as a dead writer's, so a long-lived process (a server) is not stuck behind its own failed
commit. Every attempt writes to the branch incarnation the
commit started on or to none. Support boundary: one writer process per graph; concurrent
processes are fenced against duplicate ids, not promised serializable multi-table commits.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, NoReturn

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential_jitter

from omnigraph.engine.door.table_store import CommitConflict
from omnigraph.engine.errors import BadRequest, Internal, NotFound, ReadSetConflict
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import MAIN, BranchSnapshot, TableEntry, lance_branch_name, now_ms
from omnigraph.engine.ops.write_effects import apply_effects
from omnigraph.engine.ops.write_plan import CommitPlan, NoEffectConflict, P, Prepare, WriteResult
from omnigraph.engine.ops.write_publish import publish, refuse_foreign_base
from omnigraph.engine.reconcile import branch_guard, drift, pins, recovery
from omnigraph.engine.reconcile.pins import PinVerdict
from omnigraph.engine.reconcile.recovery import IntentTable, WriteIntent
from omnigraph.engine.schema.ids import new_ulid
from omnigraph.engine.storage.process import process_start_marker, this_host

RETRY_SECONDS = 60.0


def commit(graph: Graph, branch: str, prepare: Prepare[P], *, actor: str) -> WriteResult[P]:
    """Run one graph commit on ``branch`` (see the module docstring); the plan of the attempt
    that finished, and the commit it published if it had anything to publish."""
    if not graph.writable:
        raise BadRequest("the graph was opened read-only")
    retrying = Retrying(
        retry=retry_if_exception_type(NoEffectConflict),
        stop=stop_after_delay(RETRY_SECONDS),
        wait=wait_exponential_jitter(multiplier=0.02, max=0.5, jitter=0.05),
        reraise=True,
    )
    incarnation = graph.manifest.incarnation(branch)  # every attempt writes to this one or to none
    if incarnation is None:
        graph.manifest.require_branch(branch)  # not_found, unless it was created just now
        incarnation = graph.manifest.incarnation(branch)
        if incarnation is None:
            raise NotFound(f"graph branch {branch!r} does not exist (see `omnigraph branch list {graph.store.uri}`)", {"branch": branch})
    attempts = _Attempts(graph, branch, incarnation, prepare, actor)
    try:
        return retrying(attempts.run)
    except NoEffectConflict as conflict:
        raise ReadSetConflict(
            f"concurrent writers on branch {branch!r} kept conflicting for {RETRY_SECONDS:.0f}s; nothing was written, retry the operation",
            {"member": branch, "expected": "no concurrent conflicting commit", "actual": str(conflict)},
        ) from conflict


class _Attempts(Generic[P]):
    """The attempts of one commit on the branch incarnation it started on (read before any
    snapshot, so every snapshot is of it or of a later one, which the check after arming
    refuses); remembers the last plan, the ``previous`` of the next prepare."""

    def __init__(self, graph: Graph, branch: str, incarnation: str, prepare: Prepare[P], actor: str) -> None:
        self.graph = graph
        self.branch = branch
        self.incarnation = incarnation
        self.prepare = prepare
        self.actor = actor
        self.previous: CommitPlan[P] | None = None

    def run(self) -> WriteResult[P]:
        """One attempt; ends with :class:`NoEffectConflict` when it must be run again."""
        with self._reading():
            snapshot = self.graph.manifest.snapshot(self.branch)
            refuse_foreign_base(self.graph, snapshot)
            plan = self._plan(snapshot)
            if not plan.writes and not plan.publish_empty:
                return WriteResult(plan, None)
            failpoint("write.after_prepare")
            writes = sorted(plan.writes, key=lambda w: w.table_key)
            verdict = pins.check_pins(self.graph.store, self.graph.manifest, snapshot, [w.table_key for w in writes])
        if verdict.action != "clean":
            with self._reading():  # a step of its own: nothing of this attempt is armed
                _act_on_pins(self.graph, self.branch, verdict, self.actor)
        operation_id = new_ulid()
        target = lance_branch_name(self.branch)
        tables = [_intent_table(snapshot.table(w.table_key), target) for w in writes]
        recovery.arm(self.graph.store, self._intent(operation_id, snapshot, tables))
        try:
            failpoint("write.after_arm")
            _require_incarnation(self.graph, self.branch, self.incarnation, operation_id)
            entries = apply_effects(self.graph, snapshot, writes, tables, operation_id)
            published = publish(self.graph, snapshot, entries, operation_id, plan, self.actor)
            failpoint("write.after_publish")
            recovery.disarm(self.graph.store, operation_id)
        except BaseException:
            recovery.abandon(operation_id)  # given up with the intent kept: recovery may resolve it now
            raise
        return WriteResult(plan, published)

    def _plan(self, snapshot: BranchSnapshot) -> CommitPlan[P]:
        plan = self.prepare(snapshot, self.previous)
        if not plan.parents or plan.base_head != snapshot.head.commit_id:
            raise Internal(f"a commit plan's first parent must be the head it was prepared on ({snapshot.head.commit_id})")
        self.previous = plan
        return plan

    def _intent(self, operation_id: str, snapshot: BranchSnapshot, tables: list[IntentTable]) -> WriteIntent:
        return WriteIntent(
            operation_id=operation_id,
            graph_branch=self.branch,
            graph_incarnation=self.incarnation,
            base_manifest_version=snapshot.manifest_version,
            base_commit_id=snapshot.head.commit_id,
            tables=tables,
            actor=self.actor,
            program=self.graph.profile.program,
            host=this_host(),
            pid=os.getpid(),
            process_start=process_start_marker(os.getpid()),
            created_at=now_ms(),
        )

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Lance's "not found" when the branch's images were deleted meanwhile: typed if the
        branch went away (:func:`_require_incarnation`), else passed on."""
        try:
            yield
        except (ValueError, OSError):
            _require_incarnation(self.graph, self.branch, self.incarnation, None)
            raise


def _act_on_pins(graph: Graph, branch: str, verdict: PinVerdict, actor: str) -> NoReturn:
    """Do what a pin verdict other than ``clean`` asks for; ends by asking for a fresh attempt
    (:class:`NoEffectConflict`), or with ``table_drift``."""
    if verdict.action == "refresh":
        raise NoEffectConflict("the snapshot is stale: a concurrent commit was published")
    if verdict.action == "wait":
        raise NoEffectConflict("waiting for a concurrent commit in flight on the same table")
    if verdict.action == "resolve":
        recovery.resolve_intents(graph.store, graph.manifest)
        raise NoEffectConflict("resolved an interrupted commit on the same table")
    try:
        adopted, drifted = drift.settle(
            graph.store,
            graph.manifest,
            branch,
            actor=actor,
            require_fencing=graph.profile.router.with_pk,
            table_keys=list(verdict.table_keys),
            include_forks=True,
        )
    except CommitConflict as conflict:
        raise NoEffectConflict(str(conflict)) from conflict
    if drifted:
        raise drift.drift_error(graph.store.uri, drifted)
    if adopted:
        raise NoEffectConflict("adopted out-of-band commits that change no row")
    raise NoEffectConflict("the table moved while it was classified (a concurrent commit); looking again")


def _require_incarnation(graph: Graph, branch: str, incarnation: str, operation_id: str | None) -> None:
    """The branch is still the incarnation the commit read, and no live process is deleting it.

    Called once the intent is armed (``operation_id``; disarmed here on refusal, nothing was
    written): a deleter that started before this check is seen here, one that starts after it
    sees the armed intent and refuses (:mod:`omnigraph.engine.reconcile.branch_guard`). Called with None after a
    failed read: the error is typed if the branch went away under it.
    """
    if branch == MAIN:
        return
    holder = branch_guard.live_holder(graph.store, branch) if operation_id is not None else None
    deleting = holder is not None and holder.operation == "delete"
    now = graph.manifest.incarnation(branch)
    if not deleting and now == incarnation:
        return
    if operation_id is not None:
        recovery.disarm(graph.store, operation_id)
    if deleting:
        assert holder is not None
        raise branch_guard.busy_error(branch, holder, "this write")
    if now is None:
        raise NotFound(
            f"branch {branch!r} was deleted while this write was being prepared; nothing was written",
            {"branch": branch},
        )
    raise ReadSetConflict(
        f"branch {branch!r} was deleted and created again while this write was being prepared; nothing "
        "was written (the new branch of that name is another branch: retry against it if that is meant)",
        {"member": f"branch {branch}", "expected": f"incarnation {incarnation}", "actual": f"incarnation {now}"},
    )


def _intent_table(entry: TableEntry, target: str | None) -> IntentTable:
    return IntentTable(
        table_key=entry.table_key,
        table_path=entry.table_path,
        branch_before=entry.table_branch,
        version_before=entry.table_version,
        target_branch=target,
        fork_planned=entry.table_branch != target,
    )
