"""Process liveness on this host: is a recorded (host, pid, start) still a running process?

A document that names a process (a write intent, a branch lease record, a fleet record, a claim)
records the host name, the pid and, where it can, the kernel start time of the process
(:func:`process_start_marker`, which tells a reused pid apart). Only a process on this host can
be checked; a process on another host is never known to be alive here.

Two contracts, for two kinds of caller:

* :func:`process_is_alive` (write intents, branch leases, the fleet registry): the recorded
  process itself still runs. A pid of another user (``kill`` refused) is alive only if its start
  marker matches, and a reused pid is dead.
* :func:`pid_running_here` (a claim's holder): the pid is taken by some running process here. A
  refused ``kill`` reads as alive, and so does a reused pid: the caller refuses rather than break
  a claim that may still be held.
"""

from __future__ import annotations

import os
import socket
from typing import Literal

_EXITED_STATES = ("Z", "X")  # zombie (exited, not yet reaped) or dead: it acts no more


HOSTNAME_ENV = "OMNIGRAPH_HOSTNAME"


def this_host() -> str:
    """This host's name, as the documents that name a process record it.

    ``socket.gethostname()``, unless ``OMNIGRAPH_HOSTNAME`` names another: a rehearsal (or a
    test) runs a process as if it were on another host sharing the storage, whose processes
    cannot be checked from here.
    """
    return os.environ.get(HOSTNAME_ENV) or socket.gethostname()


def _proc_stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name, or None if unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_of(fields: list[str] | None) -> str | None:
    return fields[19] if fields is not None and len(fields) > 19 else None


def process_start_marker(pid: int) -> str | None:
    """The kernel start time of ``pid`` (guards against pid reuse), or None if unknown."""
    return _start_of(_proc_stat_fields(pid))


def _signal_probe(host: str, pid: int) -> Literal["absent", "refused", "signalled"]:
    """What ``kill(pid, 0)`` on this host says about ``pid``.

    ``absent`` (another host, or no such pid), ``refused`` (a process of another user has that pid)
    or ``signalled`` (a process we may signal has it).
    """
    if host != this_host():
        return "absent"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "absent"
    except PermissionError:
        return "refused"
    return "signalled"


def process_is_alive(host: str, pid: int, process_start: str | None, *, zombie_is_alive: bool = False) -> bool:
    """True if ``(host, pid, process_start)`` names a process running on this host now.

    A process on another host is never known to be alive here (across hosts, writers judge each
    other by their branch leases' expiry instead). A pid that is gone is dead. A pid of another user (``kill`` refused)
    is not taken as alive for that: like any pid, it is the recorded process only if its start
    marker matches (a reused pid is dead); with no recorded marker the pid alone decides. An
    exited but unreaped process (zombie) is dead unless ``zombie_is_alive`` (the fleet registry,
    which reports what it sees and never acts on it, has always counted one as running).
    """
    if _signal_probe(host, pid) == "absent":
        return False  # "refused" goes on: the start marker tells whether that process is ours
    fields = _proc_stat_fields(pid)
    if not zombie_is_alive and fields and fields[0] in _EXITED_STATES:
        return False
    return process_start is None or _start_of(fields) == process_start


def pid_running_here(host: str, pid: int) -> bool:
    """True if ``host`` is this host and ``pid`` is a running (non-zombie) process here.

    It errs towards "alive": a pid of another user (``kill`` refused) is alive, a pid whose
    ``/proc`` entry cannot be read is alive, and a pid reused by an unrelated process is alive
    (no start marker is compared). Only a gone pid or a zombie reads as not running.
    """
    probe = _signal_probe(host, pid)
    if probe != "signalled":
        return probe == "refused"  # a process of another user: it exists
    fields = _proc_stat_fields(pid)
    if not fields:
        return True
    return fields[0] not in _EXITED_STATES
