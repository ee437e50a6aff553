"""A migration's claim from start to end: the migration its holder carries, begin, attach, show, break, abort.

A :class:`Migration` is the state one running migration carries: store, manifest, ledger,
identity (migration id and claim token), progress, the claim document it acts under and the
executor that validates its images. Its ledger appends are serialized
(:meth:`Migration.record`), and :meth:`Migration.require_claim` stops it once its claim no longer
carries its token.

A process begins a migration under a new claim, or attaches to the one whose claim it has the
token of. :func:`begin` (``run``, ``refence``) starts the executor before anything is written, so
an executor that cannot start leaves the graph untouched; then it takes the claim
(create-if-absent: a claim held by anyone is ``claim_held``; the claim names this process) and
records ``migration_started`` before the migration acts. Every other process that acts for an
existing claim records itself first (:func:`omnigraph.claims.acting.take_over`, through
:func:`~omnigraph.claims.acting.acting_for` in the command). :func:`attach` (``resume``,
``abort``, ``repair``, ``claim break``) builds the :class:`Migration` of an existing claim;
:func:`replay_started` replays its ledger, starting it from the claim when the holder died
between taking the claim and its first record. Either way ``migration_started`` names the process
the claim names (owner, host, pid, release).

Failpoint: ``migrate.after_claim_created`` (the claim exists, the ledger does not yet).

The operator's commands on the claim: ``claim show`` (:func:`show_claim`) is read-only. ``claim break`` (:func:`break_claim`) removes the
claim of a holder the operator has proven dead: it needs the holder's exact token and a reason,
refuses (``claim_held``) while a process acting for the claim (its creator, or a resume, abort or
repair that has not ended) is alive on this host (:func:`omnigraph.claims.acting.take_over`, as
``abort`` and ``resume`` do), records ``claim_broken`` in the migration's ledger first (started
from the claim if the holder never started it), then removes the claim through
:func:`omnigraph.claims.claim.break_`, which leaves its audit record next to the claim. Breaking the
claim does not lower the barrier: a graph left at stamp ``migrating`` is then aborted with the
broken claim's token (``abort`` accepts it), and a graph still at stamp ``4`` can be migrated
again.

``abort --token`` (:func:`abort_migration`) lowers the barrier of a migration that did not reach
stamp 5: it puts stamp ``4`` back, records ``aborted``, removes the unit sidecars left behind and
releases the claim. Installed PKs and migration forks stay (roll-forward only), so old writers
may run again and a later ``run`` validates every image again. It is idempotent: an abort
interrupted after its ledger records is finished by running it again.

Failpoint: ``abort.before_release``.

"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from omnigraph.claims.acting import ActingProcess, acting_for, acting_processes
from omnigraph.claims.claim import acquire, break_, inspect, read_break, release
from omnigraph.claims.document import ClaimDocument
from omnigraph.claims.errors import claim_held
from omnigraph.engine.errors import FormatRefused, NotFound, PreconditionFailed
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.progress import Progress, SilentProgress
from omnigraph.engine.schema.ids import new_ulid
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5, FORMAT_MIGRATING
from omnigraph.engine.storage.store import GraphStore
from omnigraph.ledger.ledger import Ledger, LedgerReplay
from omnigraph.ledger.records import Aborted, AnswerCheck, ClaimBroken, ClaimReleased, MigrationStarted
from omnigraph.migrator import layout
from omnigraph.migrator.executors import ImageExecutor, LocalExecutor
from omnigraph.migrator.inspection import held_claim
from omnigraph.migrator.layout import CLAIM_OPERATION, CLAIM_PATH, ledger_dir


@dataclass
class Migration:
    """A migration this process holds the claim of.

    ``executor`` validates its images; ``claim`` is the claim document it acts under.
    """

    store: GraphStore
    manifest: Manifest
    ledger: Ledger
    migration_id: str
    token: str
    progress: Progress
    claim: ClaimDocument
    executor: ImageExecutor = field(default_factory=LocalExecutor)
    _appending: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, record_type: type[Any], **fields: Any) -> int:
        """Append a ledger record of ``record_type`` carrying this migration's token and id.

        One append at a time: units in flight at once share the ledger's one sequence.
        """
        record = record_type(token=self.token, migration_id=self.migration_id, **fields)
        with self._appending:
            return self.ledger.append(record)

    def require_claim(self) -> None:
        """``claim_held`` unless the claim still carries this migration's token.

        Checked before each unit and before the stamp, so a migration whose claim was broken or
        replaced stops.
        """
        holder = inspect(self.store, CLAIM_PATH)
        if holder is None or holder.token != self.token:
            raise claim_held(
                f"the migration claim of {self.store.uri} no longer carries this migration's token; stopping before any further effect",
                holder,
                path=CLAIM_PATH,
            )


@contextmanager
def begin(
    store: GraphStore,
    owner: str,
    progress: Progress,
    executor: ImageExecutor | None,
    answer_check: AnswerCheck | None = None,
    *,
    online: bool = False,
) -> Iterator[Migration]:
    """A new migration of ``store`` held by this process for ``owner``, for the block to drive.

    Its start is recorded (with the ``answer_check`` it is asked for). ``executor`` (default: this
    process) is started first; the preconditions are the caller's. An ``online`` claim
    (``prepare``) does not bar the writers of a format-4 graph
    (:class:`~omnigraph.claims.document.ClaimDocument`). If the block (or the start record) raises
    while the claim is still held, this process records that it stopped acting for it
    (:func:`omnigraph.claims.acting.ended`), so a ``resume`` in another process is not refused for
    it. Failpoint ``migrate.after_claim_created``: the claim exists, the ledger does not yet.
    """
    executor = executor or LocalExecutor()
    executor.start()
    claim = acquire(store, CLAIM_PATH, operation=CLAIM_OPERATION, migration_id=new_ulid(), owner=owner, online=online)
    failpoint("migrate.after_claim_created")
    with acting_for(store, CLAIM_PATH, claim, action="run", owner=owner, take=False):
        m = attach(store, claim, progress, executor)
        _record_start(m, claim, answer_check)
        yield m


def attach(store: GraphStore, claim: ClaimDocument, progress: Progress, executor: ImageExecutor | None = None) -> Migration:
    """The migration ``claim`` was taken for, acting with its token.

    ``executor`` (default: this process) validates whatever images it still has to validate. Reads
    and writes nothing.
    """
    return Migration(
        store,
        Manifest(store),
        Ledger(store, ledger_dir(claim.migration_id)),
        claim.migration_id,
        claim.token,
        progress,
        claim,
        executor or LocalExecutor(),
    )


def held_migration(store: GraphStore, token: str, progress: Progress, executor: ImageExecutor | None = None) -> Migration:
    """The migration whose claim carries ``token`` (:func:`~omnigraph.migrator.inspection.held_claim`)."""
    return attach(store, held_claim(store, token), progress, executor)


def replay_started(m: Migration, claim: ClaimDocument, answer_check: AnswerCheck | None = None) -> LedgerReplay:
    """The migration's ledger, replayed.

    A ledger that does not exist yet (the holder of ``claim`` died before its first record, so
    nothing recorded the answer check it was asked for: the resume's ``answer_check`` is the one)
    is started from ``claim`` first.
    """
    try:
        return m.ledger.replay()
    except NotFound:
        _record_start(m, claim, answer_check)
        return m.ledger.replay()


def _record_start(m: Migration, claim: ClaimDocument, answer_check: AnswerCheck | None) -> None:
    m.record(
        MigrationStarted,
        owner=claim.owner,
        host=claim.host,
        pid=claim.pid,
        tool_version=claim.tool_version,
        graph_uri=m.store.uri,
        answer_check=answer_check,
    )


def holder_liveness(processes: list[ActingProcess]) -> str:
    """One word for the processes acting for a claim.

    ``alive`` if one of them is alive on this host and has not ended, else ``unknown (another host:
    check there)`` if one that has not ended is on another host, else ``dead``.
    """
    states = {p.liveness for p in processes}
    if "alive" in states:
        return "alive"
    return next((state for state in states if state.startswith("unknown")), "dead")


def show_claim(store: GraphStore) -> dict[str, Any]:
    """The ``claim show`` document: the claim, who acts for it and the stamp.

    That is the claim (or None), every process recorded as acting for it (its creator first, then
    each resume, abort, repair or break) with its liveness as far as this host can tell, the word
    for all of them (``holder_process``: see :func:`holder_liveness`) and the stamp.
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
    """Read the ledger once before acting, so one that cannot be read is refused with nothing written.

    A ledger with no record yet (its holder died right after claiming) is fine.
    """
    try:
        m.ledger.replay()
    except NotFound:
        return


def abort_held(m: Migration, reason: str) -> dict[str, Any]:
    """Abort the migration this process drives (it acts for the claim already): :func:`abort_migration` without its checks."""
    return _abort(m, False, m.token, reason, m.manifest.read_stamp()[0])


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
