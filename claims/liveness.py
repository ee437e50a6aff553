"""Is a process named by a claim (or an acting record) provably alive? Only its own host can tell.

:func:`alive_here` is True when the host is this host and the pid is a running (non-zombie)
process here. With a recorded process start it must also be *that* process (a pid reused by a
later process is not it: :func:`omnigraph.engine.storage.process.process_is_alive`); without one, any
process holding the pid counts, which errs on the safe side (a refusal). It never says a process
is dead: a process on another host, or whose pid is gone here, is simply not *known* alive, and
proving it dead stays the operator's job.
"""

from __future__ import annotations

import os

from omnigraph.claims.document import ClaimDocument
from omnigraph.engine.storage.process import pid_running_here, process_is_alive, process_start_marker, this_host


def alive_here(host: str, pid: int, process_start: str | None) -> bool:
    """True if ``(host, pid, process_start)`` is a running process on this host."""
    if process_start is None:
        return pid_running_here(host, pid)
    return process_is_alive(host, pid, process_start)


def is_this_process(host: str, pid: int, process_start: str | None) -> bool:
    """True if the named process is the calling process itself."""
    return host == this_host() and pid == os.getpid() and process_start in (None, process_start_marker(pid))


def holder_on_this_host(holder: ClaimDocument) -> bool:
    """True if the process that created ``holder`` names this host (alive or not)."""
    return holder.host == this_host()


def holder_alive_here(holder: ClaimDocument) -> bool:
    """True if the process that created ``holder`` names this host and still runs here."""
    return alive_here(holder.host, holder.pid, holder.process_start)
