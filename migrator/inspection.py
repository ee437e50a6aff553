"""Read-only commands: preflight, plan, duplicates, verify, status. None takes the claim."""

from __future__ import annotations

import datetime as dt
from typing import Any

from claims import inspect
from engine.errors import ValidationFailed
from engine.maintenance.progress import Progress
from engine.storage import GraphStore
from ledger import Ledger, LedgerReplay, render_json
from migrator.context import open_existing_graph
from migrator.fleet_check import refuse_live_writers
from migrator.inventory import inventory, validate_images
from migrator.layout import CLAIM_PATH, ledger_dir, migration_ids
from migrator.out_of_band import out_of_band_reports, refuse_row_drift
from migrator.plan import MigrationPlan, build_plan, is_inherited
from migrator.preconditions import UpToDate, already_fenced, refuse_unless_stamp_4
from migrator.verify import verify_graph


def _plan_document(plan: MigrationPlan) -> dict[str, Any]:
    """The branches, the units (each marked ``inherited`` or not) and the image count of ``plan``."""
    return {
        "branches": [b.model_dump(mode="json") for b in plan.branches],
        "units": [{**u.model_dump(mode="json"), "inherited": is_inherited(u)} for u in plan.units],
        "images": len(plan.images()),
    }


def plan_command(uri: str) -> dict[str, Any]:
    """The units a migration would process now."""
    store, manifest = open_existing_graph(uri)
    stamp, _ = manifest.read_stamp()
    return {"graph": store.uri, "stamp": stamp, **_plan_document(build_plan(manifest))}


def up_to_date(uri: str) -> UpToDate | None:
    """:class:`UpToDate` if the graph is already fenced and unclaimed (see :func:`already_fenced`)."""
    store, manifest = open_existing_graph(uri)
    return already_fenced(store, manifest)


def preflight(uri: str, validate: bool, progress: Progress, ignore_fleet: bool = False) -> dict[str, Any]:
    """Stamp 4, no intents, no claim, no live registered writer (unless ``ignore_fleet``), every
    unit listed; with ``validate`` the full id scan.

    Out-of-band table commits are listed under ``out_of_band``: ``run`` adopts the ones that
    change no row before planning (the listed units show the pins before that adoption);
    row-changing drift is refused with ``table_drift``."""
    store, manifest = open_existing_graph(uri)
    refuse_unless_stamp_4(store, manifest)
    fleet = refuse_live_writers(store, ignore_fleet)
    reports = out_of_band_reports(store, manifest)
    refuse_row_drift(store, reports)
    plan = build_plan(manifest)
    document: dict[str, Any] = {
        "graph": store.uri,
        "stamp": "4",
        "ready": True,
        "fleet": fleet,
        **_plan_document(plan),
        "out_of_band": [r.to_json() for r in reports],
    }
    if validate:
        entries = inventory(plan, validate_images(store, plan, progress))
        document["inventory"] = [e.model_dump(mode="json") for e in entries]
        if entries:
            raise ValidationFailed(
                f"{len(entries)} duplicate or null id(s): the migration would stop before any PK; "
                f"see `omnigraph-migrate duplicates {store.uri}`",
                {**document, "ready": False},
            )
    return document


def duplicates(uri: str, progress: Progress) -> dict[str, Any]:
    """The duplicate/null inventory of every pinned image, without a claim."""
    store, manifest = open_existing_graph(uri)
    plan = build_plan(manifest)
    entries = inventory(plan, validate_images(store, plan, progress))
    return {"graph": store.uri, "images": len(plan.images()), "inventory": [e.model_dump(mode="json") for e in entries]}


def _latest_migration(store: GraphStore) -> str | None:
    """The newest migration that left a directory (ids are ULIDs), or None."""
    ids = migration_ids(store)
    return ids[-1] if ids else None


def verify(uri: str) -> dict[str, Any]:
    """Structural fencing checks; during a migration also the ledger comparison."""
    store, manifest = open_existing_graph(uri)
    return verify_graph(store, manifest)


def _parse_utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _elapsed(first_at: str, last_at: str | None) -> float:
    end = _parse_utc(last_at) if last_at else dt.datetime.now(dt.timezone.utc)
    return round((end - _parse_utc(first_at)).total_seconds(), 3)


def status(uri: str) -> tuple[dict[str, Any], LedgerReplay | None]:
    """The stamp, the claim, and the latest migration's ledger (records and folded state).

    Returns the JSON document and the replayed ledger (None if no migration ever ran)."""
    store, manifest = open_existing_graph(uri)
    stamp, stamp_migration = manifest.read_stamp()
    holder = inspect(store, CLAIM_PATH)
    migration_id = stamp_migration or (holder.migration_id if holder else None) or _latest_migration(store)
    document: dict[str, Any] = {
        "graph": store.uri,
        "stamp": stamp,
        "claim": holder.model_dump(mode="json") if holder else None,
        "migration_id": migration_id,
        "ledger": None,
        "units_by_state": {},
        "elapsed_seconds": None,
        "next": _next_step(store.uri, stamp, holder is not None, None),
    }
    if migration_id is None:
        return document, None
    replay = Ledger(store, ledger_dir(migration_id)).replay()
    counts: dict[str, int] = {}
    for unit in replay.state.units.values():
        counts[unit.status] = counts.get(unit.status, 0) + 1
    finished = replay.state.claim_released or replay.state.aborted
    document["ledger"] = render_json(replay)
    document["units_by_state"] = dict(sorted(counts.items()))
    document["elapsed_seconds"] = _elapsed(replay.records[0][1].at, replay.records[-1][1].at if finished else None)
    document["next"] = _next_step(store.uri, stamp, holder is not None, replay.state.phase)
    return document, replay


def _next_step(uri: str, stamp: str | None, claimed: bool, phase: str | None) -> str:
    """What the operator runs next, from the stamp, the claim and the ledger's phase."""
    if stamp == "5" and not claimed:
        return f"nothing: the graph is fenced (`omnigraph-migrate verify {uri}` checks it)"
    if stamp == "5":
        return (
            f"stamp 5 is written but the claim is still held (the holder died before releasing it): "
            f"`omnigraph-migrate resume {uri} --token TOKEN` releases it; TOKEN is the claim's token"
        )
    if phase == "validation_failed":
        return (
            f"repair the duplicates under the claim: `omnigraph-migrate playbook run "
            f"playbooks/duplicate-repair.yaml {uri}`, or `omnigraph-migrate abort {uri} --token TOKEN`"
        )
    if claimed or stamp == "migrating":
        return (
            f"if the holder is dead: `omnigraph-migrate resume {uri} --token TOKEN` "
            f"(or `abort {uri} --token TOKEN`); TOKEN is the claim's token shown above"
        )
    return f"`omnigraph-migrate preflight {uri}` then `omnigraph-migrate run {uri} --owner NAME`"
