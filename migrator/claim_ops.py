"""[omnigraph.migrator.claim_ops]
``claim show`` and ``claim break``: an operator's view of the migration claim, and its removal.

:func:`show_claim` is read-only. :func:`break_claim` removes the claim of a holder the operator has
proven dead: it needs the holder's exact token and a reason, refuses (``claim_held``) while a
process acting for the claim (its creator, or a resume, abort or repair that has not ended) is
alive on this host (:func:`omnigraph.claims.acting.take_over`, as ``abort`` and ``resume`` do), records
``claim_broken`` in the migration's ledger first (started from the claim if the holder never
started it), then removes the claim through :func:`claims.break_`, which leaves its audit record
next to the claim. Breaking the claim does not lower the barrier: a graph left at stamp
``migrating`` is then aborted with the broken claim's token (``abort`` accepts it), and a graph
still at stamp ``4`` can be migrated again.


[omnigraph.migrator.claim_ops]
``abort --token``: lower the barrier of a migration that did not reach stamp 5.

Puts stamp ``4`` back, records ``aborted``, removes the unit sidecars left behind and releases the
claim. Installed PKs and migration forks stay (roll-forward only), so old writers may run again
and a later ``run`` validates every image again.

Failpoint: ``abort.before_release``.

"""

from __future__ import annotations

from typing import Any

from omnigraph.claims.acting import ActingProcess, acting_for, acting_processes
from omnigraph.claims.claim import break_, inspect, read_break, release
from omnigraph.claims.document import ClaimDocument
from omnigraph.engine.errors import FormatRefused, NotFound, PreconditionFailed
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.progress import SilentProgress
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5, FORMAT_MIGRATING
from omnigraph.engine.storage.store import GraphStore
from omnigraph.ledger.records import Aborted, ClaimBroken, ClaimReleased
from omnigraph.migrator import layout
from omnigraph.migrator.context import Migration, attach, replay_started
from omnigraph.migrator.inspection import held_claim
from omnigraph.migrator.layout import CLAIM_PATH


def holder_liveness(processes: list[ActingProcess]) -> str:
    """One word for the processes acting for a claim: ``alive`` if one of them is alive on this
    host and has not ended, else ``unknown (another host: check there)`` if one that has not ended
    is on another host, else ``dead``.
    """
    states = {p.liveness for p in processes}
    if "alive" in states:
        return "alive"
    return next((state for state in states if state.startswith("unknown")), "dead")


def show_claim(store: GraphStore) -> dict[str, Any]:
    """The claim (or None), every process recorded as acting for it (its creator first, then each
    resume, abort, repair or break) with its liveness as far as this host can tell, the word for
    all of them (``holder_process``: see :func:`holder_liveness`) and the stamp.
    """
    manifest = Manifest.of_graph(store)
    stamp, migration_id = manifest.read_stamp()
    holder = inspect(store, CLAIM_PATH)
    processes = acting_processes(store, CLAIM_PATH, holder) if holder else []
    return {
        "graph": store.uri,
        "stamp": stamp,
        "stamp_migration_id": migration_id,
        "claim": holder.model_dump(mode="json") if holder else None,
        "holder_process": holder_liveness(processes) if holder else None,
        "acting": [p.to_json() for p in processes],
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
        return f"`omnigraph-migrate run {uri}` migrates it again"
    return f"`omnigraph-migrate status {uri}`"


def break_claim(store: GraphStore, token: str, reason: str, breaker: str) -> dict[str, Any]:
    """Remove the claim holding ``token`` (its holder proven dead); returns the break document."""
    manifest = Manifest.of_graph(store)
    holder = inspect(store, CLAIM_PATH)
    if holder is None:
        raise NotFound(f"no migration claim on {store.uri}: nothing to break", {"uri": store.uri})
    if holder.token != token:
        raise PreconditionFailed(
            f"refusing to break the claim of {store.uri}: the token given is not the holder's "
            f"(`omnigraph-migrate claim show {store.uri}` shows it); nothing was changed",
            {"expected": "the holder's token", "actual": token, "holder": holder.model_dump(mode="json")},
        )
    with acting_for(store, CLAIM_PATH, holder, action="break the claim", owner=breaker):
        _record_break(store, holder, breaker, reason)
        record = break_(store, CLAIM_PATH, token, reason, breaker)
    stamp, _ = manifest.read_stamp()
    return {
        "graph": store.uri,
        "stamp": stamp,
        "broken": record.model_dump(mode="json"),
        "next": _after_break(store.uri, stamp, token),
    }


def abort_migration(store: GraphStore, token: str, reason: str, owner: str) -> dict[str, Any]:
    """Put stamp 4 back and release the claim (before stamp 5 only); PKs and forks stay.

    Refused while a process acting for the claim (its creator, or a resume, abort or repair that
    has not ended) is alive on this host (``claim_held``); this process (``owner``) is recorded as
    acting for it before anything else (:mod:`omnigraph.claims.acting`). Refused after stamp 5
    (``format_refused``: ``resume`` finishes it). A claim already broken with ``token`` is
    accepted while its migration still holds the barrier (nothing to release). A migration whose
    holder died before its first ledger record is started from the claim first, then aborted.

    Idempotent: an abort interrupted after its ledger records is finished by running it again
    (a resume of an aborted migration is refused and says so). Returns ``{migration_id, stamp,
    sidecars_removed}``.
    """
    m, broken = _abortable_migration(store, token)
    stamp, _ = m.manifest.read_stamp()
    if stamp == FORMAT_5:
        raise FormatRefused(
            f"migration {m.migration_id} already wrote stamp 5; it cannot be aborted. "
            f"Finish it with `omnigraph-migrate resume {m.store.uri} --token {token}`.",
            {"stamp": stamp},
        )
    _readable_ledger(m)
    with acting_for(m.store, CLAIM_PATH, m.claim, action="abort", owner=owner):
        return _abort(m, broken, token, reason, stamp)


def _readable_ledger(m: Migration) -> None:
    """Read the ledger once before acting, so one that cannot be read is refused with nothing
    written; a ledger with no record yet (its holder died right after claiming) is fine.
    """
    try:
        m.ledger.replay()
    except NotFound:
        return


def _abort(m: Migration, broken: bool, token: str, reason: str, stamp: str | None) -> dict[str, Any]:
    """The body of :func:`abort_migration`, acting for the claim."""
    state = replay_started(m, m.claim).state
    if stamp == FORMAT_MIGRATING:
        m.manifest.write_stamp(FORMAT_4, None)
    if not state.aborted:
        m.record(Aborted, stamp_restored=FORMAT_4, reason=reason)
    leftovers = layout.remaining(m.store, m.migration_id)
    for unit_id in leftovers:
        layout.delete(m.store, m.migration_id, unit_id)
    if not state.claim_released and not broken:
        m.record(ClaimReleased)
    failpoint("abort.before_release")
    if not broken:
        release(m.store, CLAIM_PATH, token)
    return {"migration_id": m.migration_id, "stamp": FORMAT_4, "sidecars_removed": leftovers}


def _abortable_migration(store: GraphStore, token: str) -> tuple[Migration, bool]:
    """The migration ``abort --token`` acts on, and whether its claim was broken.

    Normally the claim carries ``token``. A claim broken with ``token`` (``claim break``) also
    qualifies while the barrier still names its migration, so the barrier a dead holder left can
    be lowered.
    """
    if inspect(store, CLAIM_PATH) is None:
        record = read_break(store, CLAIM_PATH, token)
        stamp, migration_id = Manifest(store).read_stamp()
        if record is not None and stamp == FORMAT_MIGRATING and migration_id == record.claim.migration_id:
            return attach(store, record.claim, SilentProgress()), True
    return attach(store, held_claim(store, token), SilentProgress()), False
