"""Where a migration keeps its files under the graph root, and the pinned images it works on.

Paths: the claim (:data:`CLAIM_PATH`, taken for operation :data:`CLAIM_OPERATION`), under
``__migration/<id>/`` the ledger records (:func:`ledger_dir`) and the unit sidecars
(:func:`units_dir`, :func:`sidecar_path`), and beside them the schema identity the migration's
receipts were taken with (:func:`schema_receipt_path`, :mod:`omnigraph.migrator.schema_receipt`).
Migration ids are ULIDs, so :func:`migration_ids` lists them oldest first.

Pinned images (:class:`PinnedImage`), as every executor sees them: one physical table image a plan
pins, opened at its version by :func:`open_images`. :mod:`omnigraph.migrator.executors` (the
executor seam and the local executor) and :mod:`omnigraph.migrator.ray_executor` (the ``ray``
executor) both use these; neither imports the other at import time
(:mod:`omnigraph.migrator.executors` imports the Ray executor only when it is chosen).

Physical fingerprints (:func:`physical_fingerprint`): which data and deletion files make up an
image's rows. Two versions with the same fingerprint hold the same rows: Lance never rewrites a
data file in place, and any row change adds data files or deletion files. A PK metadata commit
and a branch fork keep every fragment as it was (a fork only sets a base reference, which is
ignored here), so the migration checks its effects with this cheap fingerprint and falls back to
re-reading the ids only when it differs.

Unit sidecars (:class:`UnitSidecar`, ``__migration/<id>/units/<unit-id>.json``), written before any
effect of the unit. A sidecar declares what the unit is about to do: the state it expects
(incarnation, pinned image), the fork it may create (branch name and exact parent ref), the PK it
installs and the manifest row it will publish. :func:`write_or_match` never overwrites one that
declares something else (``migration_refused``). Resume uses it to adopt a fork only when the
fork's identity matches, never by inferring from a branch name. The sidecar is deleted when the
unit completes; the images remaining sidecars pin (:func:`pinned_images`) must be kept by version
cleanup.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import lance
from pydantic import BaseModel, ConfigDict

from omnigraph.engine.storage.lance_io import ImageRef, open_pinned
from omnigraph.engine.storage.names import CLAIM_PATH, MIGRATION_DIR
from omnigraph.engine.storage.store import GraphStore, canonical_json
from omnigraph.ledger.records import UnitPlan
from omnigraph.migrator.errors import MigrationRefused

__all__ = ["CLAIM_OPERATION", "CLAIM_PATH", "ledger_dir", "migration_ids", "schema_receipt_path", "sidecar_path", "units_dir"]


CLAIM_OPERATION = "fencing-migration"


def ledger_dir(migration_id: str) -> str:
    """The directory of the migration's ledger records."""
    return f"{MIGRATION_DIR}/{migration_id}/ledger"


def units_dir(migration_id: str) -> str:
    """The directory of the migration's unit sidecars."""
    return f"{MIGRATION_DIR}/{migration_id}/units"


def sidecar_path(migration_id: str, unit_id: str) -> str:
    """The sidecar of one unit (:class:`UnitSidecar`)."""
    return f"{units_dir(migration_id)}/{unit_id}.json"


SCHEMA_RECEIPTS = "schema-receipts"
"""The directory under ``__migration/`` of every migration's schema receipt (not a migration id)."""


def schema_receipt_path(migration_id: str) -> str:
    """The schema identity the migration's receipts were taken with (:class:`omnigraph.migrator.schema_receipt.SchemaReceipt`)."""
    return f"{MIGRATION_DIR}/{SCHEMA_RECEIPTS}/{migration_id}.json"


def migration_ids(store: GraphStore) -> list[str]:
    """Every migration that left a directory, oldest first (ids are ULIDs)."""
    return [name for name in store.list(MIGRATION_DIR) if not name.startswith("claim.json") and name != SCHEMA_RECEIPTS]


VALIDATING = "validating ids"


@dataclass(frozen=True)
class PinnedImage:
    """One physical table image a plan pins: a Lance table branch (None = main) at a version."""

    image_id: str
    table_path: str
    table_branch: str | None
    table_version: int

    @property
    def image(self) -> ImageRef:
        """The image as a storage reference."""
        return ImageRef(self.table_path, self.table_branch, self.table_version)


def open_images(store: GraphStore, images: list[PinnedImage]) -> dict[str, lance.LanceDataset]:
    """Every image checked out at its pinned version, by image id, in the order given."""
    return {image.image_id: open_pinned(store, image.image) for image in images}


def physical_fingerprint(dataset: lance.LanceDataset) -> str:
    """sha256 over every fragment's id, data files (path, size), row count and deletion file."""
    fragments = []
    for fragment in dataset.get_fragments():
        meta = fragment.metadata.to_json()
        deletion = meta.get("deletion_file")
        fragments.append(
            {
                "id": meta["id"],
                "files": sorted((f["path"], f.get("file_size_bytes")) for f in meta["files"]),
                "physical_rows": meta["physical_rows"],
                "deletion": None if deletion is None else [deletion["id"], deletion["read_version"], deletion["num_deleted_rows"]],
            }
        )
    fragments.sort(key=lambda f: f["id"])
    return hashlib.sha256(canonical_json(fragments)).hexdigest()


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
    """(table path, table branch, version) of the image every remaining sidecar of every migration pins, sorted.

    Version cleanup must keep them.
    """
    images = set()
    for migration_id in migration_ids(store):
        for unit_id in remaining(store, migration_id):
            sidecar = UnitSidecar.model_validate_json(store.read_bytes(sidecar_path(migration_id, unit_id)))
            unit = sidecar.unit
            images.add((unit.table_path, unit.pinned_table_branch, unit.pinned_table_version))
    return sorted(images, key=lambda image: (image[0], image[1] or "", image[2]))
