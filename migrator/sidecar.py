"""Per-unit sidecars: ``__migration/<id>/units/<unit-id>.json``, written before any unit effect.

A sidecar declares what the unit is about to do: the state it expects (incarnation, pinned
image), the fork it may create (branch name and exact parent ref), the PK it installs and the
manifest row it will publish. Resume uses it to adopt a fork only when the fork's identity
matches, never by inferring from a branch name. The sidecar is deleted when the unit completes.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from omnigraph.engine.storage.store import GraphStore, canonical_json
from omnigraph.ledger.records import UnitPlan
from omnigraph.migrator.errors import MigrationRefused
from omnigraph.migrator.layout import migration_ids, sidecar_path, units_dir


class PlannedFork(BaseModel):
    """The table branch an inherited unit forks, from exactly this parent ref."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    branch: str
    parent_branch: str | None
    parent_version: int


class ManifestDelta(BaseModel):
    """The branch manifest row the unit publishes: its table branch and the migration marker."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    graph_branch: str
    table_key: str
    table_branch: str | None
    migration_id: str
    migration_unit: str


class UnitSidecar(BaseModel):
    """The declared effects of one unit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    migration_id: str
    token: str
    unit: UnitPlan
    planned_fork: PlannedFork | None
    planned_pk: list[str]
    manifest_delta: ManifestDelta


def write_or_match(store: GraphStore, sidecar: UnitSidecar) -> bool:
    """Write the sidecar; if one exists it must declare exactly the same. True if written now."""
    path = sidecar_path(sidecar.migration_id, sidecar.unit.unit_id)
    if store.put_if_absent(path, canonical_json(sidecar)):
        return True
    existing = UnitSidecar.model_validate_json(store.read_bytes(path))
    if existing != sidecar:
        raise MigrationRefused(
            f"sidecar {path} declares different effects than this run plans; the graph changed "
            "under the migration. Inspect it, then abort the migration.",
            {"path": path, "existing": existing.model_dump(mode="json"), "planned": sidecar.model_dump(mode="json")},
        )
    return False


def delete(store: GraphStore, migration_id: str, unit_id: str) -> None:
    """Remove one unit's sidecar (the unit completed, or the migration was aborted)."""
    store.delete(sidecar_path(migration_id, unit_id))


def remaining(store: GraphStore, migration_id: str) -> list[str]:
    """Unit ids whose sidecar is still present, sorted."""
    return [name.removesuffix(".json") for name in store.list(units_dir(migration_id)) if name.endswith(".json")]


def pinned_images(store: GraphStore) -> list[tuple[str, str | None, int]]:
    """(table path, table branch, version) of the image every remaining sidecar of every
    migration pins, sorted; version cleanup must keep them."""
    images = set()
    for migration_id in migration_ids(store):
        for unit_id in remaining(store, migration_id):
            sidecar = UnitSidecar.model_validate_json(store.read_bytes(sidecar_path(migration_id, unit_id)))
            unit = sidecar.unit
            images.add((unit.table_path, unit.pinned_table_branch, unit.pinned_table_version))
    return sorted(images, key=lambda image: (image[0], image[1] or "", image[2]))
