"""Write intents under ``__recovery/``, and the resolution of interrupted graph commits on a read-write open.

An intent (``__recovery/<operation-id>.json``) is armed (create-if-absent, :func:`arm`) before a
graph commit's first effect and deleted after its publish (:func:`disarm`). It records what the
commit may change, so that a later read-write open can tell a published commit from an
interrupted one and undo the latter's unpublished table effects. Resolution records are written
to ``__recovery/log/<operation-id>.json``.

:func:`resolve_intents` resolves every armed intent whose writer is not a live process on this
host, holding the guard of the intent's graph branch (:mod:`omnigraph.engine.reconcile.branch_guard`;
a branch whose guard a live process holds is left for a later open):

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

Each resolution is recorded in ``__recovery/log/`` before the intent is deleted. Intents of live
writers on this host, and dead intents touching a table a live writer's commit also touches, are
left alone; the support boundary is one writer host per graph.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import replace
from itertools import groupby
from typing import Literal

from pydantic import BaseModel, ConfigDict

from omnigraph.engine.errors import Internal
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import MAIN, TableEntry, now_ms
from omnigraph.engine.reconcile import branch_guard
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


def owner_is_alive(intent: WriteIntent) -> bool:
    """True if the intent's commit is in flight.

    Its writer is a live process on this host and, when that is this process, the commit has not
    been given up (:func:`abandon`).
    """
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
    return any((table_path, branch) in touched_tables(intent) for intent in list_intents(store) if owner_is_alive(intent))


def _forget_dead_branch(store: GraphStore, manifest: Manifest, intent: WriteIntent) -> list[RecoveredTable]:
    """The intent's branch incarnation is gone: its unreferenced planned forks go too."""
    outcomes = []
    for table in sorted(intent.tables, key=lambda t: t.table_key):
        if table.fork_planned:
            outcomes.append(_delete_dead_fork(store, manifest, table))
        else:
            outcomes.append(RecoveredTable(table_key=table.table_key, action="unchanged", table_branch=table.target_branch))
    return outcomes


def _roll_back(store: GraphStore, manifest: Manifest, intent: WriteIntent) -> list[RecoveredTable]:
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
        if head == entry.table_version:
            outcomes.append(RecoveredTable(table_key=table.table_key, action="unchanged", table_branch=table.target_branch))
            continue
        dataset = open_pinned(store, entry.image.on(table.target_branch))
        dataset.restore()  # type: ignore[no-untyped-call]  # lance's LanceDataset.restore has no annotations
        restored = latest_version(store, entry.table_path, table.target_branch)
        republish.append(replace(entry, table_version=restored))
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
    """Resolve one dead intent; the caller holds its branch's guard."""
    if _incarnation_gone(manifest, intent):
        return _record(store, intent, "branch_gone", _forget_dead_branch(store, manifest, intent))
    if _was_published(manifest, intent):
        return _record(store, intent, "published", [])
    return _record(store, intent, "rolled_back", _roll_back(store, manifest, intent))


def _resolvable(pending: list[WriteIntent]) -> list[WriteIntent]:
    """Dead intents that touch no table a live intent touches."""
    live = [intent for intent in pending if owner_is_alive(intent)]
    busy = set().union(*(touched_tables(intent) for intent in live)) if live else set()
    return [intent for intent in pending if intent not in live and not touched_tables(intent) & busy]


def resolve_intents(store: GraphStore, manifest: Manifest) -> list[RecoveryRecord]:
    """Resolve every interrupted commit (see the module docstring).

    Returns what was done, by branch name then operation id.
    """
    records: list[RecoveryRecord] = []
    by_branch = sorted(_resolvable(list_intents(store)), key=lambda i: (i.graph_branch, i.operation_id))
    for branch, _ in groupby(by_branch, key=lambda i: i.graph_branch):
        attempt = branch_guard.try_acquire(store, branch, "recover")
        if attempt.held is None:
            continue  # a live process is creating, deleting or recovering this branch
        try:
            interrupted = attempt.interrupted()
            if interrupted is not None:
                complete_interrupted(store, manifest, interrupted)
            # Listed again under the guard: the previous holder may have resolved some meanwhile.
            for intent in _resolvable(list_intents(store)):
                if intent.graph_branch == branch:
                    records.append(_resolve(store, manifest, intent))
        finally:
            branch_guard.release(store, attempt.held)
    return records


def complete_interrupted(store: GraphStore, manifest: Manifest, record: branch_guard.GuardRecord) -> None:
    """Finish what a process that died holding a branch's guard left; the caller holds the guard now.

    If the branch does not exist (a delete that removed it, a create that had not made it yet),
    delete the table forks of its name that no live branch pins, and what a fork or a delete of
    one killed inside Lance left (data without a ref). An existing branch is left as it is.
    """
    if record.operation == "recover" or record.branch in manifest.branches():
        return
    for entry in manifest.snapshot(MAIN).tables.values():
        if not pinned_anywhere(manifest, entry.table_path, record.branch):
            delete_branch_if_present(store, entry.table_path, record.branch)
            remove_unreferenced_fork(store, entry.table_path, record.branch)


def finish_interrupted_branch_operations(store: GraphStore, manifest: Manifest) -> list[str]:
    """Take over every guard whose holder died and complete its operation; the branch names."""
    finished = []
    for record in branch_guard.abandoned(store):
        attempt = branch_guard.try_acquire(store, record.branch, "recover")
        if attempt.held is None:
            continue
        try:
            interrupted = attempt.interrupted()
            if interrupted is not None:
                complete_interrupted(store, manifest, interrupted)
                finished.append(record.branch)
        finally:
            branch_guard.release(store, attempt.held)
    return sorted(finished)


def discard_for_deletion(store: GraphStore, dead: Iterable[WriteIntent]) -> list[RecoveryRecord]:
    """Resolve dead intents of a branch that has just been deleted with its table forks.

    The deleter holds the branch's guard; the intents' effects went with the branch.
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
