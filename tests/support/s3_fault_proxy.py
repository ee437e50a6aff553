"""A fault-injecting HTTP proxy for the S3 test server, on loopback, deterministic with a seed.

:class:`FaultProxy` listens on ``127.0.0.1`` and forwards every request to an upstream S3 server
(the moto server). Before forwarding, it draws a fault for the request from a seeded
``random.Random`` (one draw per request, in arrival order, under a lock):

* ``error_500`` / ``error_503``: answer ``500 InternalError`` / ``503 SlowDown`` with an S3 XML
  error body, without forwarding;
* ``drop``: close the connection without any answer, without forwarding;
* ``slow``: forward, then hold the answer for ``slow_seconds``;
* otherwise forward untouched.

Random faults are injected before the upstream sees the request, so a request that failed never
took effect (what a store's front end losing a request looks like). ``schedule`` lists the faults
of the first requests explicitly; it may also name ``drop_after_forward`` (the request takes
effect, its answer is lost). ``counts`` records how many of
each fault were injected, so a test can prove it ran under faults; ``requests`` lists every
request's ``(method, path)`` in arrival order, so a benchmark can count them by kind.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

FAULTS = ("error_500", "error_503", "drop", "slow")
_ERROR_BODIES = {
    500: b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>InternalError</Code><Message>injected</Message></Error>",
    503: b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code><Message>injected</Message></Error>",
}
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}


class FaultProxy:
    """A threaded proxy to ``upstream`` that injects one of ``faults`` on a ``rate`` fraction of requests."""

    def __init__(
        self,
        upstream: str,
        seed: int,
        rate: float,
        slow_seconds: float = 0.3,
        faults: tuple[str, ...] = FAULTS,
        schedule: list[str | None] | None = None,
    ):
        parsed = urlparse(upstream)
        self.upstream_host = parsed.hostname or "127.0.0.1"
        self.upstream_port = parsed.port or 80
        self.rate = rate
        self.faults = faults
        self._schedule = list(schedule or [])
        self.slow_seconds = slow_seconds
        self.counts: Counter[str] = Counter()
        self.requests: list[tuple[str, str]] = []
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def draw(self, method: str = "", path: str = "") -> str | None:
        """The fault for the next request, ``method path`` (None = forward untouched)."""
        with self._lock:
            self.counts["requests"] += 1
            self.requests.append((method, path))
            if self._schedule:
                fault = self._schedule.pop(0)
                if fault is not None:
                    self.counts[fault] += 1
                return fault
            if self._random.random() >= self.rate:
                return None
            fault = self._random.choice(self.faults)
            self.counts[fault] += 1
            return fault

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            self.rfile.readline()
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _drop(self) -> None:
                """Close the connection at once, with no answer (shutdown: the client sees it now)."""
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)

            def _handle(self) -> None:
                body = self._body()
                fault = proxy.draw(self.command, self.path)
                if fault == "drop":
                    self._drop()
                    return
                if fault in ("error_500", "error_503"):
                    status = 500 if fault == "error_500" else 503
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(_ERROR_BODIES[status])))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(_ERROR_BODIES[status])
                    return
                upstream = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                    headers["Content-Length"] = str(len(body))
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    payload = response.read()
                    if fault == "drop_after_forward":
                        self._drop()
                        return
                    if fault == "slow":
                        time.sleep(proxy.slow_seconds)
                    self.send_response(response.status, response.reason)
                    for key, value in response.getheaders():
                        if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                            self.send_header(key, value)
                    # A HEAD answer carries the object's length, with no payload.
                    length = response.getheader("Content-Length", "0") if self.command == "HEAD" else str(len(payload))
                    self.send_header("Content-Length", length)
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                finally:
                    upstream.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        return Handler
