"""``claim show`` and ``claim break``: an operator's view of the migration claim, and its removal.

:func:`show_claim` is read-only. :func:`break_claim` removes the claim of a holder the operator has
proven dead: it needs the holder's exact token and a reason, refuses (``claim_held``) when the
holder is on this host and its pid is alive (:func:`~migrator.preconditions.refuse_live_holder`,
as ``abort`` does), records ``claim_broken`` in the migration's ledger first (started from the
claim if the holder never started it), then removes the claim through :func:`claims.break_`,
which leaves its audit record next to the claim. Breaking the claim does
not lower the barrier: a graph left at stamp ``migrating`` is then aborted with the broken
claim's token (``abort`` accepts it), and a graph still at stamp ``4`` can be migrated again.
"""

from __future__ import annotations

from typing import Any

from claims import ClaimDocument, break_, holder_alive_here, inspect
from claims.liveness import holder_on_this_host
from engine.errors import NotFound, PreconditionFailed
from engine.maintenance.progress import SilentProgress
from engine.storage import FORMAT_4, FORMAT_5, FORMAT_MIGRATING, GraphStore
from ledger import ClaimBroken
from migrator.context import open_existing_graph
from migrator.layout import CLAIM_PATH
from migrator.preconditions import refuse_live_holder
from migrator.start import attach, replay_started


def _liveness(holder: ClaimDocument) -> str:
    if not holder_on_this_host(holder):
        return "unknown (another host: check there)"
    return "alive" if holder_alive_here(holder) else "dead"


def show_claim(uri: str) -> dict[str, Any]:
    """The claim (or None), whether its holder is alive as far as this host can tell, the stamp."""
    store, manifest = open_existing_graph(uri)
    stamp, migration_id = manifest.read_stamp()
    holder = inspect(store, CLAIM_PATH)
    return {
        "graph": store.uri,
        "stamp": stamp,
        "stamp_migration_id": migration_id,
        "claim": holder.model_dump(mode="json") if holder else None,
        "holder_process": _liveness(holder) if holder else None,
    }


def _record_break(store: GraphStore, holder: ClaimDocument, breaker: str, reason: str) -> None:
    """Append ``claim_broken`` to the holder's ledger (started from the claim if it has none)."""
    m = attach(store, holder, SilentProgress())
    replay_started(m, holder)
    m.record(ClaimBroken, breaker=breaker, reason=reason)


def _after_break(uri: str, stamp: str | None, token: str) -> str:
    if stamp == FORMAT_MIGRATING:
        return f"the barrier is still up: `omnigraph-migrate abort {uri} --token {token}` puts stamp 4 back"
    if stamp == FORMAT_5:
        return f"nothing: the graph is at stamp 5 (`omnigraph-migrate verify {uri}` checks it)"
    if stamp == FORMAT_4:
        return f"`omnigraph-migrate run {uri} --owner NAME` migrates it again"
    return f"`omnigraph-migrate status {uri}`"


def break_claim(uri: str, token: str, reason: str, breaker: str) -> dict[str, Any]:
    """Remove the claim holding ``token`` (its holder proven dead); returns the break document."""
    store, manifest = open_existing_graph(uri)
    holder = inspect(store, CLAIM_PATH)
    if holder is None:
        raise NotFound(f"no migration claim on {store.uri}: nothing to break", {"uri": store.uri})
    if holder.token != token:
        raise PreconditionFailed(
            f"refusing to break the claim of {store.uri}: the token given is not the holder's "
            f"(`omnigraph-migrate claim show {store.uri}` shows it); nothing was changed",
            {"expected": "the holder's token", "actual": token, "holder": holder.model_dump(mode="json")},
        )
    refuse_live_holder(holder, "break the claim")
    _record_break(store, holder, breaker, reason)
    record = break_(store, CLAIM_PATH, token, reason, breaker)
    stamp, _ = manifest.read_stamp()
    return {
        "graph": store.uri,
        "stamp": stamp,
        "broken": record.model_dump(mode="json"),
        "next": _after_break(store.uri, stamp, token),
    }

