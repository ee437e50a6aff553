"""``abort --token``: lower the barrier of a migration that did not reach stamp 5.

Puts stamp ``4`` back, records ``aborted``, removes the unit sidecars left behind and releases the
claim. Installed PKs and migration forks stay (roll-forward only), so old writers may run again
and a later ``run`` validates every image again.

Failpoint: ``abort.before_release``.
"""

from __future__ import annotations

from typing import Any

from omnigraph.claims.acting import acting_for
from omnigraph.claims.claim import inspect, read_break, release
from omnigraph.engine.errors import FormatRefused, NotFound
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.progress import SilentProgress
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5, FORMAT_MIGRATING
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.records import Aborted, ClaimReleased
from omnigraph.migrator import sidecar as sidecars
from omnigraph.migrator.context import Migration
from omnigraph.migrator.layout import CLAIM_PATH
from omnigraph.migrator.preconditions import held_claim
from omnigraph.migrator.start import attach, replay_started


def abort_migration(uri: str, token: str, reason: str, owner: str) -> dict[str, Any]:
    """Put stamp 4 back and release the claim (before stamp 5 only); PKs and forks stay.

    Refused while a process acting for the claim (its creator, or a resume, abort or repair that
    has not ended) is alive on this host (``claim_held``); this process (``owner``) is recorded as
    acting for it before anything else (:mod:`omnigraph.claims.acting`). Refused after stamp 5
    (``format_refused``: ``resume`` finishes it). A claim already broken with ``token`` is
    accepted while its migration still holds the barrier (nothing to release). A migration whose
    holder died before its first ledger record is started from the claim first, then aborted.

    Idempotent: an abort interrupted after its ledger records is finished by running it again
    (a resume of an aborted migration is refused and says so). Returns ``{migration_id, stamp,
    sidecars_removed}``."""
    m, broken = _abortable_migration(uri, token)
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
    written; a ledger with no record yet (its holder died right after claiming) is fine."""
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
    leftovers = sidecars.remaining(m.store, m.migration_id)
    for unit_id in leftovers:
        sidecars.delete(m.store, m.migration_id, unit_id)
    if not state.claim_released and not broken:
        m.record(ClaimReleased)
    failpoint("abort.before_release")
    if not broken:
        release(m.store, CLAIM_PATH, token)
    return {"migration_id": m.migration_id, "stamp": FORMAT_4, "sidecars_removed": leftovers}


def _abortable_migration(uri: str, token: str) -> tuple[Migration, bool]:
    """The migration ``abort --token`` acts on, and whether its claim was broken.

    Normally the claim carries ``token``. A claim broken with ``token`` (``claim break``) also
    qualifies while the barrier still names its migration, so the barrier a dead holder left can
    be lowered."""
    store = open_store(uri)
    if inspect(store, CLAIM_PATH) is None:
        record = read_break(store, CLAIM_PATH, token)
        stamp, migration_id = Manifest(store).read_stamp()
        if record is not None and stamp == FORMAT_MIGRATING and migration_id == record.claim.migration_id:
            return attach(store, record.claim, SilentProgress()), True
    return attach(store, held_claim(store, token), SilentProgress()), False
