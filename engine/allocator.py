"""How the process's C allocator hands freed memory back: big blocks go straight back to the system.

A query's working arrays (numpy's, and the batches Lance decodes on its own threads) come from the
C library's ``malloc``. glibc serves a block of at least its mmap threshold with a mapping of its
own, unmapped when freed; but once such a block is freed it raises the threshold to that block's
size (up to 32 MiB), so later blocks of up to that size come from its heaps instead, and what is
freed there mostly stays resident: a process that answers queries grows by the largest
temporaries it has ever made, on every thread's heap. Fixing the threshold stops the rise.

The first graph a process opens (:func:`omnigraph.engine.graph.open_graph`) calls
:func:`return_freed_memory`: under glibc it sets the mmap threshold to
``OMNIGRAPH_MMAP_THRESHOLD_KB`` KiB (default :data:`DEFAULT_THRESHOLD_KB`), and glibc no longer
moves it. ``0`` leaves the allocator as it is; so does a process started with glibc's own
``MALLOC_MMAP_THRESHOLD_`` (the operator's setting wins), and any other C library. The setting is
the process's: an application that embeds the engine shares it.
"""

from __future__ import annotations

import ctypes
import os
import threading

from omnigraph.engine.errors import BadRequest

THRESHOLD_ENV = "OMNIGRAPH_MMAP_THRESHOLD_KB"
DEFAULT_THRESHOLD_KB = 1024
MAX_THRESHOLD_KB = 32 * 1024
"""glibc refuses a larger threshold (half its largest heap on 64-bit systems)."""
GLIBC_ENV = "MALLOC_MMAP_THRESHOLD_"
M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter number for the mmap threshold (glibc's ``malloc.h``)."""

_lock = threading.Lock()
_settled = False


def threshold_kb() -> int:
    """The configured threshold in KiB (``0``: leave the allocator alone); a bad value is ``bad_request``."""
    raw = os.environ.get(THRESHOLD_ENV, str(DEFAULT_THRESHOLD_KB))
    if not raw.isdigit() or int(raw) > MAX_THRESHOLD_KB:
        raise BadRequest(
            f"{THRESHOLD_ENV}={raw!r}: expected a whole number of KiB from 0 (leave the allocator alone) to {MAX_THRESHOLD_KB}",
            {"value": raw},
        )
    return int(raw)


def return_freed_memory() -> bool:
    """Fix glibc's mmap threshold once per process (the module docstring); whether this call set it.

    The environment is read on every call until it is set or left alone for good, so a bad
    ``OMNIGRAPH_MMAP_THRESHOLD_KB`` is refused by each open until it is fixed.
    """
    global _settled
    with _lock:
        if _settled:
            return False
        kilobytes = threshold_kb()
        _settled = True
        if kilobytes == 0 or GLIBC_ENV in os.environ or not _glibc():
            return False
        return bool(ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, kilobytes * 1024))


def _glibc() -> bool:
    """Whether this process runs on glibc (whose ``mallopt`` this module calls)."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, ValueError, OSError):  # no confstr (Windows), or no such name (other C libraries)
        return False
