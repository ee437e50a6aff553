"""Write-path recovery intents: ``__recovery/<operation-id>.json`` documents.

An intent is armed (create-if-absent) before a graph commit's first effect and deleted after its
publish. It records what the commit may change, so that a later read-write open can tell a
published commit from an interrupted one and undo the latter's unpublished table effects.
Resolution records are written to ``__recovery/log/<operation-id>.json``.
"""

from __future__ import annotations

import os
import threading
from typing import Literal

from pydantic import BaseModel, ConfigDict

from omnigraph.engine.errors import Internal
from omnigraph.engine.storage.canonical_json import canonical_json
from omnigraph.engine.storage.names import RECOVERY_DIR
from omnigraph.engine.storage.process import process_is_alive, process_start_marker, this_host
from omnigraph.engine.storage.store import GraphStore

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
    return f"{RECOVERY_DIR}/{operation_id}.json"


_IN_FLIGHT: set[str] = set()
"""Operation ids of this process's commits that are still running (armed, not yet disarmed or
given up): an intent of this process is its writer's live commit only while it is listed here."""
_IN_FLIGHT_LOCK = threading.Lock()


def arm(store: GraphStore, intent: WriteIntent) -> None:
    """Persist ``intent`` (listed as in flight in this process first); an existing intent with
    the same id is an internal error."""
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
    """This process gave up commit ``operation_id`` with its intent kept (or never had it in
    flight): from now on its intent is resolved like a dead writer's, by the next read-write open
    or pin check of this process, or by another process once this one has exited."""
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
    """True if the intent's commit is in flight: its writer is a live process on this host and,
    when that is this process, the commit has not been given up (:func:`abandon`)."""
    if intent.host == this_host() and intent.pid == os.getpid() and intent.process_start == process_start_marker(intent.pid):
        with _IN_FLIGHT_LOCK:
            return intent.operation_id in _IN_FLIGHT
    return process_is_alive(intent.host, intent.pid, intent.process_start)


def record_resolution(store: GraphStore, record: RecoveryRecord) -> None:
    store.put_if_absent(f"{RECOVERY_LOG_DIR}/{record.operation_id}.json", canonical_json(record))
