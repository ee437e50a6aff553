"""[omnigraph.migrator.context]
The state one running migration carries: store, manifest, ledger, identity, progress.

[omnigraph.migrator.context]
How a process comes to act for a migration: it begins one under a new claim, or attaches to the
one whose claim it has the token of.

:func:`begin` (``run``, ``refence``) starts the executor before anything is written, so an
executor that cannot start leaves the graph untouched; then it takes the claim
(create-if-absent: a claim held by anyone is ``claim_held``; the claim names this process) and
records ``migration_started`` before the migration acts. Every other process that acts for an
existing claim records itself first (:func:`omnigraph.claims.acting.take_over`, called by the command).
:func:`attach` (``resume``, ``abort``, ``repair``, ``claim break``) builds the
:class:`~omnigraph.migrator.context.Migration` of an existing claim; :func:`replay_started` replays its
ledger, starting it from the claim when the holder died between taking the claim and its first
record. Either way ``migration_started`` names the process the claim names (owner, host, pid,
release).

"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from omnigraph.claims.acting import acting_for
from omnigraph.claims.claim import acquire, inspect
from omnigraph.claims.document import ClaimDocument
from omnigraph.claims.errors import claim_held
from omnigraph.engine.errors import NotFound
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.progress import Progress
from omnigraph.engine.schema.ids import new_ulid
from omnigraph.engine.storage.store import GraphStore
from omnigraph.ledger.ledger import Ledger, LedgerReplay
from omnigraph.ledger.records import AnswerCheck, MigrationStarted
from omnigraph.migrator.executors import ImageExecutor, LocalExecutor
from omnigraph.migrator.inspection import held_claim
from omnigraph.migrator.layout import CLAIM_OPERATION, CLAIM_PATH, ledger_dir


@dataclass
class Migration:
    """A migration this process holds the claim of; ``executor`` validates its images; ``claim``
    is the claim document it acts under.
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
        """Append a ledger record of ``record_type`` carrying this migration's token and id; one
        append at a time (units in flight at once share the ledger's one sequence).
        """
        record = record_type(token=self.token, migration_id=self.migration_id, **fields)
        with self._appending:
            return self.ledger.append(record)

    def require_claim(self) -> None:
        """``claim_held`` unless the claim still carries this migration's token: checked before
        each unit and before the stamp, so a migration whose claim was broken or replaced stops.
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
    store: GraphStore, owner: str, progress: Progress, executor: ImageExecutor | None, answer_check: AnswerCheck | None = None
) -> Iterator[Migration]:
    """A new migration of ``store`` held by this process for ``owner``, its start recorded (with
    the ``answer_check`` it is asked for), for the block to drive.

    ``executor`` (default: this process) is started first; the preconditions are the caller's.
    If the block (or the start record) raises while the claim is still held, this process records
    that it stopped acting for it (:func:`omnigraph.claims.acting.ended`), so a ``resume`` in another process
    is not refused for it. Failpoint ``migrate.after_claim_created``: the claim exists, the ledger
    does not yet.
    """
    executor = executor or LocalExecutor()
    executor.start()
    claim = acquire(store, CLAIM_PATH, operation=CLAIM_OPERATION, migration_id=new_ulid(), owner=owner)
    failpoint("migrate.after_claim_created")
    with acting_for(store, CLAIM_PATH, claim, action="run", owner=owner, take=False):
        m = attach(store, claim, progress, executor)
        _record_start(m, claim, answer_check)
        yield m


def attach(store: GraphStore, claim: ClaimDocument, progress: Progress, executor: ImageExecutor | None = None) -> Migration:
    """The migration ``claim`` was taken for, acting with its token; ``executor`` (default: this
    process) validates whatever images it still has to validate. Reads and writes nothing.
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
    """The migration's ledger, replayed; a ledger that does not exist yet (the holder of ``claim``
    died before its first record, so nothing recorded the answer check it was asked for: the
    resume's ``answer_check`` is the one) is started from ``claim`` first.
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
