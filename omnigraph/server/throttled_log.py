"""Warnings that a flood of connections repeats, written at most once per interval per kind.

Under a flood the same event (a connection closed over the cap, ``accept()`` failing for want of
file descriptors) can happen thousands of times a second; logging each, with a traceback, grew a
server's log by megabytes. :class:`ThrottledLog` writes the first occurrence of a kind, then at
most one line per ``interval`` seconds saying how many were not written since.
:func:`install_accept_error_handler` routes the event loop's ``accept()`` resource errors through
it (one line, no traceback); every other loop error goes to the loop's default handler.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from typing import Any

logger = logging.getLogger("omnigraph.server")
INTERVAL_SECONDS = 10.0
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class ThrottledLog:
    """At most one warning per ``interval`` seconds per kind, counting the ones left out."""

    def __init__(self, interval: float = INTERVAL_SECONDS) -> None:
        self.interval = interval
        self._last: dict[str, float] = {}
        self._left_out: dict[str, int] = {}

    def warn(self, kind: str, message: str) -> bool:
        """Write ``message`` unless a ``kind`` warning was written less than ``interval`` ago; whether it was written."""
        now = time.monotonic()
        if now - self._last.get(kind, -self.interval) < self.interval:
            self._left_out[kind] = self._left_out.get(kind, 0) + 1
            return False
        left_out = self._left_out.pop(kind, 0)
        suffix = f" ({left_out} more since the last such warning)" if left_out else ""
        logger.warning("%s%s", message, suffix)
        self._last[kind] = now
        return True


THROTTLED = ThrottledLog()
"""The process's throttled warnings (the event loop and the protocol share it)."""


def _is_accept_resource_error(context: dict[str, Any]) -> bool:
    error = context.get("exception")
    return isinstance(error, OSError) and error.errno in RESOURCE_ERRNOS and "accept" in str(context.get("message", ""))


def install_accept_error_handler(loop: asyncio.AbstractEventLoop) -> None:
    """Make ``loop`` write its ``accept()`` resource errors as throttled one-line warnings."""

    def handler(running: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if _is_accept_resource_error(context):
            error = context["exception"]
            THROTTLED.warn(
                "accept",
                f"warning: cannot accept connections: {error.strerror} (errno {error.errno}); the server retries every second. "
                "Raise the open-files limit (ulimit -n) or lower --max-connections",
            )
            return
        running.default_exception_handler(context)

    loop.set_exception_handler(handler)
