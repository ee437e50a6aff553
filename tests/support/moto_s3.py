"""The tests' S3-compatible server: moto, with conditional writes made atomic as they are on S3.

moto answers ``PUT``/``POST`` with ``If-None-Match: *`` (or ``If-Match``) by checking the key and
then storing the object, in a threaded server and without a lock: two concurrent
create-if-absent requests for one key can both succeed, which S3 never allows. Claims, intents,
ledger records and Lance's own commits rely on that atomicity, so a test against plain moto can
see two winners of one race. This launcher serves moto's application with every conditional write
handled under one lock; every other request is served concurrently as moto serves it.

Run as ``python moto_s3.py -H 127.0.0.1 -p PORT`` (the arguments of ``python -m moto.server``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

_CONDITIONAL_HEADERS = ("HTTP_IF_NONE_MATCH", "HTTP_IF_MATCH")
_WRITE_METHODS = ("PUT", "POST")

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class AtomicConditionalWrites:
    """WSGI middleware: one conditional write at a time, each answered in full under the lock."""

    def __init__(self, app: WsgiApp) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        conditional = environ.get("REQUEST_METHOD") in _WRITE_METHODS and any(header in environ for header in _CONDITIONAL_HEADERS)
        if not conditional:
            return self._app(environ, start_response)
        with self._lock:
            return list(self._app(environ, start_response))


def main(argv: list[str] | None = None) -> None:
    """Serve moto on ``--host``/``--port`` until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(args.host, args.port, AtomicConditionalWrites(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
