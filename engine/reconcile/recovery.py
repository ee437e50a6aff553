"""Write intents under ``__recovery/``, and the resolution of interrupted graph commits on a read-write open.

An intent (``__recovery/<operation-id>.json``) is armed (create-if-absent, :func:`arm`) before a
graph commit's first effect and deleted after its publish (:func:`disarm`). It records what the
commit may change and the fencing token of the branch lease its writer holds
(:mod:`omnigraph.engine.reconcile.branch_lease`), so that a later holder of that lease can tell a
published commit from an interrupted one and undo the latter's unpublished table effects.
Resolution records are written to ``__recovery/log/<operation-id>.json``.

An intent is in flight (:func:`owner_is_alive`) while the lease of its branch is still held, not
lapsed, under the intent's token; an intent without a token (written by a writer that takes no
lease: the format-4 writer) while its writer is a live process on this host.
:func:`resolve_intents` resolves every intent that is not in flight, branch by branch, holding
that branch's lease (a branch whose lease a live holder keeps is left for later; a writer
resolves the intents of its own branch under the lease it holds, :func:`resolve_branch`):

* if the graph branch of that name is gone, or is another incarnation than the one the intent
  recorded (deleted and created again), the commit died with its branch: only forks it planned
  that no live branch pins, forked from exactly the image the intent recorded, are deleted (and
  the leftovers of one it was killed inside, data without a ref);
  nothing is restored and no manifest is published (DESIGN section 5: an intent is never
  applied to a new branch of the same name);
* if the commit id appears as the head of its branch at a manifest version after the intent's
  base, the commit was published and only the intent is left: delete it;
* otherwise undo the commit's unpublished effects, all-or-nothing, on exactly the table branches
  the intent targeted: a planned fork the manifest does not pin is deleted; a target table branch
  the manifest pins whose HEAD moved past the pinned version is restored to that version (a new
  Lance version with the pinned contents) and the manifest is republished to point at the
  restored version without moving the head (Lance refuses writes based on a version older than
  a restore, so the pin must follow). A table the branch now pins on another table branch is
  not touched.

When the intent's writer may still be running (it is not provably a gone process on this host:
its lease lapsed by expiry), the roll-back restores every table the intent targets that the
branch pins, moved or not: Lance refuses a later write based on a version older than a restore,
so an effect the paused writer attempts after waking up is refused by the storage itself.

Taking over a lapsed lease of a writer or a recovery starts with :func:`fence_branch`: the
branch's head row is published again, so that a publish prepared under an older token conflicts
with it and, on its next look, finds the lease gone.

Each resolution is recorded in ``__recovery/log/`` before the intent is deleted.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Literal

import msgspec
from pydantic import BaseModel, ConfigDict

from omnigraph.engine.door.table_store import CommitConflict
from omnigraph.engine.errors import Internal
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import MAIN, TableEntry, now_ms
from omnigraph.engine.reconcile import branch_lease
from omnigraph.engine.storage.lance_io import (
    delete_branch_if_present,
    latest_version,
    list_branches,
    open_dataset,
    open_pinned,
    remove_unreferenced_fork,
)
from omnigraph.engine.storage.names import RECOVERY_DIR
from omnigraph.engine.storage.process import process_is_alive, process_start_marker, this_host
from omnigraph.engine.storage.store import GraphStore, canonical_json

RECOVERY_LOG_DIR = f"{RECOVERY_DIR}/log"


class IntentTable(BaseModel):
    """One table the commit may change, as it was before the commit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    table_key: str
    table_path: str
    branch_before: str | None
    version_before: int
    target_branch: str | None
    fork_planned: bool


class WriteIntent(BaseModel):
    """A graph commit in flight.

    ``graph_incarnation`` is the Lance branch identifier of the graph branch's ``__manifest``
    branch when the commit read its snapshot (``main`` for main): recovery acts on the intent's
    tables only while the branch of that name is still that incarnation (DESIGN section 5).
    None on intents written before incarnations were recorded: the branch is then taken by name.
    ``lease_token`` is the fencing token of the branch lease the writer held (None: a writer that
    takes no lease).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    operation_id: str
    graph_branch: str
    graph_incarnation: str | None = None
    base_manifest_version: int
    base_commit_id: str
    tables: list[IntentTable]
    actor: str
    program: str
    host: str
    pid: int
    process_start: str | None
    created_at: int
    lease_token: int | None = None


class RecoveredTable(BaseModel):
    """What the resolution of an interrupted commit did to one of its tables."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    table_key: str
    action: Literal["restored", "fork_deleted", "unchanged"]
    table_branch: str | None
    restored_to_version: int | None = None
    new_version: int | None = None


class RecoveryRecord(BaseModel):
    """How an interrupted commit was resolved."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    operation_id: str
    graph_branch: str
    outcome: Literal["published", "rolled_back", "branch_gone", "branch_deleted"]
    tables: list[RecoveredTable]
    resolved_by_host: str
    resolved_by_pid: int
    resolved_at: int


def intent_path(operation_id: str) -> str:
    """The root-relative path of the intent of ``operation_id``."""
    return f"{RECOVERY_DIR}/{operation_id}.json"


_IN_FLIGHT: set[str] = set()
"""Operation ids of this process's commits that are still running (armed, not yet disarmed or
given up): an intent of this process is its writer's live commit only while it is listed here."""
_IN_FLIGHT_LOCK = threading.Lock()


def arm(store: GraphStore, intent: WriteIntent) -> None:
    """Persist ``intent``, listed as in flight in this process first.

    An existing intent with the same id is an internal error.
    """
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT.add(intent.operation_id)
    try:
        created = store.put_if_absent(intent_path(intent.operation_id), canonical_json(intent))
    except BaseException:
        abandon(intent.operation_id)
        raise
    if not created:
        abandon(intent.operation_id)
        raise Internal(f"recovery intent {intent.operation_id} already exists")


def disarm(store: GraphStore, operation_id: str) -> None:
    """Delete the intent of ``operation_id``; it is no longer in flight in this process."""
    store.delete(intent_path(operation_id))
    abandon(operation_id)


def abandon(operation_id: str) -> None:
    """Record that this process gave up commit ``operation_id`` with its intent kept (or never had it in flight).

    From now on its intent is resolved like a dead writer's, by the next read-write open or pin
    check of this process, or by another process once this one has exited.
    """
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT.discard(operation_id)


def list_intents(store: GraphStore) -> list[WriteIntent]:
    """Every armed intent, ordered by operation id (ULIDs order by time).

    An intent listed but gone when read was disarmed meanwhile by its (live) writer: skipped.
    """
    intents = []
    for name in store.list(RECOVERY_DIR):
        if name.endswith(".json"):
            try:
                raw = store.read_bytes(f"{RECOVERY_DIR}/{name}")
            except FileNotFoundError:
                continue
            intents.append(WriteIntent.model_validate_json(raw))
    return sorted(intents, key=lambda intent: intent.operation_id)


def owner_is_alive(store: GraphStore, intent: WriteIntent) -> bool:
    """True if the intent's commit is in flight (see the module docstring).

    With a lease token: the branch's lease is held under that token and has not lapsed. Without:
    its writer is a live process on this host and, when that is this process, the commit has not
    been given up (:func:`abandon`).
    """
    if intent.lease_token is not None:
        current = branch_lease.latest(store, intent.graph_branch)
        return (
            current is not None
            and (current.sequence, current.host, current.pid) == (intent.lease_token, intent.host, intent.pid)
            and current.held_by_live_holder()
        )
    if intent.host == this_host() and intent.pid == os.getpid() and intent.process_start == process_start_marker(intent.pid):
        with _IN_FLIGHT_LOCK:
            return intent.operation_id in _IN_FLIGHT
    return process_is_alive(intent.host, intent.pid, intent.process_start)


def record_resolution(store: GraphStore, record: RecoveryRecord) -> None:
    """Write ``record`` to ``__recovery/log/<operation-id>.json`` (create-if-absent: a first record stays)."""
    store.put_if_absent(f"{RECOVERY_LOG_DIR}/{record.operation_id}.json", canonical_json(record))


Outcome = Literal["published", "rolled_back", "branch_gone", "branch_deleted"]


def _was_published(manifest: Manifest, intent: WriteIntent) -> bool:
    for version in manifest.head_versions(intent.graph_branch):
        if version > intent.base_manifest_version and manifest.snapshot(intent.graph_branch, version).head.commit_id == intent.operation_id:
            return True
    return False


def pinned_anywhere(manifest: Manifest, table_path: str, table_branch: str | None) -> bool:
    """True if any live graph branch pins an image of ``table_branch`` of the table at ``table_path``."""
    for snapshot in manifest.snapshots().values():
        for entry in snapshot.tables.values():
            if entry.table_path == table_path and entry.table_branch == table_branch:
                return True
    return False


def _delete_dead_fork(store: GraphStore, manifest: Manifest, table: IntentTable) -> RecoveredTable:
    """Delete the fork ``table`` planned if it is exactly that fork and nothing pins it.

    A fork the dead writer was killed inside (its data without a ref) has its leftovers removed,
    unless a live writer's intent targets the same table branch.
    """
    name = str(table.target_branch)
    fork = list_branches(open_dataset(store, table.table_path)).get(name)
    if fork is None:
        deleted = not _live_intent_targets(store, table.table_path, name) and remove_unreferenced_fork(store, table.table_path, name)
    else:
        deleted = (fork.parent_branch, fork.parent_version) == (table.branch_before, table.version_before) and not (
            pinned_anywhere(manifest, table.table_path, table.target_branch)
        )
        if deleted:
            open_dataset(store, table.table_path).branches.delete(name)
    return RecoveredTable(table_key=table.table_key, action="fork_deleted" if deleted else "unchanged", table_branch=table.target_branch)


def _live_intent_targets(store: GraphStore, table_path: str, branch: str) -> bool:
    """An intent armed by a live writer targets ``branch`` of ``table_path`` (its fork may be in flight)."""
    return any((table_path, branch) in touched_tables(intent) for intent in list_intents(store) if owner_is_alive(store, intent))


def _forget_dead_branch(store: GraphStore, manifest: Manifest, intent: WriteIntent) -> list[RecoveredTable]:
    """The intent's branch incarnation is gone: its unreferenced planned forks go too."""
    outcomes = []
    for table in sorted(intent.tables, key=lambda t: t.table_key):
        if table.fork_planned:
            outcomes.append(_delete_dead_fork(store, manifest, table))
        else:
            outcomes.append(RecoveredTable(table_key=table.table_key, action="unchanged", table_branch=table.target_branch))
    return outcomes


def _writer_may_run(intent: WriteIntent) -> bool:
    """False only if the intent's writer is provably gone: a process on this host that no longer runs."""
    return intent.host != this_host() or process_is_alive(intent.host, intent.pid, intent.process_start)


def _roll_back(store: GraphStore, manifest: Manifest, intent: WriteIntent) -> list[RecoveredTable]:
    """Undo the intent's unpublished effects; restore every pinned target table if its writer may still run."""
    fence_all = intent.lease_token is not None and _writer_may_run(intent)
    snapshot = manifest.snapshot(intent.graph_branch)
    outcomes: list[RecoveredTable] = []
    republish: list[TableEntry] = []
    for table in sorted(intent.tables, key=lambda t: t.table_key):
        entry = snapshot.tables.get(table.table_key)
        if entry is None:
            continue
        if entry.table_branch != table.target_branch:
            if table.fork_planned:
                outcomes.append(_delete_dead_fork(store, manifest, table))
            else:
                outcomes.append(RecoveredTable(table_key=table.table_key, action="unchanged", table_branch=table.target_branch))
            continue
        head = latest_version(store, entry.table_path, table.target_branch)
        if head == entry.table_version and not fence_all:
            outcomes.append(RecoveredTable(table_key=table.table_key, action="unchanged", table_branch=table.target_branch))
            continue
        dataset = open_pinned(store, entry.image.on(table.target_branch))
        dataset.restore()  # type: ignore[no-untyped-call]  # lance's LanceDataset.restore has no annotations
        restored = latest_version(store, entry.table_path, table.target_branch)
        republish.append(msgspec.structs.replace(entry, table_version=restored))
        outcomes.append(
            RecoveredTable(
                table_key=table.table_key,
                action="restored",
                table_branch=table.target_branch,
                restored_to_version=entry.table_version,
                new_version=restored,
            )
        )
    if republish:
        manifest.publish(snapshot, republish, head=None)
    return outcomes


def touched_tables(intent: WriteIntent) -> set[tuple[str, str | None]]:
    """(table path, Lance table branch) pairs a commit may change."""
    return {(table.table_path, table.target_branch) for table in intent.tables}


def _incarnation_gone(manifest: Manifest, intent: WriteIntent) -> bool:
    current = manifest.incarnation(intent.graph_branch)
    return current is None or (intent.graph_incarnation is not None and current != intent.graph_incarnation)


def _record(store: GraphStore, intent: WriteIntent, outcome: Outcome, tables: list[RecoveredTable]) -> RecoveryRecord:
    """Log how ``intent`` was resolved, then delete it."""
    record = RecoveryRecord(
        operation_id=intent.operation_id,
        graph_branch=intent.graph_branch,
        outcome=outcome,
        tables=tables,
        resolved_by_host=this_host(),
        resolved_by_pid=os.getpid(),
        resolved_at=now_ms(),
    )
    record_resolution(store, record)
    disarm(store, intent.operation_id)
    return record


def _resolve(store: GraphStore, manifest: Manifest, intent: WriteIntent) -> RecoveryRecord:
    """Resolve one intent that is not in flight; the caller holds its branch's lease."""
    if _incarnation_gone(manifest, intent):
        return _record(store, intent, "branch_gone", _forget_dead_branch(store, manifest, intent))
    if _was_published(manifest, intent):
        return _record(store, intent, "published", [])
    return _record(store, intent, "rolled_back", _roll_back(store, manifest, intent))


def _resolvable(store: GraphStore, pending: list[WriteIntent]) -> list[WriteIntent]:
    """Intents not in flight that touch no table an intent in flight touches."""
    live = [intent for intent in pending if owner_is_alive(store, intent)]
    busy = set().union(*(touched_tables(intent) for intent in live)) if live else set()
    return [intent for intent in pending if intent not in live and not touched_tables(intent) & busy]


def resolve_intents(store: GraphStore, manifest: Manifest) -> list[RecoveryRecord]:
    """Resolve every interrupted commit (see the module docstring).

    Returns what was done, by branch name then operation id.
    """
    records: list[RecoveryRecord] = []
    branches = sorted({intent.graph_branch for intent in _resolvable(store, list_intents(store))})
    for branch in branches:
        with branch_lease.holding_if_free(store, branch, "recover", on_taken_over=_taking_over(store, manifest)) as lease:
            if lease is not None:  # else a live holder is writing, creating, deleting or recovering this branch
                records += resolve_branch(store, manifest, branch)
    return records


def _taking_over(store: GraphStore, manifest: Manifest) -> Callable[[branch_lease.Lease, branch_lease.LeaseRecord], None]:
    return lambda _lease, previous: take_over(store, manifest, previous)


def resolve_branch(store: GraphStore, manifest: Manifest, branch: str) -> list[RecoveryRecord]:
    """Resolve the intents of ``branch`` that are not in flight; the caller holds the branch's lease.

    Listed under the lease: a previous holder may have resolved some meanwhile.
    """
    return [_resolve(store, manifest, intent) for intent in _resolvable(store, list_intents(store)) if intent.graph_branch == branch]


def resolve_own(store: GraphStore, manifest: Manifest, operation_id: str) -> RecoveryRecord | None:
    """Roll back this process's own commit ``operation_id`` (the caller holds its branch's lease); None if no intent."""
    try:
        intent = WriteIntent.model_validate_json(store.read_bytes(intent_path(operation_id)))
    except FileNotFoundError:
        return None
    abandon(operation_id)
    return _resolve(store, manifest, intent)


def take_over(store: GraphStore, manifest: Manifest, previous: branch_lease.LeaseRecord) -> None:
    """What the new holder of a lease taken over from the lapsed holder ``previous`` does first.

    A create or delete it interrupted is completed (:func:`complete_interrupted`); after a write,
    a recovery or a schema change the branch is fenced (:func:`fence_branch`), also when that
    holder is provably gone: it may itself have taken the lease over from a holder that may still
    run, and died before its own fence. A failure here leaves the lease to lapse
    (:func:`omnigraph.engine.reconcile.branch_lease.holding`), so the next holder fences again.
    """
    if previous.operation in ("create", "delete"):
        complete_interrupted(store, manifest, previous)
    elif previous.branch in manifest.branches():
        fence_branch(manifest, previous.branch)


def holding_branch(
    store: GraphStore, manifest: Manifest, branch: str, wanted: str, *, wait_seconds: float
) -> AbstractContextManager[branch_lease.Lease]:
    """Hold ``branch``'s lease for a commit to it (``wanted`` names it in a refusal), taking a lapsed one over with :func:`take_over`."""
    return branch_lease.holding(store, branch, "write", wanted, wait_seconds=wait_seconds, on_taken_over=_taking_over(store, manifest))


def fence_branch(manifest: Manifest, branch: str) -> int:
    """Publish ``branch``'s head row again, unchanged; the manifest version of that publish.

    Every content publish rewrites the head row, so any publish prepared on an earlier snapshot
    of the branch now conflicts: a writer whose lease was taken over cannot publish without
    reading the branch again, and then it checks its lease (:mod:`omnigraph.engine.ops.write`).
    """
    while True:
        snapshot = manifest.snapshot(branch)
        try:
            return manifest.publish(snapshot, [], snapshot.head)
        except CommitConflict:
            continue  # a publish landed first (prepared before the lease moved): fence on top of it


def complete_interrupted(store: GraphStore, manifest: Manifest, record: branch_lease.LeaseRecord) -> None:
    """Finish what a holder that lapsed in a branch create or delete left; the caller holds the lease now.

    If the branch does not exist (a delete that removed it, a create that had not made it yet),
    delete the table forks of its name that no live branch pins, and what a fork or a delete of
    one killed inside Lance left (data without a ref). An existing branch is left as it is.
    """
    if record.operation not in ("create", "delete") or record.branch in manifest.branches():
        return
    for entry in manifest.snapshot(MAIN).tables.values():
        if not pinned_anywhere(manifest, entry.table_path, record.branch):
            delete_branch_if_present(store, entry.table_path, record.branch)
            remove_unreferenced_fork(store, entry.table_path, record.branch)


def finish_interrupted_branch_operations(store: GraphStore, manifest: Manifest) -> list[str]:
    """Take over every lease whose holder lapsed (:func:`take_over`); the branches whose create or delete it completed."""
    finished = []
    for record in branch_lease.lapsed(store):
        with branch_lease.holding_if_free(store, record.branch, "recover", on_taken_over=_taking_over(store, manifest)) as lease:
            if lease is not None and record.operation in ("create", "delete"):
                finished.append(record.branch)
    return sorted(finished)


def discard_for_deletion(store: GraphStore, dead: Iterable[WriteIntent]) -> list[RecoveryRecord]:
    """Resolve dead intents of a branch that has just been deleted with its table forks.

    The deleter holds the branch's lease; the intents' effects went with the branch.
    """
    return [
        _record(
            store,
            intent,
            "branch_deleted",
            [
                RecoveredTable(table_key=t.table_key, action="fork_deleted", table_branch=t.target_branch)
                for t in sorted(intent.tables, key=lambda t: t.table_key)
            ],
        )
        for intent in sorted(dead, key=lambda i: i.operation_id)
    ]
