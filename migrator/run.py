"""``run``, ``refence`` and ``resume``: the commands that carry a migration to stamp 5.

Each is its preconditions (:mod:`omnigraph.migrator.preconditions`), a start (:mod:`omnigraph.migrator.start`: a new
claim, or the held one) and the protocol under the claim (:mod:`omnigraph.migrator.driver`).

``run``: on a graph already at stamp 5 with no claim held and ``verify`` passing, nothing to do
(:class:`~omnigraph.migrator.preconditions.UpToDate`, exit 0, nothing written: re-running the upgrade is
safe). Otherwise the graph must be at stamp 4, with no live registered writer and no row-changing
out-of-band commit; then claim, barrier, plan, validate, units, verify, stamp ``5``, release.
``refence`` fences a stamp-5 graph again after a format-4 writer published to it. ``resume
--token`` continues the same migration from its ledger: completed units are skipped and the
others continue step by step (see :mod:`omnigraph.migrator.unit`). ``run`` and ``resume`` given answer
queries (:mod:`omnigraph.migrator.answers`) bind them against the catalog before anything is written, and
the driver records and re-checks their answers.

Failpoints: ``migrate.after_claim``, ``refence.after_barrier`` and those of
:mod:`omnigraph.migrator.driver`.
"""

from __future__ import annotations

import os
import socket

from omnigraph.claims.acting import acting_for
from omnigraph.engine.errors import NotFound, PreconditionFailed
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.progress import Progress
from omnigraph.engine.reconcile import recovery
from omnigraph.engine.storage.names import FORMAT_5, FORMAT_MIGRATING
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.records import BarrierSet, Resumed, StampWritten
from omnigraph.migrator.answers import AnswerQueries, check_queries, read_graph
from omnigraph.migrator.context import Migration
from omnigraph.migrator.driver import MigrationOutcome, drive, release_claim
from omnigraph.migrator.executors import ImageExecutor
from omnigraph.migrator.fleet_check import refuse_live_writers
from omnigraph.migrator.layout import CLAIM_PATH
from omnigraph.migrator.out_of_band import out_of_band_reports, refuse_row_drift
from omnigraph.migrator.preconditions import (
    UpToDate,
    already_fenced,
    held_claim,
    refuse_broken,
    refuse_unless_refence_needed,
    refuse_unless_stamp_4,
)
from omnigraph.migrator.start import attach, begin, replay_started


def run_migration(
    uri: str,
    owner: str,
    progress: Progress,
    ignore_fleet: bool = False,
    executor: ImageExecutor | None = None,
    queries: AnswerQueries | None = None,
    parallel: int | None = None,
) -> MigrationOutcome | UpToDate:
    """Migrate the format-4 graph at ``uri`` to format 5 (see the module docstring); refused while
    a registered writer is live unless ``ignore_fleet`` (:mod:`omnigraph.migrator.fleet_check`).

    ``executor`` validates the images (default: this process); it is started before the claim is
    taken, so an executor that cannot start leaves the graph untouched. ``queries`` are the
    answer check's (``bad_request`` before anything is written if one does not bind). ``parallel``
    units are in flight at once (:func:`omnigraph.migrator.driver.drive`)."""
    manifest = Manifest.of_graph(open_store(uri))
    store = manifest.store
    up_to_date = already_fenced(store, manifest)
    if up_to_date is not None:
        return up_to_date
    refuse_unless_stamp_4(store, manifest)
    refuse_live_writers(store, ignore_fleet)
    refuse_row_drift(store, out_of_band_reports(store, manifest))
    if queries is not None:
        check_queries(read_graph(uri), queries)
    with begin(store, owner, progress, executor, queries.check() if queries else None) as m:
        failpoint("migrate.after_claim")
        return drive(m, queries, parallel)


def refence_migration(
    uri: str, owner: str, progress: Progress, executor: ImageExecutor | None = None, parallel: int | None = None
) -> MigrationOutcome:
    """Fence again a stamp-5 graph that a format-4 writer published to after the stamp.

    Needs stamp 5 and a readiness problem (:func:`omnigraph.engine.access.writer_audit.readiness_problems`: a
    format-4 head after the stamp, or a pinned image without PK ``[id]``), no claim and no commit
    in flight by a live process on this host. It then runs the whole migration protocol again
    under a new claim: barrier (stamp ``migrating``, ``barrier_set`` with previous format 5),
    interrupted commits of dead writers resolved, plan, validation of every image (a duplicate
    the old writer let in stops it at ``validation_failed``, repaired like any other), PK
    installed where missing, verify, and stamp 5 recording the current heads as fenced. A crash
    is resumed with ``resume --token``; ``abort --token`` puts stamp 4 back, as for any migration.
    ``executor`` and ``parallel`` as for :func:`run_migration`.
    """
    manifest = Manifest.of_graph(open_store(uri))
    store = manifest.store
    refuse_unless_refence_needed(store, manifest, owner)
    with begin(store, owner, progress, executor) as m:
        m.manifest.write_stamp(FORMAT_MIGRATING, m.migration_id)
        m.record(BarrierSet, previous_format=FORMAT_5)
        failpoint("refence.after_barrier")
        recovery.resolve_intents(store, m.manifest)
        return drive(m, parallel=parallel)


def resume_migration(
    uri: str,
    token: str,
    owner: str,
    progress: Progress,
    executor: ImageExecutor | None = None,
    queries: AnswerQueries | None = None,
    parallel: int | None = None,
) -> MigrationOutcome:
    """Continue the migration whose claim carries ``token`` from its ledger; ``executor`` validates
    the images not yet found clean (started only if there is one).

    A claim broken with ``token`` is not resumed (its holder's claim is gone for good): the
    refusal names ``abort --token``, which lowers the barrier it left. An aborted migration is not
    resumed either. Refused (``claim_held``) while a process recorded as acting for the claim
    (its creator, or an earlier resume, abort or repair that has not ended) is alive on this
    host; this process is recorded as acting for it before anything else (:mod:`omnigraph.claims.acting`),
    and ``resumed`` names it (``owner``) in the ledger. At stamp 5 (the holder died after the
    stamp) it only records the stamp and releases the claim. Answers recorded by the migration
    are checked before the stamp whether or not ``queries`` are given; given, they must be the
    recorded ones (see :func:`omnigraph.migrator.driver.drive`); ``parallel`` as for :func:`run_migration`."""
    store = open_store(uri)
    refuse_broken(store, token)
    claim = held_claim(store, token)
    m = attach(store, claim, progress, executor)
    _refuse_aborted(m)
    if queries is not None:
        check_queries(read_graph(uri), queries)
    with acting_for(store, CLAIM_PATH, claim, action="resume", owner=owner):
        return _resume(m, owner, queries, parallel)


def _refuse_aborted(m: Migration) -> None:
    """``precondition_failed`` if the migration's ledger says it was aborted; reads only (a
    ledger that cannot be read is refused here, before anything is written)."""
    try:
        aborted = m.ledger.replay().state.aborted
    except NotFound:
        return  # its holder died before the first record: nothing was aborted
    if aborted:
        raise PreconditionFailed(
            f"migration {m.migration_id} was aborted; finish the abort with "
            f"`omnigraph-migrate abort {m.store.uri} --token {m.token}`, then start a new run",
            {"expected": "a migration that was not aborted", "actual": "aborted"},
        )


def _resume(m: Migration, owner: str, queries: AnswerQueries | None, parallel: int | None) -> MigrationOutcome:
    """The body of :func:`resume_migration`, acting for the claim."""
    token = m.token
    state = replay_started(m, m.claim, queries.check() if queries else None).state
    m.record(Resumed, owner=owner, host=socket.gethostname(), pid=os.getpid())
    stamp, _ = m.manifest.read_stamp()
    if stamp == FORMAT_5:
        if not state.stamp_written:
            m.record(StampWritten, format=FORMAT_5)
        release_claim(m)
        replay = m.ledger.replay()
        return MigrationOutcome(
            m.migration_id, token, len(replay.state.plan), len(replay.state.images), FORMAT_5, tuple(replay.state.answers)
        )
    return drive(m, queries, parallel)
