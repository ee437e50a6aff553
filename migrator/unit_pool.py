"""Migration units in flight at once: a bounded pool of threads (``--parallel N``).

Units of one graph branch run one after another, in plan order, because each publishes a row
of that branch's ``__manifest`` and two publishes from one base conflict (which the unit
protocol reports as drift). Units of different graph branches touch distinct Lance table
branches and distinct manifest branches, so up to ``parallel`` graph branches have a unit in
flight at a time. Every unit keeps its own protocol
(:mod:`omnigraph.migrator.unit`): a crash at any point
leaves each in-flight unit resumable from its sidecar, so ``resume`` continues them all.

The first unit that fails stops the pool: no unit starts after it, the units already in flight
finish (or fail), and the failure of the earliest graph branch in plan order is raised.
Ledger records stay one strict sequence (:meth:`omnigraph.migrator.context.Migration.record` is
serialized); their order between branches depends on timing.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from omnigraph.engine.errors import BadRequest
from omnigraph.ledger.fold import ImageState
from omnigraph.ledger.records import UnitPlan
from omnigraph.migrator.context import Migration
from omnigraph.migrator.fan_out import MAX_PARALLEL, fan_out
from omnigraph.migrator.unit import migrate_unit


def by_graph_branch(units: list[UnitPlan]) -> list[list[UnitPlan]]:
    """``units`` grouped by graph branch, each group in the given order, groups in order of
    their first unit."""
    groups: dict[str, list[UnitPlan]] = {}
    for unit in units:
        groups.setdefault(unit.graph_branch, []).append(unit)
    return list(groups.values())


def run_units(
    m: Migration,
    units: list[UnitPlan],
    images: Mapping[str, ImageState],
    fork_identifiers: Mapping[str, str],
    parallel: int,
) -> None:
    """Run every unit of ``units`` (in plan order) to completion, ``parallel`` graph branches at
    a time (module docstring); ``m.progress`` advances once per completed unit. ``parallel``
    outside 1 to :data:`MAX_PARALLEL` is ``bad_request`` (nothing done)."""
    if not 1 <= parallel <= MAX_PARALLEL:
        raise BadRequest(f"parallel must be from 1 to {MAX_PARALLEL}, not {parallel}", {"parallel": parallel})
    stop = threading.Event()
    progress_lock = threading.Lock()

    def run_group(group: list[UnitPlan]) -> None:
        for unit in group:
            if stop.is_set():
                return
            try:
                migrate_unit(m, unit, images[unit.image_id], fork_identifiers.get(unit.unit_id))
            except BaseException:
                stop.set()
                raise
            with progress_lock:
                m.progress.advance()

    fan_out(run_group, by_graph_branch(units), parallel)
