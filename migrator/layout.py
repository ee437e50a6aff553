"""Where a migration keeps its claim, ledger and unit sidecars under the graph root."""

from __future__ import annotations

from omnigraph.engine.storage.names import CLAIM_PATH, MIGRATION_DIR
from omnigraph.engine.storage.store import GraphStore

__all__ = ["CLAIM_OPERATION", "CLAIM_PATH", "ledger_dir", "migration_ids", "sidecar_path", "units_dir"]

CLAIM_OPERATION = "fencing-migration"


def ledger_dir(migration_id: str) -> str:
    """The directory of the migration's ledger records."""
    return f"{MIGRATION_DIR}/{migration_id}/ledger"


def units_dir(migration_id: str) -> str:
    """The directory of the migration's unit sidecars."""
    return f"{MIGRATION_DIR}/{migration_id}/units"


def sidecar_path(migration_id: str, unit_id: str) -> str:
    """The sidecar of one unit (:mod:`omnigraph.migrator.sidecar`)."""
    return f"{units_dir(migration_id)}/{unit_id}.json"


def migration_ids(store: GraphStore) -> list[str]:
    """Every migration that left a directory, oldest first (ids are ULIDs)."""
    return [name for name in store.list(MIGRATION_DIR) if not name.startswith("claim.json")]
