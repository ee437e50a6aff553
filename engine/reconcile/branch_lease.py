"""Branch leases: one holder at a time writes, creates, deletes or recovers a graph branch.

Every graph commit (:func:`omnigraph.engine.ops.write.commit`), ``branch create``, ``branch
delete``, the recovery of a branch's interrupted commits and the maintenance commits (``optimize``,
``drift adopt``/``revert``) hold the lease of the branch they change for as long as they run. The
lease lives in the graph's own storage, so it works the same across processes and hosts, on a
local disk or an object store; writes on different branches hold different leases and never wait
for each other.

A lease is a sequence of create-if-absent records ``__recovery/branches/<name>/<seq:012d>.json``;
the record with the highest sequence number is its state: ``held`` (operation, host, pid, process
start, heartbeat, expiry) or ``released``. The sequence number of a held record is the holder's
**fencing token**: it only grows, and a holder whose token is no longer the highest has lost the
lease. To acquire, a process writes the next sequence number when the latest record is released or
its holder has lapsed; of two processes that try, exactly one creates that record. After
acquiring, the holder deletes the records below its own, so a lease stays at one object. Release
rewrites the holder's own record as ``released``. The records are not ``fsync``-ed on a local
disk: a record lost in an operating-system crash belonged to processes that died with it.

A held record lapses when its holder is provably dead (a process on this host that no longer
runs) or when it has not been renewed for its expiry (:func:`lease_seconds`, default
:data:`DEFAULT_LEASE_SECONDS`; ``OMNIGRAPH_LEASE_SECONDS`` sets it). While it holds a lease, a
process renews it from a background thread every third of the expiry by rewriting its own record
with a new heartbeat time (the one record that is rewritten; only by its holder, and only while
it is still the latest: a renewal that finds the lease taken over stops, and so does the holder's
next check). A process that
stops (``SIGSTOP``, a frozen VM) stops renewing too, and is taken over once the expiry has passed
by the observer's clock. Expiry across hosts compares the holder's heartbeat time with the
observer's clock, so it assumes clocks that agree to well within the expiry; the fencing below
does not depend on it.

Being taken over is not enough to stop a holder that is paused and wakes up later, so a holder
checks its lease (:meth:`Lease.check`) before every step that changes shared state, and the write
protocol adds what a check cannot (a pause between the check and the step): the new holder of a
lease taken over from a holder that may still run publishes a *fence* on the branch's manifest
first (:func:`omnigraph.engine.reconcile.recovery.fence_branch`), so a publish prepared under an
older token conflicts and is refused when it checks again, and every table effect is verified to
lie directly on the version it read (:mod:`omnigraph.engine.ops.write`).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import msgspec
from pydantic import BaseModel, ConfigDict

from omnigraph.engine.errors import BadRequest, ReadSetConflict
from omnigraph.engine.manifest.rows import now_ms
from omnigraph.engine.storage.names import RECOVERY_DIR
from omnigraph.engine.storage.process import process_is_alive, process_start_marker, this_host
from omnigraph.engine.storage.store import GraphStore, canonical_json

LEASE_DIR = f"{RECOVERY_DIR}/branches"
LEASE_SECONDS_ENV = "OMNIGRAPH_LEASE_SECONDS"
DEFAULT_LEASE_SECONDS = 10.0
WAIT_SECONDS = 60.0
"""How long a commit to a branch waits for a live holder's lease before it is refused."""
SELF_CHECK_SHARE = 0.8
"""A holder stops acting once this share of its expiry has passed since its last renewal: it gives
up before any other process may take the lease over."""
LeaseOperation = Literal["write", "create", "delete", "recover", "schema"]


def lease_seconds() -> float:
    """The lease expiry this process uses: ``OMNIGRAPH_LEASE_SECONDS``, else :data:`DEFAULT_LEASE_SECONDS`.

    Raises:
        BadRequest: the variable is not a number of seconds in (0, 3600].
    """
    raw = os.environ.get(LEASE_SECONDS_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_LEASE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value <= 3600:
        raise BadRequest(f"{LEASE_SECONDS_ENV}={raw!r} is not a number of seconds in (0, 3600]", {"variable": LEASE_SECONDS_ENV})
    return value


class LeaseRecord(BaseModel):
    """One state of a branch's lease.

    ``heartbeat_at`` (ms since the epoch, the holder's clock) is when the holder last renewed it;
    ``expiry_seconds`` is how long after that it lapses. A ``released`` record of a write may say
    which ``__manifest`` version of the branch its holder left (``manifest_version``; None when
    it does not know): the next writer whose snapshot is that version need not read the branch
    again.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    branch: str
    sequence: int
    state: Literal["held", "released"]
    operation: LeaseOperation | None
    host: str
    pid: int
    process_start: str | None
    at: int
    heartbeat_at: int
    expiry_seconds: float
    manifest_version: int | None = None

    def holder_is_gone(self) -> bool:
        """True if the holder is a process on this host that no longer runs."""
        return self.host == this_host() and not process_is_alive(self.host, self.pid, self.process_start)

    def expired(self) -> bool:
        """True if the holder has not renewed the lease for its expiry (by this host's clock)."""
        return now_ms() - self.heartbeat_at > self.expiry_seconds * 1000

    def held_by_live_holder(self) -> bool:
        """True if this record says ``held`` and has not lapsed (holder gone, or expired)."""
        return self.state == "held" and not self.holder_is_gone() and not self.expired()

    def describe(self) -> str:
        """``<operation> by pid <pid> on <host>``."""
        return f"{self.operation} by pid {self.pid} on {self.host}"


def _lease_dir(branch: str) -> str:
    return f"{LEASE_DIR}/{branch}"


def _record_name(sequence: int) -> str:
    return f"{sequence:012d}.json"


def _sequence_of(name: str) -> int:
    return int(name.removesuffix(".json"))


def _record_names(store: GraphStore, branch: str) -> list[str]:
    names = [name for name in store.list(_lease_dir(branch)) if name.endswith(".json") and name.removesuffix(".json").isdigit()]
    return sorted(names, key=_sequence_of)


def latest(store: GraphStore, branch: str) -> LeaseRecord | None:
    """The lease's current state (its highest record), or None if it was never taken."""
    return _listed(store, branch)[0]


def _listed(store: GraphStore, branch: str) -> tuple[LeaseRecord | None, list[str]]:
    """The lease's highest record and the names of all its records, in sequence order.

    A record listed but deleted before it is read was below a newer one: the listing is read again.
    """
    while True:
        names = _record_names(store, branch)
        if not names:
            return None, []
        try:
            raw = store.read_bytes(f"{_lease_dir(branch)}/{names[-1]}")
        except FileNotFoundError:
            continue
        return LeaseRecord.model_validate_json(raw), names


def lapsed(store: GraphStore) -> list[LeaseRecord]:
    """Leases left held by a holder that is gone or expired (an interrupted operation), by branch."""
    found = []
    for name in sorted(store.list(LEASE_DIR)):
        record = latest(store, name)
        if record is not None and record.state == "held" and not record.held_by_live_holder():
            found.append(record)
    return found


def live_holder(store: GraphStore, branch: str) -> LeaseRecord | None:
    """The lease's record if a live holder holds it now, else None."""
    record = latest(store, branch)
    return record if record is not None and record.held_by_live_holder() else None


def _held_record(branch: str, sequence: int, operation: LeaseOperation, expiry: float) -> LeaseRecord:
    pid = os.getpid()
    at = now_ms()
    return LeaseRecord(
        branch=branch,
        sequence=sequence,
        state="held",
        operation=operation,
        host=this_host(),
        pid=pid,
        process_start=process_start_marker(pid),
        at=at,
        heartbeat_at=at,
        expiry_seconds=expiry,
    )


def lease_lost_error(branch: str, token: int, current: LeaseRecord | None, what: str) -> ReadSetConflict:
    """The refusal of a holder whose lease of ``branch`` (token ``token``) was taken over or released."""
    actual = "released" if current is None or current.state == "released" else f"token {current.sequence} ({current.describe()})"
    return ReadSetConflict(
        f"this process's lease of branch {branch!r} lapsed (it was not renewed within its expiry: the process "
        f"was paused or cut off from storage) and another holder may have taken it over; {what}: nothing "
        "of it was published, none of it ever will be, retry it",
        {"member": f"lease of branch {branch}", "expected": f"token {token}", "actual": actual},
    )


@dataclass
class Lease:
    """A lease this process holds: renewed in the background until :meth:`release`.

    ``token`` (the record's sequence number) is the fencing token. ``previous`` is the record this
    one replaced. The holder sets ``leaves_manifest_version`` to the branch's ``__manifest``
    version it leaves, if it knows it; :meth:`release` records it.
    """

    store: GraphStore
    record: LeaseRecord
    previous: LeaseRecord | None = None
    leaves_manifest_version: int | None = None
    _renewed: float = field(default_factory=time.monotonic)
    _lost: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def token(self) -> int:
        """The fencing token: this holder's sequence number."""
        return self.record.sequence

    @property
    def branch(self) -> str:
        """The graph branch leased."""
        return self.record.branch

    def start_renewing(self) -> None:
        """Renew the lease every third of its expiry from a daemon thread until :meth:`release`."""
        self._thread = threading.Thread(target=self._renew_loop, name=f"lease-{self.branch}", daemon=True)
        self._thread.start()

    def _renew_loop(self) -> None:
        interval = self.record.expiry_seconds / 3
        while not self._stop.wait(interval):
            started = time.monotonic()
            try:
                current = latest(self.store, self.branch)
                if current is None or current.sequence != self.token or current.state != "held":
                    self._lost = True  # taken over (or released for it) while this process was paused
                    return
                beat = self.record.model_copy(update={"heartbeat_at": now_ms()})
                self.store.write_bytes(f"{_lease_dir(self.branch)}/{_record_name(self.token)}", canonical_json(beat))
            except OSError:
                continue  # not renewed: the holder's own check stops it before anyone may take over
            self._renewed = started

    def check(self, what: str, *, confirm: bool = False) -> None:
        """Refuse (``read_set_conflict``) unless this process may still act under the lease.

        It may while less than :data:`SELF_CHECK_SHARE` of the expiry has passed since its last
        renewal and the renewals have not found the lease taken over; with ``confirm`` the lease's
        latest record must also still be this one (one read of the storage).
        """
        if self._lost or time.monotonic() - self._renewed > self.record.expiry_seconds * SELF_CHECK_SHARE:
            raise lease_lost_error(self.branch, self.token, latest(self.store, self.branch), what)
        if confirm:
            current = latest(self.store, self.branch)
            if current is None or current.sequence != self.token or current.state != "held":
                raise lease_lost_error(self.branch, self.token, current, what)

    def stop_renewing(self) -> None:
        """Stop renewing without giving the lease back: it lapses after its expiry, still ``held``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def release(self) -> None:
        """Stop renewing and give the lease back: its record now says ``released``.

        A lease already taken over is left as it is: the rewrite of a record below the latest
        changes nothing, and one the new holder deleted is not written again.
        """
        self.stop_renewing()
        current = latest(self.store, self.branch)
        if current is not None and current.sequence == self.token:
            update = {"state": "released", "heartbeat_at": now_ms(), "manifest_version": self.leaves_manifest_version}
            released = self.record.model_copy(update=update)
            self.store.write_bytes(f"{_lease_dir(self.branch)}/{_record_name(self.token)}", canonical_json(released))


class Attempt(msgspec.Struct, frozen=True):
    """The outcome of :func:`try_acquire`: ``held`` if it took the lease, else ``holder``.

    ``held`` is this process's lease (its ``previous`` is the state it replaced); ``holder`` the
    record of the live holder.
    """

    held: Lease | None
    holder: LeaseRecord | None = None

    def taken_over(self) -> LeaseRecord | None:
        """The record of the lapsed holder this acquisition took the lease over from, if any.

        A replaced record still ``held`` is an interrupted operation, or a holder that may still
        wake up.
        """
        previous = None if self.held is None else self.held.previous
        return previous if previous is not None and previous.state == "held" else None


def try_acquire(store: GraphStore, branch: str, operation: LeaseOperation) -> Attempt:
    """Take the lease of ``branch`` for ``operation`` unless a live holder holds it."""
    expiry = lease_seconds()
    while True:
        current, names = _listed(store, branch)
        if current is not None and current.held_by_live_holder():
            return Attempt(held=None, holder=current)
        mine = _held_record(branch, 1 if current is None else current.sequence + 1, operation, expiry)
        if not store.put_if_absent(f"{_lease_dir(branch)}/{_record_name(mine.sequence)}", canonical_json(mine), durable=False):
            continue  # another process wrote that sequence number first: look again
        lease = Lease(store, mine, previous=current)
        lease.start_renewing()
        for name in names:  # every record below this one, as listed before it was created
            store.delete(f"{_lease_dir(branch)}/{name}")
        return Attempt(held=lease)


def acquire(store: GraphStore, branch: str, operation: LeaseOperation, *, wait_seconds: float) -> Attempt:
    """:func:`try_acquire`, waiting up to ``wait_seconds`` while a live holder holds the lease.

    On a local disk a waiter looks at the lease directory's modification time every few
    milliseconds and tries again as soon as a record was written (a release, a renewal, a new
    holder), when the holder's expiry has passed, and at least every :data:`_RECHECK_SECONDS`
    (a holder that died); on an object store it tries again with jittered backoff.
    """
    deadline = time.monotonic() + wait_seconds
    while True:
        attempt = try_acquire(store, branch, operation)
        if attempt.held is not None or time.monotonic() >= deadline:
            return attempt
        assert attempt.holder is not None
        _wait_for_a_change(store, branch, attempt.holder, deadline)


_LOCAL_PAUSE = 0.01
_RECHECK_SECONDS = 0.05


def _wait_for_a_change(store: GraphStore, branch: str, holder: LeaseRecord, deadline: float) -> None:
    """Sleep until the lease may have changed hands (see :func:`acquire`), or the deadline."""
    stamp = store.directory_stamp(_lease_dir(branch))
    if stamp is None:  # an object store: no cheap change signal
        time.sleep(min(0.02 + 0.2 * _jitter(), max(0.0, deadline - time.monotonic())))
        return
    lapses_at = time.monotonic() + holder.expiry_seconds - (now_ms() - holder.heartbeat_at) / 1000
    give_up = min(deadline, lapses_at, time.monotonic() + _RECHECK_SECONDS)
    while time.monotonic() < give_up:
        time.sleep(_LOCAL_PAUSE * (0.5 + _jitter()))
        if store.directory_stamp(_lease_dir(branch)) != stamp:
            return


def _jitter() -> float:
    return int.from_bytes(os.urandom(2), "big") / 65535


def busy_error(branch: str, holder: LeaseRecord, wanted: str) -> ReadSetConflict:
    """The ``read_set_conflict`` for ``wanted`` (what was not done) while ``holder`` holds the lease of ``branch``."""
    return ReadSetConflict(
        f"branch {branch!r} is being changed by another process ({holder.describe()}); {wanted} was not done, "
        "retry it when that process has finished",
        {"member": f"branch {branch}", "expected": "no branch operation in flight", "actual": holder.describe()},
    )


@contextmanager
def holding(
    store: GraphStore,
    branch: str,
    operation: LeaseOperation,
    wanted: str,
    *,
    wait_seconds: float = 0.0,
    on_taken_over: Callable[[Lease, LeaseRecord], None] | None = None,
) -> Iterator[Lease]:
    """Hold the lease of ``branch`` for the block; ``read_set_conflict`` if a live holder keeps it.

    Waits up to ``wait_seconds`` for the lease. ``on_taken_over`` is called first with the
    record of a lapsed holder this takes over; if it fails, the lease is not released but left to
    lapse, so that the next acquirer takes it over (and does what ``on_taken_over`` had to) in
    turn. A process killed inside the block leaves the lease held by a dead process, which the
    next acquirer takes over.
    """
    attempt = acquire(store, branch, operation, wait_seconds=wait_seconds)
    if attempt.held is None:
        assert attempt.holder is not None
        raise busy_error(branch, attempt.holder, wanted)
    with _taken(attempt, on_taken_over) as lease:
        yield lease


@contextmanager
def holding_if_free(
    store: GraphStore, branch: str, operation: LeaseOperation, *, on_taken_over: Callable[[Lease, LeaseRecord], None] | None = None
) -> Iterator[Lease | None]:
    """:func:`holding` without waiting, yielding None instead of refusing while a live holder keeps the lease."""
    attempt = try_acquire(store, branch, operation)
    if attempt.held is None:
        yield None
        return
    with _taken(attempt, on_taken_over) as lease:
        yield lease


@contextmanager
def _taken(attempt: Attempt, on_taken_over: Callable[[Lease, LeaseRecord], None] | None) -> Iterator[Lease]:
    lease = attempt.held
    assert lease is not None
    previous = attempt.taken_over()
    if previous is not None and on_taken_over is not None:
        try:
            on_taken_over(lease, previous)
        except BaseException:
            lease.stop_renewing()
            raise
    try:
        yield lease
    finally:
        lease.release()
