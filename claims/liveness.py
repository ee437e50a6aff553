"""Is a claim's holder provably alive? Only answerable on the holder's own host.

:func:`holder_alive_here` is True when the claim names this host and its pid is a running
(non-zombie) process. It never says a holder is dead: a holder on another host, or whose pid is
gone here, is simply not *known* alive, and proving it dead stays the operator's job. A pid
reused by an unrelated process reads as alive, which errs on the safe side (a refusal).
"""

from __future__ import annotations

import os
import socket

from claims.document import ClaimDocument


def holder_on_this_host(holder: ClaimDocument) -> bool:
    return holder.host == socket.gethostname()


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a process of another user: it exists
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def holder_alive_here(holder: ClaimDocument) -> bool:
    """True if ``holder`` names this host and its pid is a running process here."""
    return holder_on_this_host(holder) and _pid_running(holder.pid)
