"""The fleet registry: ``__fleet/<instance>.json``, one record per running server or long writer.

Every ``omnigraph serve`` process (each uvicorn worker), every ``omnigraph-v4 serve`` process and
every chunked ``load`` records itself here while it runs: host, pid, program, the format it
writes, when it started and its last heartbeat. The record is created when the process starts,
rewritten every :data:`HEARTBEAT_SECONDS` by a background thread, and deleted on clean shutdown.

A record is information for the operator, never a lock. Nothing in the write path reads it, and
no process waits for, takes over or breaks anything because of it: a process that is killed
leaves its record behind, and a process on another host cannot be proven dead from here, so the
registry can only say "this writer announced itself recently". The migration barrier (claim plus
``migrating`` stamp, re-read by every writer before it commits) is what keeps writers out; the
registry tells the operator which writers still have to be drained before the barrier goes up.

Liveness of a record (:func:`record_status`): ``dead`` if it names a process on this host that
no longer exists (pid gone, or reused by another process); ``stale`` if its heartbeat is older
than :data:`STALE_AFTER_SECONDS`; otherwise ``live``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from omnigraph.engine.manifest.rows import now_ms
from omnigraph.engine.schema.ids import new_ulid
from omnigraph.engine.storage.names import FLEET_DIR
from omnigraph.engine.storage.process import process_is_alive, process_start_marker, this_host
from omnigraph.engine.storage.store import GraphStore, canonical_json

HEARTBEAT_SECONDS = float(os.environ.get("OMNIGRAPH_FLEET_HEARTBEAT_SECONDS", "5"))
STALE_AFTER_SECONDS = max(30.0, 6 * HEARTBEAT_SECONDS)

Role = Literal["server", "load"]
Status = Literal["live", "stale", "dead"]


class FleetRecord(BaseModel):
    """One running process that writes (or may write) the graph."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instance: str
    program: str
    role: Role
    writes_format: str
    host: str
    pid: int
    process_start: str | None
    address: str | None
    started_at: int
    heartbeat_at: int


def record_path(instance: str) -> str:
    """The root-relative path of the record of ``instance``."""
    return f"{FLEET_DIR}/{instance}.json"


def list_records(store: GraphStore) -> list[FleetRecord]:
    """Every record, ordered by instance id (ULIDs order by start time).

    A record deleted between listing and reading (its process shut down) is skipped; one being
    rewritten by its heartbeat while read is read again. A record that does not parse is skipped
    (heartbeats replace records atomically, so that is a foreign or damaged file, not a race).
    """
    records = []
    for name in store.list(FLEET_DIR):
        if name.endswith(".json"):
            record = _read_record(store, f"{FLEET_DIR}/{name}")
            if record is not None:
                records.append(record)
    return sorted(records, key=lambda record: record.instance)


@retry(
    retry=retry_if_exception(lambda e: isinstance(e, OSError) and not isinstance(e, FileNotFoundError)),
    stop=stop_after_attempt(5),
    wait=wait_exponential_jitter(multiplier=0.05, max=0.5),
    reraise=True,
)
def _read_record(store: GraphStore, rel: str) -> FleetRecord | None:
    try:
        # On S3 one GET (no ETag check across chunked reads); a local file is read whole.
        raw = store.read_bytes(rel) if store.is_local else store.fs.cat_file(store.path(rel))
    except FileNotFoundError:
        return None
    try:
        return FleetRecord.model_validate_json(raw)
    except ValidationError:
        return None


def _replace(store: GraphStore, rel: str, data: bytes) -> None:
    """Replace ``rel`` atomically: readers see the old or the new record, never a partial one."""
    if not store.is_local:
        store.write_bytes(rel, data)  # one PUT replaces an S3 object atomically
        return
    target = store.path(rel)
    temp = f"{os.path.dirname(target)}/.{os.path.basename(target)}.tmp-{os.getpid()}"
    with open(temp, "wb") as handle:
        handle.write(data)
    os.replace(temp, target)


def record_status(record: FleetRecord, now: int | None = None) -> Status:
    """``dead`` (its process on this host is gone), ``stale`` (no recent heartbeat) or ``live``."""
    if record.host == this_host() and not process_is_alive(record.host, record.pid, record.process_start, zombie_is_alive=True):
        return "dead"
    age = ((now if now is not None else now_ms()) - record.heartbeat_at) / 1000
    return "stale" if age > STALE_AFTER_SECONDS else "live"


class Membership:
    """This process's record: created by :meth:`start`, heartbeated, deleted by :meth:`stop`."""

    def __init__(self, store: GraphStore, program: str, role: Role, writes_format: str, address: str | None = None):
        pid = os.getpid()
        started = now_ms()
        self.store = store
        self.record = FleetRecord(
            instance=new_ulid(),
            program=program,
            role=role,
            writes_format=writes_format,
            host=this_host(),
            pid=pid,
            process_start=process_start_marker(pid),
            address=address,
            started_at=started,
            heartbeat_at=started,
        )
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def path(self) -> str:
        """The root-relative path of this process's record."""
        return record_path(self.record.instance)

    def start(self) -> None:
        """Write the record and start the heartbeat thread."""
        for attempt in range(3):
            try:
                self.store.put_if_absent(self.path, canonical_json(self.record))
                break
            except FileNotFoundError:
                if attempt == 2:  # the directory kept vanishing under a concurrent stop()
                    raise
        self._thread = threading.Thread(target=self._beat, name="fleet-heartbeat", daemon=True)
        self._thread.start()

    def heartbeat(self) -> None:
        """Rewrite the record with the current time (the record belongs to this process only)."""
        self.record = self.record.model_copy(update={"heartbeat_at": now_ms()})
        _replace(self.store, self.path, canonical_json(self.record))

    def _beat(self) -> None:
        while not self._stopped.wait(HEARTBEAT_SECONDS):
            try:
                self.heartbeat()
            except OSError:
                continue  # storage hiccup: the next beat tries again; the record is only information

    def stop(self) -> None:
        """Stop heartbeating and delete the record."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=HEARTBEAT_SECONDS + 5)
        self.store.delete(self.path)
        if self.store.is_local:
            with suppress(OSError):  # other records remain (or it is already gone)
                os.rmdir(self.store.path(FLEET_DIR))  # leave no empty directory behind


@contextmanager
def registered(store: GraphStore, program: str, role: Role, writes_format: str, address: str | None = None) -> Iterator[Membership]:
    """Hold a fleet record for the duration of the ``with`` block."""
    membership = Membership(store, program, role, writes_format, address)
    membership.start()
    try:
        yield membership
    finally:
        membership.stop()
