"""The checks at the door of every migration command: read-only, each one either passes or raises
the error that says what the operator runs next.

``run`` first asks :func:`already_fenced` (a graph already at stamp 5, unclaimed and passing
``verify`` needs nothing), then :func:`refuse_unless_stamp_4`, which ``preflight`` shares.
``refence`` needs :func:`refuse_unless_refence_needed`. ``resume`` and ``abort`` act only with the
claim's exact token (:func:`held_claim`); ``resume`` refuses a claim broken with that token
(:func:`refuse_broken`); whoever acts for an existing claim is refused while another process
acting for it is alive on this host (:mod:`omnigraph.claims.acting`). Every ``claim_held`` refusal is made by :func:`claims.claim_held`.
Nothing here writes to the graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omnigraph.claims.claim import inspect, read_break
from omnigraph.claims.document import ClaimDocument
from omnigraph.claims.errors import claim_held
from omnigraph.engine.access.writer_audit import readiness_problems
from omnigraph.engine.errors import FormatRefused, NotFound, PreconditionFailed, RecoveryRequired
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.reconcile import recovery
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5, FORMAT_MIGRATING
from omnigraph.engine.storage.store import GraphStore
from omnigraph.migrator.advice import claim_next_step, unclaimed_barrier_next_step
from omnigraph.migrator.layout import CLAIM_PATH


@dataclass(frozen=True)
class UpToDate:
    """``run`` found the graph already fenced (stamp 5, no claim, ``verify`` passes): nothing done."""

    graph: str
    verified: dict[str, Any]

    @property
    def message(self) -> str:
        return f"{self.graph} is already at format 5, nothing to do"

    def to_json(self) -> dict[str, Any]:
        return {"status": "up_to_date", "graph": self.graph, "stamp": FORMAT_5, "message": self.message, "verify": self.verified}


def already_fenced(store: GraphStore, manifest: Manifest) -> UpToDate | None:
    """:class:`UpToDate` if the graph is at stamp 5 with no claim held and ``verify`` passes.

    None for any other stamp, or at stamp 5 while a claim is held (the caller refuses those). At
    stamp 5 a failing ``verify`` raises its ``drift_detected`` error.
    """
    from omnigraph.migrator.verify import verify_graph  # the answer check's query engine: only at stamp 5

    stamp, _ = manifest.read_stamp()
    if stamp != FORMAT_5 or inspect(store, CLAIM_PATH) is not None:
        return None
    return UpToDate(store.uri, verify_graph(store, manifest))


def refuse_unless_stamp_4(store: GraphStore, manifest: Manifest) -> None:
    """The graph must be at format 4, with no claim and no write-path recovery.

    Stamp 5 with a claim held and stamp ``migrating`` are ``claim_held`` (each naming the command
    that moves on), any other stamp but 4 is ``format_refused``, a claim at stamp 4 is
    ``claim_held``, pending intents are ``recovery_required``.
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
        if holder is not None:
            advice = claim_next_step(store, holder, stamp)
        else:
            advice = unclaimed_barrier_next_step(store, str(migration_id))
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
    pending = recovery.list_intents(store)
    if pending:
        ids = [i.operation_id for i in pending]
        raise RecoveryRequired(
            ids[0],
            f"{len(ids)} interrupted write(s) are pending recovery on {store.uri}; "
            f"`omnigraph recover {store.uri}` resolves those of writers that are gone, then preflight again",
            pending=ids,
        )


def refuse_unless_refence_needed(store: GraphStore, manifest: Manifest, owner: str) -> None:
    """``refence`` needs stamp 5 (else ``format_refused``), a readiness problem
    (:func:`omnigraph.engine.access.writer_audit.readiness_problems`; none is ``precondition_failed``), no
    claim (``claim_held``) and no commit in flight by a live process on this host
    (``recovery_required``; ``owner`` is named in the command to run again)."""
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
    live = [i for i in recovery.list_intents(store) if recovery.owner_is_alive(i)]
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
    """The migration claim, which must carry ``token``: ``not_found`` if there is no claim,
    ``precondition_failed`` if it carries another token."""
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
    """``precondition_failed`` if there is no claim and the one carrying ``token`` was broken:
    its holder's claim is gone for good, so its migration is not resumed (``abort --token``
    lowers the barrier it left)."""
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
