"""The contract for routes added later (for example a query router): a router created with
``route_class=GuardedRoute`` whose routes declare a grant gets the gate's checks like the
built-in routes; a route that declares none, or a router of another class, keeps the app from
starting. Served by uvicorn on 127.0.0.1 in this process, called with httpx.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
import uvicorn
from fastapi import APIRouter, FastAPI
from pydantic import BaseModel

from omnigraph.server.access import requires
from omnigraph.server.app import create_app
from omnigraph.server.gate import GuardedRoute, audit_routes
from omnigraph.server.grants import Grant, Principal
from omnigraph.server.settings import ServeSettings
from tests.support.graph_helpers import make_example_graph
from tests.support.serve_helpers import Tokens, error_of, free_port, write_tokens


class Echo(BaseModel):
    text: str


def later_router() -> APIRouter:
    router = APIRouter(prefix="/later", route_class=GuardedRoute, dependencies=[requires(Grant.EXPORT)])

    @router.get("/ping")
    def ping() -> dict[str, str]:
        return {"pong": "yes"}

    @router.post("/echo")
    def echo(body: Echo, principal: Annotated[Principal, requires(Grant.EXPORT)]) -> dict[str, Any]:
        return {"text": body.text, "actor": principal.actor}

    return router


def _settings(graph: str, tokens: Tokens) -> ServeSettings:
    return ServeSettings(graph=graph, program="omnigraph", tokens_file=str(tokens.path), allowed_hosts=["127.0.0.1", "localhost"])


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_a_later_router_is_guarded_by_its_declaration(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    tokens = write_tokens(tmp_path, {"reader": [Grant.READ], "exporter": [Grant.EXPORT]})
    app = create_app(_settings(uri, tokens))
    app.include_router(later_router())
    assert ("/later/ping", Grant.EXPORT) in [(path, policy.grant) for path, policy in audit_routes(app)]
    with serving(app) as base:

        def client(actor: str | None) -> httpx.Client:
            headers = {} if actor is None else {"authorization": f"Bearer {tokens.by_actor[actor]}"}
            return httpx.Client(base_url=base, headers=headers, timeout=30)

        with client(None) as nobody, client("reader") as reader, client("exporter") as exporter:
            error_of(nobody.get("/later/ping"), 401, "unauthorized")
            error_of(reader.get("/later/ping"), 403, "forbidden")
            assert exporter.get("/later/ping").json() == {"pong": "yes"}
            error_of(reader.post("/later/echo", json={"text": "hi"}), 403, "forbidden")
            assert exporter.post("/later/echo", json={"text": "hi"}).json() == {"text": "hi", "actor": "exporter"}
            error_of(
                exporter.post("/later/echo", content=b'{"text": "hi"}', headers={"content-type": "text/plain"}),
                415,
                "unsupported_media_type",
            )
            error_of(
                exporter.post("/later/echo", content=b"{" + b" " * (2 * 1024 * 1024) + b"}", headers={"content-type": "application/json"}),
                413,
                "resource_limit",
            )
            error_of(exporter.get("/later/ping", headers={"host": "evil.example"}), 421, "misdirected_request")


def test_a_route_without_a_grant_keeps_the_app_from_starting(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    tokens = write_tokens(tmp_path, {"reader": [Grant.READ]})

    undeclared = APIRouter(route_class=GuardedRoute)
    undeclared.add_api_route("/forgot", lambda: {"oops": True}, methods=["GET"])
    plain = APIRouter()
    plain.add_api_route("/plain", lambda: {"oops": True}, methods=["GET"], dependencies=[requires(Grant.READ)])
    for router, problem in ((undeclared, "/forgot declares no grant"), (plain, "/plain is not a omnigraph.server.gate.GuardedRoute")):
        app = create_app(_settings(uri, tokens))
        app.include_router(router)
        with pytest.raises(RuntimeError, match=problem):
            audit_routes(app)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="critical"))
        with pytest.raises(SystemExit):
            server.run()  # the lifespan's audit fails the start-up


def _every_route(routes: list[Any]) -> list[Any]:
    """The routes under ``routes``, through included routers (kept as one entry by some FastAPI versions)."""
    found = []
    for route in routes:
        included = getattr(route, "original_router", None)
        found += _every_route(included.routes) if included is not None and not hasattr(route, "methods") else [route]
    return [route for route in found if getattr(route, "methods", None)]


def _normalised(path: str) -> str:
    path = re.sub(r"\[.*?\]|\?.*$", "", path)
    return re.sub(r"\{[^}]*\}|\.\.\.", "{}", path)


def test_serving_guide_lists_every_route(tmp_path: Path) -> None:
    """``docs/serving.md``'s endpoint table lists exactly the routes the app registers."""
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    tokens = write_tokens(tmp_path, {"reader": [Grant.READ]})
    app = create_app(_settings(uri, tokens))
    registered = {(method, _normalised(route.path)) for route in _every_route(app.routes) for method in route.methods if method != "HEAD"}
    guide = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text(encoding="utf-8")
    table = guide.split("## Endpoints", 1)[1].split("\n\n", 2)[1]
    documented = set()
    for row in table.splitlines()[2:]:
        method = None
        for item in re.findall(r"`([^`]+)`", row.split(" | ")[0]):
            found = re.match(r"(GET|POST|DELETE) (\S+)", item)
            if found:
                method, path = found.groups()
            elif item.startswith("/") and method is not None:
                path = item
            else:
                continue
            documented.add((method, _normalised(path)))
    assert documented == registered, {"undocumented": registered - documented, "no such route": documented - registered}
