"""Is a claim's holder provably alive? Only answerable on the holder's own host.

:func:`holder_alive_here` is True when the claim names this host and its pid is a running
(non-zombie) process (:func:`engine.storage.process.pid_running_here`). It never says a holder is
dead: a holder on another host, or whose pid is gone here, is simply not *known* alive, and
proving it dead stays the operator's job. A pid reused by an unrelated process reads as alive,
which errs on the safe side (a refusal).
"""

from __future__ import annotations

from claims.document import ClaimDocument
from engine.storage.process import pid_running_here, this_host


def holder_on_this_host(holder: ClaimDocument) -> bool:
    return holder.host == this_host()


def holder_alive_here(holder: ClaimDocument) -> bool:
    """True if ``holder`` names this host and its pid is a running process here."""
    return pid_running_here(holder.host, holder.pid)
