"""The write protocol: one graph commit = prepare, arm, effects, publish, disarm.

1. Prepare: ``prepare(snapshot)`` validates against the branch snapshot and returns the
   per-table writes (it raises ``key_conflict``/``bad_request``/``resource_limit`` itself).
   Before arming, every table to write must be at the version the manifest pins (no other
   commit's unpublished effects under it): a live writer's commit in flight is waited for, a dead
   writer's is resolved (:mod:`engine.reconcile.recovery`), a stale snapshot is refreshed.
2. Arm: ``__recovery/<op>.json`` (create-if-absent) records every table's state before.
3. Effects, per table in key order: fork the table if the branch inherits it (from exactly the
   pinned version), then one Lance commit through the profile's router, from the pinned version.
4. Publish: one ``__manifest`` commit (table rows + head row) from the snapshot's version.
5. Disarm: delete the intent.

A storage conflict before any table effect deletes the intent and re-runs the whole attempt from
step 1 with a fresh snapshot (bounded, with jittered backoff); a strict insert therefore
re-probes its ids and ends as ``key_conflict`` once a concurrent winner is published, and never
turns into an upsert. A conflict after an effect landed is ``recovery_required`` with the intent
kept. A publish that loses to a concurrent publish (two writers passed the pin check together)
is rebased onto the new head when every table it touched only gained Update/Append commits in
between (its rows are then contained in the newer version); otherwise it is
``recovery_required``. Support boundary: one writer process per graph; concurrent processes are
fenced against duplicate ids, not promised serializable multi-table commits.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, NoReturn

import pyarrow as pa
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential_jitter,
)

from engine.access import writer_audit
from engine.door import CommitConflict, EffectLanded, ExistingKeys, MergeRows
from engine.errors import BadRequest, NotFound, ReadSetConflict, RecoveryRequired
from engine.failpoints import failpoint
from engine.graph import Graph
from engine.manifest import (
    MAIN,
    BranchSnapshot,
    HeadEntry,
    TableEntry,
    lance_branch_name,
    now_ms,
    with_version,
)
from engine.reconcile import IntentTable, PinVerdict, WriteIntent, branch_guard, drift, intents, pins, recovery
from engine.schema.ids import new_ulid
from engine.storage import FORMAT_4, FORMAT_5, ensure_fork, open_dataset, open_pinned
from engine.storage.process import process_start_marker, this_host

WriteKind = Literal["insert", "upsert", "overwrite", "repair", "merge"]
RETRY_SECONDS = 60.0
PUBLISH_ATTEMPTS = 64
_REBASE_SAFE_OPERATIONS = frozenset({"Update", "Append"})


@dataclass(frozen=True)
class TableWrite:
    """Validated rows for one table and how to write them.

    ``repair`` (duplicate repair behind the migration barrier only) first deletes the rows whose
    id is in ``delete_ids`` (and null-id rows if ``delete_null_ids``), then inserts ``rows``.
    ``merge`` (branch merge, ``.gq`` mutations) strict-inserts ``rows``, upserts ``upsert_rows`` and deletes
    ``delete_ids``, each step skipped when empty (:class:`engine.door.MergeRows`). An ``overwrite``
    may give its rows as a ``RecordBatchReader`` (a load streams a large table into its one
    commit); the reader is consumed by the effect, so ``prepare`` makes a new one per attempt.
    """

    table_key: str
    kind: WriteKind
    rows: pa.Table | pa.RecordBatchReader
    delete_ids: tuple[str, ...] = ()
    delete_null_ids: bool = False
    upsert_rows: pa.Table | None = None


@dataclass(frozen=True)
class CommitResult:
    """A published graph commit."""

    commit_id: str
    branch: str
    manifest_version: int
    tables: list[TableEntry]
    parents: tuple[str, ...] = ()


Prepare = Callable[[BranchSnapshot], list[TableWrite]]
HeadFor = Callable[[BranchSnapshot], tuple[tuple[str, ...], str]]
"""``(parents, message)`` of the head row to publish on top of a branch snapshot."""


class _NoEffectConflict(Exception):
    """A storage conflict hit before any table effect: the attempt may be re-prepared."""


def commit(
    graph: Graph,
    branch: str,
    prepare: Prepare,
    *,
    message: str,
    actor: str,
    head_for: HeadFor | None = None,
    publish_empty: bool = False,
) -> CommitResult | None:
    """Run one graph commit on ``branch``; None if ``prepare`` produced no writes.

    ``head_for`` chooses the published head's parents and message (default: the branch head as
    the only parent, and ``message``); it is asked again when the publish is rebased.
    ``publish_empty`` publishes a head-only commit when ``prepare`` produced no writes.
    """
    choose_head: HeadFor = head_for or (lambda base: ((base.head.commit_id,), message))
    if not graph.writable:
        raise BadRequest("the graph was opened read-only")
    retrying = Retrying(
        retry=retry_if_exception_type(_NoEffectConflict),
        stop=stop_after_delay(RETRY_SECONDS),
        wait=wait_exponential_jitter(multiplier=0.02, max=0.5, jitter=0.05),
        reraise=True,
    )
    incarnation = graph.manifest.incarnation(branch)  # every attempt writes to this one or to none
    if incarnation is None:
        graph.manifest.require_branch(branch)  # not_found, unless it was created just now
        incarnation = graph.manifest.incarnation(branch)
        if incarnation is None:
            raise NotFound(f"graph branch {branch!r} does not exist (see `omnigraph branch list`)", {"branch": branch})
    try:
        for attempt in retrying:
            with attempt:
                return _attempt(graph, branch, incarnation, prepare, choose_head, actor, publish_empty)
    except _NoEffectConflict as conflict:
        raise ReadSetConflict(
            f"concurrent writers on branch {branch!r} kept conflicting for {RETRY_SECONDS:.0f}s; "
            "nothing was written, retry the operation",
            {"member": branch, "expected": "no concurrent conflicting commit", "actual": str(conflict)},
        ) from conflict
    return None


def _attempt(
    graph: Graph, branch: str, incarnation: str, prepare: Prepare, head_for: HeadFor, actor: str,
    publish_empty: bool,
) -> CommitResult | None:
    """One try of the protocol on the branch incarnation the commit started on (read before the
    snapshot, so the snapshot is of it or of a later one, which the check after arming refuses)."""
    target = lance_branch_name(branch)
    try:
        snapshot = graph.manifest.snapshot(branch)
        _refuse_foreign_base(graph, snapshot)
        writes = sorted(prepare(snapshot), key=lambda w: w.table_key)
        if not writes and not publish_empty:
            return None
        failpoint("write.after_prepare")
        verdict = pins.check_pins(graph.store, graph.manifest, snapshot, [w.table_key for w in writes])
        if verdict.action != "clean":
            _settle_pins(graph, branch, verdict, actor)
    except (ValueError, OSError):  # Lance's "not found" when the branch's images were deleted meanwhile
        _require_incarnation(graph, branch, incarnation, None)
        raise
    operation_id = new_ulid()
    plan = [_intent_table(snapshot.table(w.table_key), target) for w in writes]
    intent = WriteIntent(
        operation_id=operation_id,
        graph_branch=branch,
        graph_incarnation=incarnation,
        base_manifest_version=snapshot.manifest_version,
        base_commit_id=snapshot.head.commit_id,
        tables=plan,
        actor=actor,
        program=graph.profile.program,
        host=this_host(),
        pid=os.getpid(),
        process_start=process_start_marker(os.getpid()),
        created_at=now_ms(),
    )
    intents.arm(graph.store, intent)
    failpoint("write.after_arm")
    _require_incarnation(graph, branch, incarnation, operation_id)
    entries = _apply_effects(graph, snapshot, writes, plan, operation_id)
    published = _publish(graph, snapshot, entries, operation_id, head_for, actor)
    failpoint("write.after_publish")
    intents.disarm(graph.store, operation_id)
    return published


def _require_incarnation(graph: Graph, branch: str, incarnation: str, operation_id: str | None) -> None:
    """The branch is still the incarnation the commit read, and no live process is deleting it.

    Called once the intent is armed (``operation_id``; disarmed here on refusal, nothing was
    written): a deleter that started before this check is seen here, one that starts after it
    sees the armed intent and refuses (:mod:`engine.reconcile.branch_guard`). Called with None after a
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
        intents.disarm(graph.store, operation_id)
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


def _refuse_foreign_base(graph: Graph, snapshot: BranchSnapshot) -> None:
    """A stamp-5 commit never builds on a head a format-4 writer published after the stamp."""
    if graph.stamp != FORMAT_5 or snapshot.head.writer_format != FORMAT_4:
        return
    foreign = writer_audit.foreign_head(snapshot, graph.manifest.read_fenced_heads())
    if foreign is not None:
        raise writer_audit.foreign_refusal(graph.store.uri, [foreign])


def _settle_pins(graph: Graph, branch: str, verdict: PinVerdict, actor: str) -> NoReturn:
    """Act on a verdict other than ``clean`` (:mod:`engine.reconcile.pins`), as a step of its own
    between two attempts: nothing of the abandoned attempt was armed. Ends by asking for a fresh
    attempt, or with ``table_drift``."""
    if verdict.action == "refresh":
        raise _NoEffectConflict("the snapshot is stale: a concurrent commit was published")
    if verdict.action == "wait":
        raise _NoEffectConflict("waiting for a concurrent commit in flight on the same table")
    if verdict.action == "resolve":
        recovery.resolve_intents(graph.store, graph.manifest)
        raise _NoEffectConflict("resolved an interrupted commit on the same table")
    try:
        adopted, drifted = drift.settle(
            graph.store, graph.manifest, branch, actor=actor, require_fencing=graph.profile.router.with_pk,
            table_keys=list(verdict.table_keys), include_forks=True,
        )
    except CommitConflict as conflict:
        raise _NoEffectConflict(str(conflict)) from conflict
    if drifted:
        raise drift.drift_error(graph.store.uri, drifted)
    if adopted:
        raise _NoEffectConflict("adopted out-of-band commits that change no row")
    raise _NoEffectConflict("the table moved while it was classified (a concurrent commit); looking again")


def _intent_table(entry: TableEntry, target: str | None) -> IntentTable:
    return IntentTable(
        table_key=entry.table_key,
        table_path=entry.table_path,
        branch_before=entry.table_branch,
        version_before=entry.table_version,
        target_branch=target,
        fork_planned=entry.table_branch != target,
    )


def _apply_effects(
    graph: Graph, snapshot: BranchSnapshot, writes: list[TableWrite], plan: list[IntentTable], operation_id: str
) -> list[TableEntry]:
    store, router = graph.store, graph.profile.router
    entries: list[TableEntry] = []
    for write, table in zip(writes, plan, strict=True):
        entry = snapshot.table(write.table_key)
        try:
            if table.fork_planned:
                ensure_fork(store, entry.table_path, str(table.target_branch), entry.table_branch, entry.table_version, operation_id)
                failpoint("write.after_fork")
            dataset = open_pinned(store, entry.image.on(table.target_branch))
            if router.check_writable is not None:
                router.check_writable(dataset, entry.table_path)
            if write.kind == "insert":
                version = router.strict_insert(dataset, write.rows)
            elif write.kind == "upsert":
                version = router.upsert(dataset, write.rows)
            elif write.kind == "merge":
                changes = MergeRows(write.table_key, write.rows, write.upsert_rows, write.delete_ids)
                version = router.merge(dataset, changes, lambda: failpoint("write.after_merge_step"))
            elif write.kind == "repair":
                version = router.repair(dataset, list(write.delete_ids), write.delete_null_ids, write.rows)
            else:
                schema = graph.catalog.table(write.table_key).arrow_schema(with_pk=router.with_pk)
                version = router.overwrite(dataset, write.rows, schema)
        except EffectLanded as landed:
            raise RecoveryRequired(
                operation_id,
                f"{write.table_key}: {landed}; resolve the commit with `{drift.recover_command(store.uri)}`",
                table_key=write.table_key,
            ) from landed
        except (CommitConflict, ExistingKeys) as conflict:
            if entries:
                raise RecoveryRequired(
                    operation_id,
                    f"a concurrent commit conflicted on {write.table_key} after earlier tables of this "
                    f"commit landed; resolve it with `{drift.recover_command(store.uri)}` before retrying",
                    table_key=write.table_key,
                ) from conflict
            intents.disarm(store, operation_id)
            raise _NoEffectConflict(str(conflict)) from conflict
        # Merges advance the dataset object in place; writers that return a new dataset do not.
        written = dataset if dataset.version == version else open_pinned(store, entry.image.on(table.target_branch).at(version))
        rows = written.count_rows()
        entries.append(with_version(entry, table.target_branch, version, rows))
        failpoint("write.after_effect")
    return entries


def _publish(
    graph: Graph, snapshot: BranchSnapshot, entries: list[TableEntry], operation_id: str, head_for: HeadFor, actor: str
) -> CommitResult:
    parents, message = head_for(snapshot)
    head = HeadEntry(
        operation_id, parents, actor, message, now_ms(),
        writer_program=graph.profile.program, writer_format=graph.profile.init_stamp,
    )
    base = snapshot
    for _ in range(PUBLISH_ATTEMPTS):
        try:
            version = graph.manifest.publish(base, entries, head)
        except CommitConflict:
            base = graph.manifest.snapshot(snapshot.branch)
            _refuse_foreign_base(graph, base)
            entries = [_rebase_entry(graph, ours, base, operation_id) for ours in entries]
            parents, message = head_for(base)
            head = replace(head, parents=parents, message=message)
            continue
        return CommitResult(operation_id, snapshot.branch, version, entries, head.parents)
    raise RecoveryRequired(
        operation_id,
        f"publishing to branch {snapshot.branch!r} kept losing to concurrent publishes; resolve the "
        f"commit with `{drift.recover_command(graph.store.uri)}`",
    )


def _rebase_entry(graph: Graph, ours: TableEntry, fresh: BranchSnapshot, operation_id: str) -> TableEntry:
    theirs = fresh.table(ours.table_key)
    if theirs.table_branch != ours.table_branch:
        # The fresh manifest still pins the inherited image: our fork is the branch's first own image.
        return ours
    low, high = sorted((ours.table_version, theirs.table_version))
    dataset = open_dataset(graph.store, ours.table_path, ours.table_branch)
    for version in range(low + 1, high + 1):
        operation = drift.operation_name(dataset, version)
        if operation not in _REBASE_SAFE_OPERATIONS:
            raise RecoveryRequired(
                operation_id,
                f"{ours.table_key} gained a {operation} commit (v{version}) during this commit; its "
                "rows may not be visible, so the commit was not published; resolve it with "
                f"`{drift.recover_command(graph.store.uri)}`",
                table_key=ours.table_key,
            )
    return ours if ours.table_version >= theirs.table_version else theirs
