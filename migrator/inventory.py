"""The duplicate/null inventory: which ids are broken, in which image, seen by which branches."""

from __future__ import annotations

from omnigraph.engine.progress import Progress
from omnigraph.engine.storage.store import GraphStore
from omnigraph.ledger.records import InventoryEntry, UnitPlan
from omnigraph.migrator.executors import ImageExecutor, LocalExecutor
from omnigraph.migrator.images import PinnedImage
from omnigraph.migrator.plan import MigrationPlan
from omnigraph.migrator.validate import ImageReport


def pinned_images(plan: MigrationPlan, only: set[str] | None = None) -> list[PinnedImage]:
    """Every distinct image of the plan (or those in ``only``), in image order."""
    return [
        PinnedImage(image_id, units[0].table_path, units[0].pinned_table_branch, units[0].pinned_table_version)
        for image_id, units in plan.images().items()
        if only is None or image_id in only
    ]


def validate_images(
    store: GraphStore,
    plan: MigrationPlan,
    progress: Progress,
    only: set[str] | None = None,
    executor: ImageExecutor | None = None,
) -> dict[str, ImageReport]:
    """Validate every distinct image of the plan once (or those in ``only``), in image order,
    on ``executor`` (default: this process; :mod:`omnigraph.migrator.executors`)."""
    return (executor or LocalExecutor()).validate(store, pinned_images(plan, only), progress)


def inventory(plan: MigrationPlan, reports: dict[str, ImageReport]) -> list[InventoryEntry]:
    """Every duplicate and null id, sorted by (kind, type, id, table path)."""
    entries: list[InventoryEntry] = []
    images = plan.images()
    for image_id, report in sorted(reports.items()):
        if report.clean:
            continue
        units: list[UnitPlan] = images[image_id]
        kind, type_name = units[0].table_key.split(":", 1)
        common = {
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
