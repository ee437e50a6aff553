"""Branch lifecycle guards: one holder at a time creates, deletes or recovers a graph branch.

DESIGN section 5: a branch is named by its incarnation, never by name alone. Lance deletes and
creates branches by name, so the steps that do (``branch create``, ``branch delete``, and the
recovery of an interrupted commit, which restores or deletes table branches named after the graph
branch) hold the branch's guard while they run.

A guard is a sequence of create-if-absent records ``__recovery/branches/<name>/<seq:08d>.json``,
never rewritten; the record with the highest sequence number is its state: ``held`` by one
process (operation, host, pid, process start) or ``released``. To acquire, a process writes the
next sequence number when the latest record is released or its holder is provably dead (the same
liveness rule as write intents: a process on this host that no longer runs); of two processes
that try, exactly one creates that record. There is no time-based takeover. Release writes the
next record as ``released``. After acquiring, the holder deletes the records below its own, so a
guard stays at one or two objects.

Writers do not take the guard. A commit on a branch other than ``main`` arms its intent first and
then reads the guard and the branch's incarnation (:func:`omnigraph.engine.ops.write.commit`): a live
``delete`` holder, or a changed incarnation, aborts the commit before its first effect. A
deleter takes the guard first and then lists intents, refusing while an intent on the branch is
armed by a live process. Each writes its own record before reading the other's, so at least one
of them sees the other: a branch is never deleted under a commit that went past its check.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from omnigraph.engine.errors import ReadSetConflict
from omnigraph.engine.manifest.rows import now_ms
from omnigraph.engine.storage.names import RECOVERY_DIR
from omnigraph.engine.storage.process import process_is_alive, process_start_marker, this_host
from omnigraph.engine.storage.store import GraphStore, canonical_json

GUARD_DIR = f"{RECOVERY_DIR}/branches"
GuardOperation = Literal["create", "delete", "recover"]


class GuardRecord(BaseModel):
    """One state of a branch's guard."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    branch: str
    sequence: int
    state: Literal["held", "released"]
    operation: GuardOperation | None
    host: str
    pid: int
    process_start: str | None
    at: int

    def held_by_live_process(self) -> bool:
        """True if this record says ``held`` and its process is alive (on this host)."""
        return self.state == "held" and process_is_alive(self.host, self.pid, self.process_start)


def _guard_dir(branch: str) -> str:
    return f"{GUARD_DIR}/{branch}"


def _record_name(sequence: int) -> str:
    return f"{sequence:08d}.json"


def latest(store: GraphStore, branch: str) -> GuardRecord | None:
    """The guard's current state (its highest record), or None if it was never taken.

    A record listed but deleted before it is read was below a newer one: the listing is read again.
    """
    while True:
        names = [name for name in store.list(_guard_dir(branch)) if name.endswith(".json")]
        if not names:
            return None
        try:
            raw = store.read_bytes(f"{_guard_dir(branch)}/{max(names)}")
        except FileNotFoundError:
            continue
        return GuardRecord.model_validate_json(raw)


def abandoned(store: GraphStore) -> list[GuardRecord]:
    """Guards held by a process that is not alive (an interrupted create, delete or recovery), by branch."""
    found = []
    for name in store.list(GUARD_DIR):
        record = latest(store, name)
        if record is not None and record.state == "held" and not record.held_by_live_process():
            found.append(record)
    return found


def live_holder(store: GraphStore, branch: str) -> GuardRecord | None:
    """The guard's record if a live process holds it now, else None."""
    record = latest(store, branch)
    return record if record is not None and record.held_by_live_process() else None


def _write(store: GraphStore, record: GuardRecord) -> bool:
    return store.put_if_absent(f"{_guard_dir(record.branch)}/{_record_name(record.sequence)}", canonical_json(record))


def _record(branch: str, sequence: int, state: Literal["held", "released"], operation: GuardOperation | None) -> GuardRecord:
    pid = os.getpid()
    return GuardRecord(
        branch=branch,
        sequence=sequence,
        state=state,
        operation=operation,
        host=this_host(),
        pid=pid,
        process_start=process_start_marker(pid),
        at=now_ms(),
    )


@dataclass(frozen=True)
class Attempt:
    """The outcome of :func:`try_acquire`: ``held`` if it took the guard, else ``holder``.

    ``held`` is this process's record; ``holder`` is the record of the live process holding the
    guard. ``previous`` is the state it replaced, whose holder was dead if it was still ``held``
    (an interrupted operation).
    """

    held: GuardRecord | None
    holder: GuardRecord | None = None
    previous: GuardRecord | None = None

    def interrupted(self) -> GuardRecord | None:
        """The record of the operation this acquisition took over from a dead process, if any."""
        return self.previous if self.previous is not None and self.previous.state == "held" else None


def try_acquire(store: GraphStore, branch: str, operation: GuardOperation) -> Attempt:
    """Take the guard of ``branch`` for ``operation`` unless a live process holds it."""
    while True:
        current = latest(store, branch)
        if current is not None and current.held_by_live_process():
            return Attempt(held=None, holder=current)
        mine = _record(branch, 1 if current is None else current.sequence + 1, "held", operation)
        if _write(store, mine):
            for name in store.list(_guard_dir(branch)):
                if name.endswith(".json") and name < _record_name(mine.sequence):
                    store.delete(f"{_guard_dir(branch)}/{name}")
            return Attempt(held=mine, previous=current)
        # another process wrote that sequence number first: look again


def release(store: GraphStore, held: GuardRecord) -> None:
    """Give the guard back: the next record says ``released``, then the held one is deleted."""
    _write(store, _record(held.branch, held.sequence + 1, "released", None))
    store.delete(f"{_guard_dir(held.branch)}/{_record_name(held.sequence)}")


def busy_error(branch: str, holder: GuardRecord, wanted: str) -> ReadSetConflict:
    """The ``read_set_conflict`` for ``wanted`` (what was not done) while ``holder`` holds the guard of ``branch``."""
    return ReadSetConflict(
        f"branch {branch!r} is being changed by another process ({holder.operation} by pid {holder.pid} on "
        f"{holder.host}); {wanted} was not done, retry it when that process has finished",
        {
            "member": f"branch {branch}",
            "expected": "no branch operation in flight",
            "actual": f"{holder.operation} by pid {holder.pid} on {holder.host}",
        },
    )


@contextmanager
def guarded(
    store: GraphStore, branch: str, operation: GuardOperation, wanted: str, on_interrupted: Callable[[GuardRecord], None] | None = None
) -> Iterator[GuardRecord]:
    """Hold the guard of ``branch`` for the block; ``read_set_conflict`` if a live process holds it.

    ``on_interrupted`` is called first with the record of a dead holder this takes over. A
    process killed inside the block leaves the guard held by a dead process, which the next
    acquirer takes over.
    """
    attempt = try_acquire(store, branch, operation)
    if attempt.held is None:
        assert attempt.holder is not None
        raise busy_error(branch, attempt.holder, wanted)
    try:
        interrupted = attempt.interrupted()
        if interrupted is not None and on_interrupted is not None:
            on_interrupted(interrupted)
        yield attempt.held
    finally:
        release(store, attempt.held)
