"""Who acts for a claim: its creator, and every process that took it over since, recorded first.

A claim names the process that created it. A process that later acts with the claim's token (a
``resume`` after a crash, an ``abort``, a ``repair``, a ``claim break``) does not rewrite the
claim: before it acts it appends an :class:`~omnigraph.claims.document.ActingRecord` ``started`` (host, pid,
process start) at ``<claim path>.acting/<token>/<seq:08d>.json``, create-if-absent with sequence
numbers from 1, and an ``ended`` record when it stops acting (also the creator, see
:func:`ended`). So every process that may be acting is on record before its first effect, and
anyone can ask which of them still runs (:func:`acting_processes`).

:func:`take_over` is the one way in, and it refuses (``claim_held``) while any recorded process
other than the caller is alive on this host and has not ended. The check and the record are one
step: the caller records itself at the sequence number right after the records it checked, so of
two processes taking over at once exactly one writes that number; the other reads the winner,
finds it alive and is refused. There is no time-based takeover: a recorded process that is alive
(or only paused) blocks every other one for as long as it lives; a process on another host is
never known alive here and so blocks nobody here (checking it is the operator's job, on its
host).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from omnigraph.claims.claim import inspect
from omnigraph.claims.document import ActingRecord, ClaimDocument
from omnigraph.claims.errors import ClaimCorrupt, claim_held, validation_problem
from omnigraph.claims.fields import utc_timestamp
from omnigraph.claims.liveness import alive_here, is_this_process
from omnigraph.engine.errors import ClaimHeld
from omnigraph.engine.storage.process import process_start_marker, this_host
from omnigraph.engine.storage.store import GraphStore, canonical_json

Liveness = Literal["alive", "ended", "dead", "unknown (another host: check there)"]

# Each lost race for a sequence number means another process recorded itself first; it is then
# found alive and the caller refused, so this bound is reached only by processes that record
# and end in between (each attempt is another create-if-absent).
_ATTEMPTS = 8


@dataclass(frozen=True)
class ActingProcess:
    """One process that acts, or acted, for a claim: its creator or a recorded takeover."""

    action: str
    owner: str
    host: str
    pid: int
    process_start: str | None
    since: str
    ended: bool

    @property
    def liveness(self) -> Liveness:
        """``ended`` (it said it stopped), ``alive`` (running here), ``dead``, or ``unknown`` (another host)."""
        if self.ended:
            return "ended"
        if self.host != this_host():
            return "unknown (another host: check there)"
        return "alive" if alive_here(self.host, self.pid, self.process_start) else "dead"

    @property
    def acting_here(self) -> bool:
        """True if it has not ended and runs on this host now."""
        return self.liveness == "alive"

    def is_caller(self) -> bool:
        """True if this process is the calling process itself."""
        return is_this_process(self.host, self.pid, self.process_start)

    def to_json(self) -> dict[str, Any]:
        """The process as a JSON object: its record's fields and its :attr:`liveness` now."""
        return {
            "action": self.action,
            "owner": self.owner,
            "host": self.host,
            "pid": self.pid,
            "process_start": self.process_start,
            "since": self.since,
            "liveness": self.liveness,
        }


def acting_dir(path: str, token: str) -> str:
    """Where the acting records of the claim at ``path`` holding ``token`` are."""
    return f"{path}.acting/{token}"


def acting_records(store: GraphStore, path: str, token: str) -> list[ActingRecord]:
    """Every acting record of the claim, in sequence order; ``ClaimCorrupt`` for one that does not parse."""
    directory = acting_dir(path, token)
    records = []
    for name in sorted(n for n in store.list(directory) if n.endswith(".json") and not n.startswith(".")):
        record_path = f"{directory}/{name}"
        try:
            records.append(ActingRecord.model_validate_json(store.read_bytes(record_path)))
        except ValidationError as error:
            raise ClaimCorrupt(record_path, validation_problem(error), what="acting record") from error
    return records


def acting_processes(store: GraphStore, path: str, claim: ClaimDocument) -> list[ActingProcess]:
    """The claim's creator, then every process that took it over, oldest first."""
    records = acting_records(store, path, claim.token)
    return _processes(claim, records)


def live_others(store: GraphStore, path: str, claim: ClaimDocument) -> list[ActingProcess]:
    """The recorded processes other than the caller that have not ended and run on this host."""
    return [p for p in acting_processes(store, path, claim) if p.acting_here and not p.is_caller()]


def refuse_if_acting(store: GraphStore, path: str, claim: ClaimDocument, action: str) -> None:
    """Raise ``claim_held`` if a recorded process other than the caller acts for ``claim`` on this host.

    The refusal is the one :func:`take_over` raises; this records nothing.
    """
    live = live_others(store, path, claim)
    if live:
        raise _refusal(path, claim, live, action)


def take_over(store: GraphStore, path: str, claim: ClaimDocument, *, action: str, owner: str) -> None:
    """Record this process as acting for ``claim`` (``action``, for ``owner``) before it acts.

    Refused with ``claim_held`` (details: the claim's ``holder`` and the live ``acting``
    processes) while another recorded process has not ended and is alive on this host; nothing is
    written then. Recording again in a process already recorded and not ended writes nothing.
    """
    for _ in range(_ATTEMPTS):
        records = acting_records(store, path, claim.token)
        processes = _processes(claim, records)
        live = [p for p in processes if p.acting_here and not p.is_caller()]
        if live:
            raise _refusal(path, claim, live, action)
        if any(p.is_caller() and not p.ended for p in processes[1:]):
            return
        if _append(store, path, claim, len(records) + 1, "started", action, owner):
            return
    raise claim_held(
        f"the processes acting for the claim of {claim.migration_id} kept changing while this {action} "
        f"tried to record itself ({_ATTEMPTS} attempts); inspect them with `omnigraph-migrate claim show` "
        "and retry once that has stopped",
        claim,
        path=path,
    )


def ended(store: GraphStore, path: str, claim: ClaimDocument, *, action: str, owner: str) -> None:
    """Record that this process stopped acting for ``claim``, unless the claim is gone.

    A claim released or broken is gone: nobody asks who acts for it any more.
    """
    for _ in range(_ATTEMPTS):
        current = inspect(store, path)
        if current is None or current.token != claim.token:
            return
        seq = len(acting_records(store, path, claim.token)) + 1
        if _append(store, path, claim, seq, "ended", action, owner):
            return


@contextmanager
def acting_for(store: GraphStore, path: str, claim: ClaimDocument, *, action: str, owner: str, take: bool = True) -> Iterator[None]:
    """Act for ``claim`` inside the block: :func:`take_over` first, :func:`ended` when the block exits.

    ``take`` False skips the takeover (the caller created the claim). :func:`ended` runs however
    the block exits (a hard kill records nothing; the process is then dead).
    """
    if take:
        take_over(store, path, claim, action=action, owner=owner)
    try:
        yield
    finally:
        ended(store, path, claim, action=action, owner=owner)


def _processes(claim: ClaimDocument, records: list[ActingRecord]) -> list[ActingProcess]:
    """The creator and each ``started`` record; one has ended if a later ``ended`` record names it."""

    def ended_after(index: int, host: str, pid: int, start: str | None) -> bool:
        return any(r.event == "ended" and (r.host, r.pid, r.process_start) == (host, pid, start) for r in records[index:])

    creator = ActingProcess(
        "claim",
        claim.owner,
        claim.host,
        claim.pid,
        claim.process_start,
        claim.created_at,
        ended_after(0, claim.host, claim.pid, claim.process_start),
    )
    taken = [
        ActingProcess(r.action, r.owner, r.host, r.pid, r.process_start, r.at, ended_after(i + 1, r.host, r.pid, r.process_start))
        for i, r in enumerate(records)
        if r.event == "started"
    ]
    return [creator, *taken]


def _append(
    store: GraphStore,
    path: str,
    claim: ClaimDocument,
    seq: int,
    event: Literal["started", "ended"],
    action: str,
    owner: str,
) -> bool:
    record = ActingRecord(
        token=claim.token,
        event=event,
        action=action,
        owner=owner,
        host=this_host(),
        pid=os.getpid(),
        process_start=process_start_marker(os.getpid()),
        at=utc_timestamp(),
    )
    return store.put_if_absent(f"{acting_dir(path, claim.token)}/{seq:08d}.json", canonical_json(record))


def _refusal(path: str, claim: ClaimDocument, live: list[ActingProcess], action: str) -> ClaimHeld:
    who = "; ".join(f"{p.action} by {p.owner!r} as process {p.pid} on this host ({p.host}) since {p.since}" for p in live)
    return claim_held(
        f"refusing to {action}: migration {claim.migration_id} is being acted for by a live process: {who}. "
        "Let it finish, or stop that process and make sure it is gone, then run this command again "
        "(there is no time-based takeover).",
        claim,
        path=path,
        acting=[p.to_json() for p in live],
    )
