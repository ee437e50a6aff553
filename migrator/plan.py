"""What a migration works on: out-of-band commits settled first, the plan of units, the duplicate inventory.

Out-of-band table commits: a format-4 graph gets routine Lance maintenance too (an index, a
compaction). Before anything is claimed, :func:`out_of_band_reports` classifies every table HEAD
past its pin on every live branch (:mod:`omnigraph.engine.reconcile.drift`): preflight reports
them, and row-changing drift refuses the migration (``table_drift``, naming the ``omnigraph
drift`` commands that resolve it; :func:`refuse_row_drift`). Under the claim and the barrier,
before the plan pins any image, :func:`adopt_before_plan` re-pins the HEADs that change no row
with a recorded graph commit, so the units pin them; drift that appeared after the check stops
the run (``drift_detected``; the unit drift checks stop it later too).

The plan (:func:`build_plan`): unit = ``(graph_branch, branch_incarnation, table_key, table_path,
pinned_table_branch, pinned_table_version)``. Units are ordered main first, then branches by
name, then table key; units that pin the same physical image (same path, table branch and
version) share one validation (:meth:`MigrationPlan.images`, :func:`validate_images`). A unit is
*owned* when its branch pins an image on its own Lance table branch and *inherited* (lazy)
otherwise (:func:`is_inherited`).

The duplicate/null inventory (:func:`inventory`): which ids are broken, in which image, seen by
which branches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import lance_branch_name
from omnigraph.engine.progress import Progress
from omnigraph.engine.reconcile import drift
from omnigraph.engine.storage.store import GraphStore
from omnigraph.ledger.records import BranchPlan, InventoryEntry, UnitPlan
from omnigraph.migrator.errors import DriftDetected
from omnigraph.migrator.executors import ImageExecutor, ImageReport, LocalExecutor, default_parallel, fan_out, read_snapshots
from omnigraph.migrator.layout import PinnedImage


def out_of_band_reports(store: GraphStore, manifest: Manifest) -> list[drift.TableDriftReport]:
    """Every owned table past its pin, on every live branch (main first, then by name)."""
    branches = list(manifest.branches())
    found = fan_out(lambda branch: drift.out_of_band(store, manifest, branch), branches, default_parallel(store))
    return [report for reports in found for report in reports]


def refuse_row_drift(store: GraphStore, reports: list[drift.TableDriftReport]) -> None:
    """``table_drift`` (nothing claimed, nothing written) if any report changes rows."""
    drifted = [r for r in reports if r.verdict == "drift"]
    if drifted:
        raise drift.drift_error(store.uri, drifted)


def adopt_before_plan(store: GraphStore, manifest: Manifest, migration_id: str, token: str) -> list[drift.TableDriftReport]:
    """Adopt every change-no-row HEAD on every branch under the claim; returns what was adopted.

    The branches are looked at :func:`~omnigraph.migrator.executors.default_parallel` at a time (reads only);
    those with a table past its pin are then settled one after another, main first, then by name,
    so the first drift met in that order is the one refused. Under the claim and the barrier no
    writer moves a table between the two reads.
    """
    adopted: list[drift.TableDriftReport] = []
    branches = list(manifest.branches())
    found = fan_out(lambda branch: drift.out_of_band(store, manifest, branch), branches, default_parallel(store))
    for branch in [name for name, reports in zip(branches, found, strict=True) if reports]:
        done, drifted = drift.settle(store, manifest, branch, actor=f"omnigraph-migrate {migration_id}", require_fencing=False)
        adopted += done
        if drifted:
            first = drifted[0]
            raise DriftDetected(
                f"{first.describe()}, which changes rows, appeared after the migration started; the "
                f"stamp will not be written. Stop every writer, `omnigraph-migrate abort {store.uri} "
                f"--token {token}`, then resolve it with `{drift.commands_for(store.uri, first)['adopt']}` "
                f"or `{drift.commands_for(store.uri, first)['revert']}` and run the migration again.",
                {"drifted": [r.to_json() for r in drifted], "migration_id": migration_id},
            )
    return adopted


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


def pinned_images(plan: MigrationPlan) -> list[PinnedImage]:
    """Every distinct image of the plan, in image order."""
    return [
        PinnedImage(image_id, units[0].table_path, units[0].pinned_table_branch, units[0].pinned_table_version)
        for image_id, units in plan.images().items()
    ]


def validate_images(
    store: GraphStore,
    plan: MigrationPlan,
    progress: Progress,
    executor: ImageExecutor | None = None,
) -> dict[str, ImageReport]:
    """Validate every distinct image of the plan once, in image order.

    They are validated on ``executor`` (default: this process; :mod:`omnigraph.migrator.executors`).
    """
    return (executor or LocalExecutor()).validate(store, pinned_images(plan), progress)


def inventory(plan: MigrationPlan, reports: dict[str, ImageReport]) -> list[InventoryEntry]:
    """Every duplicate and null id, sorted by (kind, type, id, table path)."""
    entries: list[InventoryEntry] = []
    images = plan.images()
    for image_id, report in sorted(reports.items()):
        if report.clean:
            continue
        units: list[UnitPlan] = images[image_id]
        kind, type_name = units[0].table_key.split(":", 1)
        # The fields shared by every entry of the image; the InventoryEntry model validates each one.
        common: dict[str, Any] = {
            "entity_kind": kind,
            "type_name": type_name,
            "graph_branches": sorted({u.graph_branch for u in units}),
            "table_path": units[0].table_path,
            "table_branch": units[0].pinned_table_branch,
            "table_version": units[0].pinned_table_version,
        }
        for entity_id, count in report.duplicates:
            entries.append(InventoryEntry(entity_id=entity_id, problem="duplicate", rows=count, **common))
        if report.null_ids:
            entries.append(InventoryEntry(entity_id=None, problem="null", rows=report.null_ids, **common))
    return sorted(entries, key=lambda e: (e.entity_kind, e.type_name, e.entity_id or "", e.table_path, e.table_branch or ""))


def inventory_lines(entries: list[InventoryEntry]) -> list[str]:
    """One tab-separated line per entry: kind, type, id, problem, rows, branches, image."""
    return [
        "\t".join(
            [
                e.entity_kind,
                e.type_name,
                e.entity_id if e.entity_id is not None else "<null>",
                e.problem,
                str(e.rows),
                ",".join(e.graph_branches),
                f"{e.table_path}@{e.table_branch or 'main'}@v{e.table_version}",
            ]
        )
        for e in entries
    ]
