"""Write-path recovery intents: ``__recovery/<operation-id>.json`` documents.

An intent is armed (create-if-absent) before a graph commit's first effect and deleted after its
publish. It records what the commit may change, so that a later read-write open can tell a
published commit from an interrupted one and undo the latter's unpublished table effects.
Resolution records are written to ``__recovery/log/<operation-id>.json``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from engine.errors import Internal
from engine.storage import RECOVERY_DIR, GraphStore, canonical_json
from engine.storage.process import process_is_alive

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


def arm(store: GraphStore, intent: WriteIntent) -> None:
    """Persist ``intent``; an existing intent with the same id is an internal error."""
    if not store.put_if_absent(intent_path(intent.operation_id), canonical_json(intent)):
        raise Internal(f"recovery intent {intent.operation_id} already exists")


def disarm(store: GraphStore, operation_id: str) -> None:
    store.delete(intent_path(operation_id))


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
    """True if the intent's writer is a live process on this host (its commit is in flight)."""
    return process_is_alive(intent.host, intent.pid, intent.process_start)


def record_resolution(store: GraphStore, record: RecoveryRecord) -> None:
    store.put_if_absent(f"{RECOVERY_LOG_DIR}/{record.operation_id}.json", canonical_json(record))
