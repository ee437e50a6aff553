"""uvicorn's h11 protocol with a deadline on each request head and a ceiling on open connections.

uvicorn bounds the size of a request head (``h11_max_incomplete_event_size``) and idle keep-alive
connections (``timeout_keep_alive``), but not the time a client may take to send its request line
and headers: a client that opens a connection and sends a byte now and then would hold it for
ever. This subclass closes a connection whose request head is not complete within
``limits.header_timeout`` seconds of the connection opening, or of the previous response ending.
The body has its own deadline (:mod:`omnigraph.server.gate`).

The cap (``limits.max_connections``) is applied per request by the gate, which answers 503
``overloaded`` beyond it, except on the open routes, so that ``/healthz`` keeps answering under a
flood. So that a flood cannot exhaust the process's file descriptors (``accept()`` failing, and
every probe waiting for the retry), a connection beyond the cap plus :data:`HEADROOM` is closed as
soon as it is accepted, with one throttled warning (:mod:`omnigraph.server.throttled_log`).
"""

from __future__ import annotations

import asyncio
import contextlib
from functools import cache

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from omnigraph.server.settings import CONNECTION_HEADROOM, settings_from_env
from omnigraph.server.throttled_log import THROTTLED

HEADROOM = CONNECTION_HEADROOM


@cache
def _head_timeout() -> float:
    return settings_from_env().limits.header_timeout


@cache
def _ceiling() -> int:
    return settings_from_env().limits.max_connections + HEADROOM


class HeadDeadlineProtocol(H11Protocol):
    """:class:`H11Protocol` plus the head deadline of the module docstring."""

    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn narrows asyncio's BaseTransport
        """Start serving the connection and arm the head deadline; or close it at once beyond the ceiling."""
        super().connection_made(transport)
        if len(self.connections) > _ceiling():
            THROTTLED.warn(
                "ceiling",
                f"warning: {len(self.connections) - 1} connections are open, over --max-connections plus {HEADROOM}: "
                "closing new ones as they arrive",
            )
            transport.close()
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Disarm the head deadline, then let uvicorn end the connection."""
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        """Handle the received data; a complete request head disarms the deadline."""
        super().handle_events()
        if self._in_request():
            self._disarm()

    def on_response_complete(self) -> None:
        """Finish the response; arm the deadline for the next request head unless one is already in or the connection closes."""
        super().on_response_complete()
        if not self._in_request() and not self.transport.is_closing():
            self._arm()

    def _in_request(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(_head_timeout(), self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self._in_request() or self.transport.is_closing():
            return
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        self.transport.close()
