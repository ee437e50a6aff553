"""One JSON access-log line and the metrics of every request; a typed answer to an unexpected error.

The outermost middleware of the app (:mod:`omnigraph.server.gate` runs inside it, so refusals are logged
and counted too). Per request it writes one line to standard output, keys in this order::

    {"time": "2026-07-10T12:00:00.000Z", "method": "POST", "path": "/branches/main/load",
     "route": "/branches/{branch}/load", "status": 200, "duration_ms": 12.5, "actor": "loader",
     "commit": "01J...", "error": null, "client": "127.0.0.1"}

``route`` is the matched route template (null when none matched), ``actor`` the principal's
(null on an open route or before authentication), ``commit`` the last commit a write published
(null for every read: a route of the ``read`` or ``export`` grant never publishes one, even when
its answer names the commit it read), ``error`` the error code of an error response. The token is
never logged, nor any header or body. ``commit`` and ``error`` are read from the JSON document the
handler answered (a write answers ``commit`` or ``commits``; every error is
``{"error": {"code", ...}}``), so a route added later is logged the same way without doing
anything. A successful read counts in ``omnigraph_reads_total``, a write's commits in
``omnigraph_commits_total``.

An exception no handler turned into a response (a bug) is answered 500 ``internal``, with its
traceback logged to stderr; a ``RecursionError`` (an input nested deeper than a parser can
follow) is answered 400 ``bad_request``. Either way the client gets a typed answer, not a reset,
without the graph's root (:mod:`omnigraph.server.redact`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import UTC, datetime
from typing import Any

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from omnigraph.errors import BadRequest, Internal, OmnigraphError
from omnigraph.server import metrics
from omnigraph.server.access import PRINCIPAL_KEY
from omnigraph.server.gate import GRANT_KEY, READ_METHODS, ROUTE_KEY
from omnigraph.server.grants import Grant, Principal
from omnigraph.server.redact import Redactor

PEEK_BYTES = 64 * 1024
logger = logging.getLogger("omnigraph.server")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Seen:
    """What the app sent: the status, and the start of a JSON body worth reading."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.status: int | None = None
        self.peeking = False
        self.body = bytearray()

    def note(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            content_type = dict(message.get("headers", [])).get(b"content-type", b"")
            self.peeking = content_type.startswith(b"application/json") and (self.status >= 400 or self.method not in READ_METHODS)
        elif message["type"] == "http.response.body" and self.peeking and len(self.body) < PEEK_BYTES:
            self.body += message.get("body", b"")

    def document(self) -> dict[str, Any]:
        if not self.peeking or len(self.body) > PEEK_BYTES:
            return {}
        try:
            parsed = json.loads(bytes(self.body))
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}


def _commits(document: dict[str, Any]) -> list[str]:
    if isinstance(document.get("commit"), str):
        return [document["commit"]]
    commits = document.get("commits")
    return [c for c in commits if isinstance(c, str)] if isinstance(commits, list) else []


def _error_code(document: dict[str, Any]) -> str | None:
    error = document.get("error")
    return str(error.get("code")) if isinstance(error, dict) and "code" in error else None


class Observe:
    """The ASGI middleware described in the module docstring."""

    def __init__(self, app: ASGIApp, *, redactor: Redactor, log_fd: int = 1) -> None:
        self.app = app
        self.redactor = redactor
        self.log_fd = log_fd

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection through the app, timing and logging an HTTP request (module docstring)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        seen = _Seen(scope["method"])

        async def observed(message: Message) -> None:
            seen.note(message)
            await send(message)

        metrics.IN_FLIGHT.inc()
        try:
            await self.app(scope, receive, observed)
        except Exception as error:
            if seen.status is not None:
                logger.exception("request failed after its response started")
                raise
            answer: OmnigraphError
            if isinstance(error, RecursionError):
                answer = BadRequest("the input is nested too deeply to parse", {"resource": "nesting_depth"})
            else:
                logger.exception("unexpected error")
                answer = Internal(f"{type(error).__name__}: {error}")
            await JSONResponse(self.redactor.document(answer.to_json()), status_code=answer.http_status)(scope, receive, observed)
        finally:
            metrics.IN_FLIGHT.dec()
            self._record(scope, seen, time.perf_counter() - started)

    def _record(self, scope: Scope, seen: _Seen, seconds: float) -> None:
        state = scope.get("state", {})
        route = state.get(ROUTE_KEY)
        principal = state.get(PRINCIPAL_KEY)
        grant = state.get(GRANT_KEY)
        writes = isinstance(grant, Grant) and grant.writes
        document = seen.document()
        commits, code = _commits(document) if writes else [], _error_code(document)
        status = seen.status if seen.status is not None else 500
        label = route or "unmatched"
        metrics.REQUESTS.labels(scope["method"], label, str(status)).inc()
        metrics.LATENCY.labels(scope["method"], label).observe(seconds)
        if code is not None:
            metrics.ERRORS.labels(code).inc()
            if code in metrics.CONFLICT_CODES:
                metrics.CONFLICTS.labels(code).inc()
        if commits and status < 400:
            metrics.COMMITS.labels(label).inc(len(commits))
        if isinstance(grant, Grant) and not writes and status < 400:
            metrics.READS.labels(label).inc()
        client = scope.get("client")
        line = {
            "time": _now(),
            "method": scope["method"],
            "path": scope["path"][:1024],
            "route": route,
            "status": status,
            "duration_ms": round(seconds * 1000, 3),
            "actor": principal.actor if isinstance(principal, Principal) else None,
            "commit": commits[-1] if commits else None,
            "error": code,
            "client": client[0] if client else None,
        }
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self.log_fd, data) :]
