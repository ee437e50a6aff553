"""The checks at the door of every migration command, and the read-only commands preflight, plan and duplicates.

Every check here is read-only and either passes or raises the error that says what the operator
runs next; nothing here writes to the graph, and no command here takes the claim.

The fleet seen by the migrator: who announced itself as a writer, and refusing while one is
live. ``preflight`` and ``run`` list every record of the fleet registry
(:mod:`omnigraph.engine.access.fleet`) with its status (:func:`fleet_document`) and refuse
(``fleet_active``, exit 3; :func:`refuse_live_writers`) while a record is ``live``: a server or
long load of either format that heartbeated within
:data:`omnigraph.engine.access.fleet.STALE_AFTER_SECONDS` and is not known dead.
``--ignore-fleet`` overrides it (the operator knows better, for example a record left by a host
that was switched off). The registry is information, never a lock: the barrier itself is the
claim and the ``migrating`` stamp that every writer re-reads before it commits.

The preconditions: ``run`` first asks :func:`omnigraph.migrator.verify.already_fenced` (a graph
already at stamp 5, unclaimed and passing ``verify`` needs nothing), then
:func:`refuse_unless_stamp_4`, which ``preflight`` shares. ``refence`` needs
:func:`refuse_unless_refence_needed`. ``resume`` and ``abort`` act only with the claim's exact
token (:func:`held_claim`); ``resume`` refuses a claim broken with that token
(:func:`refuse_broken`); whoever acts for an existing claim is refused while another process
acting for it is alive on this host (:mod:`omnigraph.claims.acting`). Every ``claim_held`` refusal
is made by :func:`omnigraph.claims.errors.claim_held`.

The read-only commands: :func:`preflight`, :func:`plan_command` (``plan``) and :func:`duplicates`.
``verify`` is :func:`omnigraph.migrator.verify.verify` and ``status`` is
:func:`omnigraph.migrator.status.status`; none of them takes the claim either.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from omnigraph.claims.claim import inspect, read_break
from omnigraph.claims.document import ClaimDocument
from omnigraph.claims.errors import claim_held
from omnigraph.engine.access import fleet
from omnigraph.engine.access.writer_audit import readiness_problems
from omnigraph.engine.errors import (
    EXIT_CLAIM_HELD,
    FormatRefused,
    NotFound,
    OmnigraphError,
    PreconditionFailed,
    RecoveryRequired,
    ValidationFailed,
)
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import now_ms
from omnigraph.engine.reconcile import drift, recovery
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5, FORMAT_MIGRATING
from omnigraph.engine.storage.store import GraphStore
from omnigraph.migrator.layout import CLAIM_PATH
from omnigraph.migrator.plan import (
    MigrationPlan,
    build_plan,
    inventory,
    is_inherited,
    out_of_band_reports,
    refuse_row_drift,
    validate_images,
)
from omnigraph.migrator.status import claim_next_step, unclaimed_barrier_next_step

if TYPE_CHECKING:
    from omnigraph.engine.progress import Progress


class FleetActive(OmnigraphError):
    """A registered writer is still running: drain it before the migration starts."""

    code = "fleet_active"
    http_status = 409
    exit_code = EXIT_CLAIM_HELD


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fleet_document(store: GraphStore) -> list[dict[str, Any]]:
    """Every fleet record with its ``status`` and heartbeat age, ordered by instance id."""
    now = now_ms()
    return [
        {
            **record.model_dump(mode="json"),
            "status": fleet.record_status(record, now),
            "heartbeat_age_seconds": round((now - record.heartbeat_at) / 1000, 1),
        }
        for record in fleet.list_records(store)
    ]


def describe(entry: dict[str, Any]) -> str:
    """One line naming a fleet record of :func:`fleet_document`.

    The line gives its program, role, format, host, pid, address, start, heartbeat age and status.
    """
    where = f" at {entry['address']}" if entry.get("address") else ""
    return (
        f"{entry['program']} {entry['role']} (writes format {entry['writes_format']}) on {entry['host']} "
        f"pid {entry['pid']}{where}, started {_iso(entry['started_at'])}, last heartbeat "
        f"{entry['heartbeat_age_seconds']}s ago [{entry['status']}]"
    )


def refuse_live_writers(store: GraphStore, ignore_fleet: bool) -> list[dict[str, Any]]:
    """The fleet document; ``fleet_active`` if any record is live and ``ignore_fleet`` is not set."""
    document = fleet_document(store)
    live = [entry for entry in document if entry["status"] == "live"]
    if live and not ignore_fleet:
        names = "; ".join(describe(entry) for entry in live)
        raise FleetActive(
            f"{len(live)} writer(s) registered on {store.uri} are still running: {names}. Stop them "
            f"(a clean shutdown removes their record), then run this command again; a record whose "
            f"process is known gone can be overridden with --ignore-fleet",
            {"fleet": document, "live": [entry["instance"] for entry in live]},
        )
    return document


def refuse_unless_stamp_4(store: GraphStore, manifest: Manifest, *, live_writers: bool = False) -> None:
    """The graph must be at format 4, with no claim and no write-path recovery.

    Stamp 5 with a claim held and stamp ``migrating`` are ``claim_held`` (each naming the command
    that moves on), any other stamp but 4 is ``format_refused``, a claim at stamp 4 is
    ``claim_held``, pending intents are ``recovery_required``. With ``live_writers`` (an online
    migration: writers go on while it prepares) only the intents of writers that are gone are;
    the commits of live writers are left to the cutover, which waits for them.
    """
    stamp, migration_id = manifest.read_stamp()
    if stamp == FORMAT_5 and (holder := inspect(store, CLAIM_PATH)) is not None:
        raise claim_held(
            f"{store.uri} is stamped 5 but the claim of migration {holder.migration_id} is still held by "
            f"{holder.owner} on {holder.host} (pid {holder.pid}); next: {claim_next_step(store, holder, stamp)}",
            holder,
            stamp=stamp,
        )
    if stamp == FORMAT_MIGRATING:
        holder = inspect(store, CLAIM_PATH)
        advice = claim_next_step(store, holder, stamp) if holder is not None else unclaimed_barrier_next_step(store, str(migration_id))
        raise claim_held(
            f"migration {migration_id} holds the barrier on {store.uri}"
            + (f" (claim held by {holder.owner} on {holder.host}, pid {holder.pid})" if holder else " (its claim was broken)")
            + f"; next: {advice}",
            holder,
            stamp=stamp,
            migration_id=migration_id,
        )
    if stamp == FORMAT_5:
        raise FormatRefused(
            f"{store.uri} is already at format 5 (fenced); there is nothing to migrate. `omnigraph-migrate verify {store.uri}` checks it.",
            {"stamp": stamp},
        )
    if stamp != FORMAT_4:
        raise FormatRefused(f"{store.uri} has format stamp {stamp!r}; only format 4 can be migrated", {"stamp": stamp})
    _refuse_claim(store)
    pending = [i for i in recovery.list_intents(store) if not (live_writers and recovery.owner_is_alive(store, i))]
    if pending:
        ids = [i.operation_id for i in pending]
        raise RecoveryRequired(
            ids[0],
            f"{len(ids)} interrupted write(s) are pending recovery on {store.uri}; "
            f"`omnigraph recover {store.uri}` resolves those of writers that are gone, then preflight again",
            pending=ids,
        )


def refuse_unless_refence_needed(store: GraphStore, manifest: Manifest, owner: str) -> None:
    """Refuse ``refence`` unless the graph needs fencing again and nothing else holds it.

    ``refence`` needs stamp 5 (else ``format_refused``), a readiness problem
    (:func:`omnigraph.engine.access.writer_audit.readiness_problems`; none is
    ``precondition_failed``), no claim (``claim_held``) and no commit in flight by a live process
    on this host (``recovery_required``; ``owner`` is named in the command to run again).
    """
    stamp, _ = manifest.read_stamp()
    if stamp != FORMAT_5:
        raise FormatRefused(
            f"refence fences a stamp-5 graph again; {store.uri} is at stamp {stamp} (see `omnigraph-migrate status {store.uri}`)",
            {"stamp": stamp},
        )
    if not readiness_problems(store, manifest):
        raise PreconditionFailed(
            f"{store.uri} has no format-4 commit after its stamp and every pinned table has PK [id]: "
            f"nothing to fence again (`omnigraph-migrate verify {store.uri}` checks the rest)",
            {"expected": "a graph that needs fencing again", "actual": "fenced"},
        )
    _refuse_claim(store)
    live = [i for i in recovery.list_intents(store) if recovery.owner_is_alive(store, i)]
    if live:
        raise RecoveryRequired(
            live[0].operation_id,
            f"{live[0].program} (pid {live[0].pid}) is committing to {store.uri} on this host; stop it, "
            f"then run `omnigraph-migrate refence {store.uri} --owner {owner}` again",
        )


def _refuse_claim(store: GraphStore) -> None:
    """``claim_held`` if any migration claim exists: a new migration would not get it."""
    holder = inspect(store, CLAIM_PATH)
    if holder is not None:
        stamp, _ = Manifest(store).read_stamp()
        raise claim_held(
            f"a migration claim exists on {store.uri}: {holder.owner} on {holder.host} (pid {holder.pid}), "
            f"migration {holder.migration_id}; next: {claim_next_step(store, holder, stamp)}",
            holder,
            path=CLAIM_PATH,
        )


def held_claim(store: GraphStore, token: str) -> ClaimDocument:
    """The migration claim, which must carry ``token``.

    ``not_found`` if there is no claim, ``precondition_failed`` if it carries another token.
    """
    holder = inspect(store, CLAIM_PATH)
    if holder is None:
        raise NotFound(
            f"no migration claim on {store.uri}: nothing to resume or abort "
            f"(`omnigraph-migrate status {store.uri}` shows the last migration)",
            {"uri": store.uri},
        )
    if holder.token != token:
        raise PreconditionFailed(
            f"the token does not match the claim held by {holder.owner} on {holder.host} "
            f"(migration {holder.migration_id}); use the token shown by `omnigraph-migrate status`",
            {"expected": "the holder's token", "actual": token, "holder": holder.model_dump(mode="json")},
        )
    return holder


def refuse_broken(store: GraphStore, token: str) -> None:
    """``precondition_failed`` if there is no claim and the one carrying ``token`` was broken.

    Its holder's claim is gone for good, so its migration is not resumed (``abort --token`` lowers
    the barrier it left).
    """
    if inspect(store, CLAIM_PATH) is not None:
        return
    record = read_break(store, CLAIM_PATH, token)
    if record is not None:
        raise PreconditionFailed(
            f"the claim of migration {record.claim.migration_id} was broken by {record.breaker} "
            f"({record.reason}); a broken migration is not resumed. "
            f"`omnigraph-migrate abort {store.uri} --token {token}` lowers the barrier it left, then run "
            "the migration again",
            {"expected": "a held claim", "actual": "broken", "migration_id": record.claim.migration_id},
        )


def _plan_document(plan: MigrationPlan) -> dict[str, Any]:
    """The branches, the units (each marked ``inherited`` or not) and the image count of ``plan``."""
    return {
        "branches": [b.model_dump(mode="json") for b in plan.branches],
        "units": [{**u.model_dump(mode="json"), "inherited": is_inherited(u)} for u in plan.units],
        "images": len(plan.images()),
    }


def plan_command(store: GraphStore) -> dict[str, Any]:
    """The units a migration would process now."""
    manifest = Manifest.of_graph(store)
    stamp, _ = manifest.read_stamp()
    return {"graph": store.uri, "stamp": stamp, **_plan_document(build_plan(manifest))}


def refuse_settled_row_drift(store: GraphStore, manifest: Manifest) -> list[drift.TableDriftReport]:
    """``table_drift`` for an out-of-band commit that changes rows, on a table no armed commit touches; every report.

    A table a commit in flight writes is past its pin until that commit publishes: that is not drift.
    """
    busy = {table for intent in recovery.list_intents(store) for table in recovery.touched_tables(intent)}
    reports = out_of_band_reports(store, manifest)
    refuse_row_drift(store, [r for r in reports if (r.table_path, r.table_branch) not in busy])
    return reports


def preflight(store: GraphStore, validate: bool, progress: Progress, ignore_fleet: bool = False) -> dict[str, Any]:
    """The ``preflight`` document: stamp 4, no intents of gone writers, no claim, no live registered writer, every unit listed.

    A live registered writer is refused unless ``ignore_fleet``; with ``validate`` the full id scan
    runs too. Out-of-band table commits are listed under ``out_of_band``: ``run`` adopts the ones
    that change no row before planning (the listed units show the pins before that adoption);
    row-changing drift is refused with ``table_drift``.
    """
    manifest = Manifest.of_graph(store)
    refuse_unless_stamp_4(store, manifest, live_writers=True)
    fleet = refuse_live_writers(store, ignore_fleet)
    reports = refuse_settled_row_drift(store, manifest)
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


def duplicates(store: GraphStore, progress: Progress) -> dict[str, Any]:
    """The duplicate/null inventory of every pinned image, without a claim."""
    manifest = Manifest.of_graph(store)
    plan = build_plan(manifest)
    entries = inventory(plan, validate_images(store, plan, progress))
    return {"graph": store.uri, "images": len(plan.images()), "inventory": [e.model_dump(mode="json") for e in entries]}
