"""The operator's view of a migration: ``status``, the next-step advice and the claim findings.

:func:`status` is the read-only ``status`` document: the stamp, the claim and who acts for it,
and the latest migration's ledger, with ``next`` naming one command to run.

What the operator runs next about a migration claim is one wording every command prints.
:func:`claim_next_step` reads who acts for the claim (:mod:`omnigraph.claims.acting`) and the
migration's ledger phase, and names one command with the claim's real token, never a
placeholder, so the advice can be run as printed: while a recorded process is alive on this
host, nothing but waiting (and ``claim show``); otherwise ``resume --token`` (which releases the
claim at stamp 5, continues the migration before it, also when its holder died before the first
ledger record), or for a migration stopped by duplicates, the repair playbook. Before stamp 5, a
migration whose ``_schema.pg`` changed since its receipts were taken is told what takes them
again (``prepare --token`` at stamp 4, else ``abort --token`` then ``run``;
:mod:`omnigraph.migrator.schema_receipt`). An online
migration (``prepare``'s claim, still at stamp 4) is finished by ``cutover --token``, and one
whose prepare found duplicates is repaired first (with the format-4 writer, then ``prepare
--token``; or behind the barrier, which ``cutover --token`` raises and keeps at them). A process on
another host that has not ended is named first, to be checked there.
:func:`unclaimed_barrier_next_step` is the advice for a barrier whose claim was broken (``abort``
with the broken claim's token), and :func:`claim_findings` says both as ``omnigraph check``
findings. Nothing here writes to the graph.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from omnigraph.claims.acting import acting_processes
from omnigraph.claims.claim import break_record_path, inspect, read_break
from omnigraph.claims.document import ClaimDocument
from omnigraph.engine.errors import NotFound
from omnigraph.engine.maintenance.findings import Finding
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5, FORMAT_MIGRATING, SCHEMA_FILE
from omnigraph.engine.storage.store import GraphStore
from omnigraph.ledger.ledger import Ledger, LedgerReplay
from omnigraph.ledger.records import BarrierSet
from omnigraph.ledger.render import render_json
from omnigraph.migrator import layout
from omnigraph.migrator.layout import CLAIM_PATH, ledger_dir, migration_ids
from omnigraph.migrator.schema_receipt import schema_change_advice, schema_standing


def ledger_phase(store: GraphStore, migration_id: str) -> str | None:
    """The phase of the migration's ledger, or None if it has no record yet."""
    try:
        return Ledger(store, ledger_dir(migration_id)).replay().state.phase
    except NotFound:
        return None


def claim_next_step(store: GraphStore, holder: ClaimDocument, stamp: str | None) -> str:
    """The next command for a graph whose migration claim ``holder`` is held (see the module docstring)."""
    uri, token = store.uri, holder.token
    processes = acting_processes(store, CLAIM_PATH, holder)
    live = [p for p in processes if p.acting_here]
    if live:
        p = live[-1]
        return (
            f"wait: process {p.pid} on this host ({p.action} by {p.owner!r}) is acting for migration "
            f"{holder.migration_id}; `omnigraph-migrate claim show {uri}` says when it is gone"
        )
    elsewhere = [p for p in processes if p.liveness.startswith("unknown")]
    check = "".join(f"check that process {p.pid} on {p.host} is gone, then " for p in elsewhere)
    if stamp == FORMAT_5:
        return (
            f"{check}`omnigraph-migrate resume {uri} --token {token}` releases the claim (stamp 5 is already written: the graph is fenced)"
        )
    if schema_standing(store, holder.migration_id).changed:
        return f"{check}the schema ({SCHEMA_FILE}) changed since the receipts were taken: {schema_change_advice(store, holder, stamp)}"
    phase = ledger_phase(store, holder.migration_id)
    if holder.online and stamp == FORMAT_4:
        if phase == "validation_failed":
            return (
                f"{check}`omnigraph-migrate cutover {uri} --token {token}` stops at the duplicates behind the barrier "
                f"for `omnigraph-migrate playbook run duplicate-repair {uri}`; or remove them with the format-4 writer, "
                f"then `omnigraph-migrate prepare {uri} --token {token}` (or give the migration up: "
                f"`omnigraph-migrate abort {uri} --token {token}`)"
            )
        return (
            f"{check}`omnigraph-migrate cutover {uri} --token {token}` finishes migration {holder.migration_id} "
            f"(writers go on until then; `omnigraph-migrate prepare {uri} --token {token}` catches up first; give it up: "
            f"`omnigraph-migrate abort {uri} --token {token}`)"
        )
    if phase == "validation_failed":
        return (
            f"{check}repair the duplicates under the claim: `omnigraph-migrate playbook run duplicate-repair {uri}` "
            f"(or give the migration up: `omnigraph-migrate abort {uri} --token {token}`)"
        )
    return (
        f"{check}`omnigraph-migrate resume {uri} --token {token}` continues migration {holder.migration_id} "
        f"(or give it up: `omnigraph-migrate abort {uri} --token {token}`)"
    )


def broken_token(store: GraphStore, migration_id: str) -> str | None:
    """The token of the broken claim of ``migration_id``, if its claim was broken."""
    directory = break_record_path(CLAIM_PATH, "x").rsplit("/", 1)[0]
    for name in sorted(store.list(directory)):
        token = name.removesuffix(".json")
        record = read_break(store, CLAIM_PATH, token) if name.endswith(".json") else None
        if record is not None and record.claim.migration_id == migration_id:
            return token
    return None


def unclaimed_barrier_next_step(store: GraphStore, migration_id: str) -> str:
    """The next command for a barrier of ``migration_id`` with no claim.

    That is ``abort --token`` with the broken claim's token. A claim that vanished without a break
    (removed by hand) has no command: the claim must be restored.
    """
    token = broken_token(store, migration_id)
    if token is None:
        return (
            f"the barrier of migration {migration_id} has no claim and no record of a break; restore "
            f"{CLAIM_PATH} from a backup of the graph root"
        )
    return f"`omnigraph-migrate abort {store.uri} --token {token}` lowers the barrier the broken claim left (stamp 4 again)"


def claim_findings(store: GraphStore, stamp: str | None) -> list[Finding]:
    """What ``omnigraph check`` reports about the migration claim and the barrier, each with its next command.

    Behind the barrier (stamp ``migrating``) one ``migration_in_progress`` finding (its claim held,
    or broken); at any other stamp a held claim is ``claim_held`` (no program writes while it is
    held; an online claim at stamp 4, ``prepare``'s, bars other migrations only).
    """
    holder = inspect(store, CLAIM_PATH)
    _, migration_id = Manifest(store).read_stamp()
    if holder is not None:
        advice = claim_next_step(store, holder, stamp)
        who = f"held by {holder.owner} on {holder.host} (pid {holder.pid})"
        details = {"holder": holder.model_dump(mode="json"), "stamp": stamp, "next": advice}
        if stamp == FORMAT_MIGRATING:
            message = f"stamp is 'migrating': migration {migration_id} holds the barrier (its claim {who}); next: {advice}"
            return [Finding(kind="migration_in_progress", message=message, details={**details, "migration_id": migration_id})]
        if holder.online and stamp == FORMAT_4:
            effect = "writers go on, other migrations wait (an online migration: prepare)"
        else:
            effect = "every writer is refused"
        message = f"the claim of migration {holder.migration_id} is {who} at stamp {stamp}: {effect}; next: {advice}"
        return [Finding(kind="claim_held", message=message, details=details)]
    if stamp != FORMAT_MIGRATING:
        return []
    advice = unclaimed_barrier_next_step(store, str(migration_id))
    message = f"stamp is 'migrating': migration {migration_id} holds the barrier without a claim; next: {advice}"
    return [Finding(kind="migration_in_progress", message=message, details={"migration_id": migration_id, "next": advice})]


def _latest_migration(store: GraphStore) -> str | None:
    """The newest migration that left a directory (ids are ULIDs), or None."""
    ids = migration_ids(store)
    return ids[-1] if ids else None


def _parse_utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _elapsed(replay: LedgerReplay) -> float:
    """Seconds from the first to the last ledger record: what the migration took so far.

    The same on every read (a dead migration's does not grow with the clock).
    """
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


def status(store: GraphStore, tail_records: int | None = None) -> tuple[dict[str, Any], LedgerReplay | None]:
    """The stamp, the claim and who acts for it, and the latest migration's ledger.

    The ledger shown is its last ``tail_records`` records (or all), with the folded state of all of
    them. Returns the JSON document and the replayed ledger as shown (None if no migration ever
    wrote a ledger record: none ran, or its holder died between taking the claim and its first
    record). ``next`` names one command to run, with the claim's token (:func:`claim_next_step`).
    ``phase`` is the ledger's phase (``prepared`` between prepare and cutover),
    ``barrier_age_seconds`` how long the barrier has been up (behind it only, else None) and
    ``outage_seconds`` how long writers were held in all (None before any barrier).
    """
    manifest = Manifest.of_graph(store)
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
        "phase": None,
        "barrier_age_seconds": None,
        "outage_seconds": None,
        "next": _next_step(store, stamp, stamp_migration, holder),
    }
    if replay is None:
        return document, None
    document["phase"] = replay.state.phase
    document["outage_seconds"] = replay.state.outage_seconds
    if stamp == FORMAT_MIGRATING:
        raised = [record.at for _, record in replay.records if isinstance(record, BarrierSet)]
        if raised:
            document["barrier_age_seconds"] = round((dt.datetime.now(dt.UTC) - _parse_utc(raised[-1])).total_seconds(), 3)
    with_sidecar = set(layout.remaining(store, replay.state.migration_id))
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


def next_step(store: GraphStore) -> str:
    """The one command the operator runs next about the graph's migration, as ``status`` prints it."""
    stamp, stamp_migration = Manifest(store).read_stamp()
    return _next_step(store, stamp, stamp_migration, inspect(store, CLAIM_PATH))


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
