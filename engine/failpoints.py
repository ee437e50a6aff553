"""Named failpoints: a hard process exit at a named step, for crash tests.

``OMNIGRAPH_FAILPOINTS`` holds a comma-separated list of names. When code reaches
``failpoint(name)`` for a listed name, the process writes one line to stderr and exits at once
with status :data:`FAILPOINT_EXIT_STATUS` through ``os._exit``: no ``finally`` blocks, no atexit
handlers, no flushing of Python buffers, exactly like a killed process.
"""

from __future__ import annotations

import os
import sys

FAILPOINT_ENV = "OMNIGRAPH_FAILPOINTS"
FAILPOINT_EXIT_STATUS = 86


def armed_failpoints() -> frozenset[str]:
    """The failpoint names armed in this process's environment."""
    raw = os.environ.get(FAILPOINT_ENV, "")
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def failpoint(name: str) -> None:
    """Hard-exit the process if ``name`` is armed; otherwise do nothing."""
    if name in armed_failpoints():
        sys.stderr.write(f"failpoint {name}: exiting\n")
        sys.stderr.flush()
        os._exit(FAILPOINT_EXIT_STATUS)
