"""The fleet seen by the migrator: who announced itself as a writer, and refusing while one is live.

``preflight`` and ``run`` list every record of the fleet registry (:mod:`omnigraph.engine.access.fleet`) with its
status and refuse (``fleet_active``, exit 3) while a record is ``live``: a server or long load of
either format that heartbeated within :data:`omnigraph.engine.access.fleet.STALE_AFTER_SECONDS` and is not known
dead. ``--ignore-fleet`` overrides it (the operator knows better, for example a record left by a
host that was switched off). The registry is information, never a lock: the barrier itself is the
claim and the ``migrating`` stamp that every writer re-reads before it commits.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from omnigraph.engine.access import fleet
from omnigraph.engine.errors import EXIT_CLAIM_HELD, OmnigraphError
from omnigraph.engine.manifest.rows import now_ms
from omnigraph.engine.storage.store import GraphStore


class FleetActive(OmnigraphError):
    """A registered writer is still running: drain it before the migration starts."""

    code = "fleet_active"
    http_status = 409
    exit_code = EXIT_CLAIM_HELD


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    """One line naming a fleet record of :func:`fleet_document`: program, role, format, host, pid,
    address, start, heartbeat age and status."""
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
