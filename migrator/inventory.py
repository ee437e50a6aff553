"""The duplicate/null inventory: which ids are broken, in which image, seen by which branches."""

from __future__ import annotations

from engine.lance_io import open_dataset
from engine.storage import GraphStore
from ledger import InventoryEntry, UnitPlan
from migrator.plan import MigrationPlan
from migrator.progress import Progress
from migrator.validate import ImageReport, validate_image, validation_session


def validate_images(
    store: GraphStore, plan: MigrationPlan, progress: Progress, only: set[str] | None = None
) -> dict[str, ImageReport]:
    """Validate every distinct image of the plan once (or those in ``only``), in image order."""
    images = {image_id: units for image_id, units in plan.images().items() if only is None or image_id in only}
    datasets = {}
    total = 0
    for image_id, units in images.items():
        unit = units[0]
        dataset = open_dataset(store, unit.table_path, unit.pinned_table_branch, unit.pinned_table_version)
        datasets[image_id] = dataset
        total += dataset.count_rows()
    progress.start("validating ids", total)
    with validation_session() as session:
        reports = {image_id: validate_image(dataset, progress.advance, session) for image_id, dataset in datasets.items()}
    progress.finish()
    return reports


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
