"""The migration plan: every live graph branch and every table it pins, as units.

Unit = ``(graph_branch, branch_incarnation, table_key, table_path, pinned_table_branch,
pinned_table_version)``. Units are ordered main first, then branches by name, then table key;
units that pin the same physical image (same path, table branch and version) share one
validation. A unit is *owned* when its branch pins an image on its own Lance table branch and
*inherited* (lazy) otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import lance_branch_name
from omnigraph.ledger.records import BranchPlan, UnitPlan
from omnigraph.migrator.fan_out import read_snapshots


def unit_id_for(graph_branch: str, table_key: str) -> str:
    """A readable, file-name-safe unit id: ``<branch>~<kind>-<Type>``."""
    return f"{graph_branch}~{table_key.replace(':', '-')}"


def image_id_for(table_path: str, table_branch: str | None, version: int) -> str:
    """The id of one physical image: ``<path>@<table branch or main>@v<version>``."""
    return f"{table_path}@{table_branch or 'main'}@v{version}"


def is_inherited(unit: UnitPlan) -> bool:
    """True if the branch pins an image that is not on its own Lance table branch."""
    return unit.pinned_table_branch != lance_branch_name(unit.graph_branch)


@dataclass(frozen=True)
class MigrationPlan:
    """Every live graph branch (incarnation and head) and every unit, in plan order."""

    branches: list[BranchPlan]
    units: list[UnitPlan]

    def images(self) -> dict[str, list[UnitPlan]]:
        """Units grouped by the image they pin, in image-id order."""
        grouped: dict[str, list[UnitPlan]] = {}
        for unit in self.units:
            grouped.setdefault(unit.image_id, []).append(unit)
        return dict(sorted(grouped.items()))


def build_plan(manifest: Manifest) -> MigrationPlan:
    """Enumerate every live graph branch (with its incarnation) and every table it pins."""
    branches: list[BranchPlan] = []
    units: list[UnitPlan] = []
    live = manifest.branches()
    snapshots = read_snapshots(manifest, list(live))
    for (name, branch), snapshot in zip(live.items(), snapshots, strict=True):
        branches.append(BranchPlan(graph_branch=name, incarnation=branch.incarnation, head_commit_id=snapshot.head.commit_id))
        for table_key, entry in snapshot.tables.items():
            units.append(
                UnitPlan(
                    unit_id=unit_id_for(name, table_key),
                    graph_branch=name,
                    branch_incarnation=branch.incarnation,
                    table_key=table_key,
                    table_path=entry.table_path,
                    pinned_table_branch=entry.table_branch,
                    pinned_table_version=entry.table_version,
                    image_id=image_id_for(entry.table_path, entry.table_branch, entry.table_version),
                )
            )
    return MigrationPlan(branches, units)
