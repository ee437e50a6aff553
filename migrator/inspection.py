"""Read-only commands: preflight, plan, duplicates, verify, status. None takes the claim."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from omnigraph.claims.acting import acting_processes
from omnigraph.claims.claim import inspect
from omnigraph.claims.document import ClaimDocument
from omnigraph.engine.errors import NotFound, ValidationFailed
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.names import FORMAT_5, FORMAT_MIGRATING
from omnigraph.engine.storage.store import GraphStore, open_store
from omnigraph.ledger.ledger import Ledger, LedgerReplay
from omnigraph.ledger.render import render_json
from omnigraph.migrator import sidecar as sidecars
from omnigraph.migrator.advice import claim_next_step, unclaimed_barrier_next_step
from omnigraph.migrator.inventory import inventory, validate_images
from omnigraph.migrator.layout import CLAIM_PATH, ledger_dir, migration_ids
from omnigraph.migrator.plan import MigrationPlan, build_plan, is_inherited
from omnigraph.migrator.preconditions import UpToDate, already_fenced, refuse_unless_stamp_4

# What one command alone needs (preflight's fleet and drift checks, verify with the answer
# check's query engine) is imported by that command: `status` loads neither.
if TYPE_CHECKING:
    from omnigraph.engine.progress import Progress
    from omnigraph.migrator.answers import AnswerQueries


def _plan_document(plan: MigrationPlan) -> dict[str, Any]:
    """The branches, the units (each marked ``inherited`` or not) and the image count of ``plan``."""
    return {
        "branches": [b.model_dump(mode="json") for b in plan.branches],
        "units": [{**u.model_dump(mode="json"), "inherited": is_inherited(u)} for u in plan.units],
        "images": len(plan.images()),
    }


def plan_command(uri: str) -> dict[str, Any]:
    """The units a migration would process now."""
    manifest = Manifest.of_graph(open_store(uri))
    store = manifest.store
    stamp, _ = manifest.read_stamp()
    return {"graph": store.uri, "stamp": stamp, **_plan_document(build_plan(manifest))}


def up_to_date(uri: str) -> UpToDate | None:
    """:class:`UpToDate` if the graph is already fenced and unclaimed (see :func:`already_fenced`)."""
    manifest = Manifest.of_graph(open_store(uri))
    store = manifest.store
    return already_fenced(store, manifest)


def preflight(uri: str, validate: bool, progress: Progress, ignore_fleet: bool = False) -> dict[str, Any]:
    """Stamp 4, no intents, no claim, no live registered writer (unless ``ignore_fleet``), every
    unit listed; with ``validate`` the full id scan.

    Out-of-band table commits are listed under ``out_of_band``: ``run`` adopts the ones that
    change no row before planning (the listed units show the pins before that adoption);
    row-changing drift is refused with ``table_drift``."""
    from omnigraph.migrator.fleet_check import refuse_live_writers
    from omnigraph.migrator.out_of_band import out_of_band_reports, refuse_row_drift

    manifest = Manifest.of_graph(open_store(uri))
    store = manifest.store
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
    manifest = Manifest.of_graph(open_store(uri))
    store = manifest.store
    plan = build_plan(manifest)
    entries = inventory(plan, validate_images(store, plan, progress))
    return {"graph": store.uri, "images": len(plan.images()), "inventory": [e.model_dump(mode="json") for e in entries]}


def _latest_migration(store: GraphStore) -> str | None:
    """The newest migration that left a directory (ids are ULIDs), or None."""
    ids = migration_ids(store)
    return ids[-1] if ids else None


def verify(uri: str, queries: AnswerQueries | None = None) -> dict[str, Any]:
    """Structural fencing checks; during a migration also the ledger comparison; with
    ``queries``, the recorded answers taken again (:func:`omnigraph.migrator.verify.verify_graph`)."""
    from omnigraph.migrator.verify import verify_graph

    manifest = Manifest.of_graph(open_store(uri))
    store = manifest.store
    return verify_graph(store, manifest, queries)


def _parse_utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _elapsed(replay: LedgerReplay) -> float:
    """Seconds from the first to the last ledger record: what the migration took so far, the same
    on every read (a dead migration's does not grow with the clock)."""
    return round((_parse_utc(replay.records[-1][1].at) - _parse_utc(replay.records[0][1].at)).total_seconds(), 3)


def _replay(store: GraphStore, migration_id: str) -> LedgerReplay | None:
    """The migration's ledger, or None if it has no record (its holder died right after claiming)."""
    try:
        return Ledger(store, ledger_dir(migration_id)).replay()
    except NotFound:
        return None


def tail(replay: LedgerReplay, count: int | None) -> LedgerReplay:
    """``replay`` with only its last ``count`` records (all with None); the state is the whole ledger's."""
    if count is None:
        return replay
    return LedgerReplay(records=replay.records[-count:] if count else [], state=replay.state)


def status(uri: str, tail_records: int | None = None) -> tuple[dict[str, Any], LedgerReplay | None]:
    """The stamp, the claim and who acts for it, and the latest migration's ledger (its last
    ``tail_records`` records, or all, and the folded state of all of them).

    Returns the JSON document and the replayed ledger as shown (None if no migration ever wrote a
    ledger record: none ran, or its holder died between taking the claim and its first record).
    ``next`` names one command to run, with the claim's token (:mod:`omnigraph.migrator.advice`)."""
    manifest = Manifest.of_graph(open_store(uri))
    store = manifest.store
    stamp, stamp_migration = manifest.read_stamp()
    holder = inspect(store, CLAIM_PATH)
    migration_id = stamp_migration or (holder.migration_id if holder else None) or _latest_migration(store)
    replay = _replay(store, migration_id) if migration_id is not None else None
    document: dict[str, Any] = {
        "graph": store.uri,
        "stamp": stamp,
        "claim": holder.model_dump(mode="json") if holder else None,
        "acting": [p.to_json() for p in acting_processes(store, CLAIM_PATH, holder)] if holder else [],
        "migration_id": migration_id,
        "ledger": None,
        "ledger_records": 0,
        "units_by_state": {},
        "elapsed_seconds": None,
        "next": _next_step(store, stamp, stamp_migration, holder),
    }
    if replay is None:
        return document, None
    with_sidecar = set(sidecars.remaining(store, replay.state.migration_id))
    counts: dict[str, int] = {}
    for unit_id, unit in replay.state.units.items():
        # a unit whose sidecar is written is in progress, though its first record is unit_completed
        state = "in_progress" if unit.status == "planned" and unit_id in with_sidecar else unit.status
        counts[state] = counts.get(state, 0) + 1
    shown = tail(replay, tail_records)
    document["ledger"] = render_json(shown)
    document["ledger_records"] = len(replay.records)
    document["units_by_state"] = dict(sorted(counts.items()))
    document["elapsed_seconds"] = _elapsed(replay)
    return document, shown


def _next_step(store: GraphStore, stamp: str | None, stamp_migration: str | None, holder: ClaimDocument | None) -> str:
    """What the operator runs next, from the stamp, the claim (and who acts for it) and the ledger."""
    uri = store.uri
    if holder is not None:
        return claim_next_step(store, holder, stamp)
    if stamp == FORMAT_5:
        return f"nothing: the graph is fenced (`omnigraph-migrate verify {uri}` checks it)"
    if stamp == FORMAT_MIGRATING and stamp_migration is not None:
        return unclaimed_barrier_next_step(store, stamp_migration)
    return f"`omnigraph-migrate preflight {uri}` then `omnigraph-migrate run {uri}`"
