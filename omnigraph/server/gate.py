"""The gate: the checks every request to a route passes before its handler runs.

Routes are :class:`GuardedRoute` objects; once routing has chosen one, and before FastAPI reads
the body or solves a dependency, in order:

0. on a guarded route, when the worker is already answering ``--max-connections`` requests of
   guarded routes (a request counts from here until its handler returns, its body wait
   included), 503 ``overloaded``, closing the connection; the open routes (``/healthz``,
   ``/readyz``, the API description) are answered regardless, so that probes see a live process
   under a flood of stalled uploads;

1. on a guarded route, ``Host`` must name an allowed host (400 without one, 421
   ``misdirected_request`` otherwise): a page on another site that rebinds its DNS name to this
   address is refused. Open routes (health, readiness, the API description) show no graph data
   and answer any ``Host``, so that probes which name the address they connect to work;
2. on a guarded route, the bearer token (401 ``unauthorized``) and the route's grant (403
   ``forbidden``); ``X-Omnigraph-Actor`` needs the ``impersonate`` grant (403) and then becomes
   the actor; on an unauthenticated server every caller holds every grant; then a branch named
   in the path that cannot exist is 400 ``bad_request`` (:mod:`omnigraph.server.names`);
3. on a write (any method but GET, HEAD, OPTIONS): an ``Origin`` other than the server's own or an
   allowed one is 403 ``origin_refused``, and a body must be JSON (JSONL on a JSONL route), else
   415 ``unsupported_media_type``: a cross-site form or ``text/plain`` post never reaches a handler;
4. the body is read here, whole, before the handler: a body over the route's limit is 413
   ``resource_limit``, once it has been read and discarded if it is at most
   :data:`DRAIN_BYTES` long (so that a client that sends before it reads can read the answer),
   else at once (a declared ``Content-Length`` then without reading a byte; ``Expect:
   100-continue`` too); one that does not arrive within the body timeout is 408
   ``request_timeout``; these close the connection.

Nothing here touches the graph, and nothing is written on a refusal. A path no route matches is
answered 404 by the router and reads no body.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute
from starlette.types import Message, Receive, Scope

from omnigraph.errors import BadRequest, Internal, OmnigraphError, ResourceLimit
from omnigraph.server import names
from omnigraph.server.access import JSON_BODY, PRINCIPAL_KEY, Policy, single_policy
from omnigraph.server.errors import (
    Forbidden,
    MisdirectedRequest,
    OriginRefused,
    Overloaded,
    RequestTimeout,
    Unauthorized,
    UnsupportedMediaType,
)
from omnigraph.server.grants import Grant, Principal, anonymous
from omnigraph.server.settings import ServeSettings
from omnigraph.server.tokens import ACTOR_PATTERN, TokenTable

ROUTE_KEY = "omnigraph_route"
GRANT_KEY = "omnigraph_grant"
GATE_STATE = "omnigraph_gate"
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MEDIA_TYPES = {
    "json": frozenset({"application/json"}),
    "ndjson": frozenset({"application/x-ndjson", "application/jsonl", "application/json"}),
}
ACTOR_HEADER = "x-omnigraph-actor"
DRAIN_BYTES = 64 * 1024 * 1024
"""A refused body at most this long is read and discarded before the 413 (:meth:`_GateConfig.read_body`)."""
_ACTOR = re.compile(ACTOR_PATTERN)


def host_name(value: str) -> str | None:
    """The host name of a ``Host`` header value (port and IPv6 brackets removed, lower case).

    None when the value is malformed.
    """
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        name, rest = value[1:end], value[end + 1 :]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name
    name, colon, port = value.partition(":")
    if not name or (colon and not port.isdigit()):
        return None
    return name


class GuardedRoute(APIRoute):
    """An ``APIRoute`` whose handler passes the gate first (the module docstring).

    The checks run once routing has chosen the route and before FastAPI reads the body or solves a
    dependency.

    The app's router and every router included in it use this class (``route_class``);
    :func:`audit_routes` refuses to start an app with a route of another class.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler of this route, behind the gate's checks for the route's policy."""
        handler = super().get_route_handler()
        policy = single_policy(self)
        path = self.path_format

        async def guarded(request: Request) -> Response:
            gate: _GateConfig | None = getattr(request.app.state, GATE_STATE, None)
            if policy is None or gate is None:
                return _refusal(Internal(f"route {path} declares no access policy, or the app has no gate: refused"))
            state = request.scope.setdefault("state", {})
            state[ROUTE_KEY] = path
            state[GRANT_KEY] = policy.grant
            headers = _headers(request.scope)
            if policy.grant is None:
                return await _admitted(handler, request, gate, policy, headers, state)
            try:
                gate.check_load()
            except OmnigraphError as error:
                return _refusal(error, close=True)
            gate.in_flight += 1
            try:
                return await _admitted(handler, request, gate, policy, headers, state)
            finally:
                gate.in_flight -= 1

        return guarded


class _GateConfig:
    """The gate's settings for one app (kept in ``app.state``): allowed hosts and origins, tokens, limits."""

    def __init__(self, settings: ServeSettings, tokens: TokenTable | None) -> None:
        self.settings = settings
        self.tokens = tokens
        self.allowed_hosts = frozenset(name.strip("[]").lower() for name in settings.allowed_hosts)
        self.allowed_origins = frozenset(origin.rstrip("/").lower() for origin in settings.allowed_origins)
        self.in_flight = 0  # requests of guarded routes being answered (the event loop's thread only)

    def check_load(self) -> None:
        """Step 0 of the module docstring."""
        cap = self.settings.limits.max_connections
        if self.in_flight >= cap:
            raise Overloaded(
                f"this server is already answering {self.in_flight} requests, its limit: retry later "
                "(the operator can raise it with `omnigraph serve --max-connections N`)",
                {"in_flight": self.in_flight, "limit": cap},
            )

    def admit(self, policy: Policy, method: str, headers: dict[str, str], state: dict[str, Any]) -> None:
        """Steps 1 to 3 of the module docstring; the principal (if any) goes into ``state``."""
        if policy.grant is not None:
            self._check_host(headers)
        self._admit(policy, headers, state)
        if method not in READ_METHODS:
            self._check_origin(headers)
            if _announces_body(headers):
                _check_media_type(policy, headers)

    def _check_host(self, headers: dict[str, str]) -> None:
        value = headers.get("host")
        if value is None:
            raise BadRequest("the request has no Host header")
        name = host_name(value)
        if name is None or name not in self.allowed_hosts:
            raise MisdirectedRequest(
                f"this server does not answer for host {value!r}; it answers for {', '.join(sorted(self.allowed_hosts))} "
                "(add a name with `omnigraph serve --allowed-host NAME`)",
                {"host": value, "allowed": sorted(self.allowed_hosts)},
            )

    def _admit(self, policy: Policy, headers: dict[str, str], state: dict[str, Any]) -> None:
        """Put the caller's principal in ``state``, or refuse the caller.

        The principal is put as soon as it is known, so that the access log names the actor of a
        refusal too.
        """
        if policy.grant is None:
            return
        principal = anonymous() if self.tokens is None else self._authenticate(headers)
        state[PRINCIPAL_KEY] = principal
        if not principal.may(policy.grant):
            raise Forbidden(
                f"actor {principal.actor!r} lacks the {policy.grant.value!r} grant this endpoint needs",
                {"grant": policy.grant.value, "actor": principal.actor},
            )
        claimed = headers.get(ACTOR_HEADER)
        if claimed is None:
            return
        if not principal.may(Grant.IMPERSONATE):
            raise Forbidden(
                f"actor {principal.actor!r} may not record another actor: X-Omnigraph-Actor needs the 'impersonate' grant",
                {"grant": Grant.IMPERSONATE.value, "actor": principal.actor},
            )
        if not _ACTOR.match(claimed):
            raise BadRequest(f"X-Omnigraph-Actor {claimed!r} is not an actor name ({ACTOR_PATTERN})", {"actor": claimed})
        state[PRINCIPAL_KEY] = dataclasses.replace(principal, actor=claimed)

    def _authenticate(self, headers: dict[str, str]) -> Principal:
        assert self.tokens is not None
        scheme, _, token = headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("this endpoint needs a bearer token: send `Authorization: Bearer <token>`")
        principal = self.tokens.authenticate(token.strip())
        if principal is None:
            raise Unauthorized("the bearer token is not valid on this server (it is in none of its tokens file's entries)")
        return principal

    def _check_origin(self, headers: dict[str, str]) -> None:
        origin = headers.get("origin")
        if origin is None:
            return
        normalised = origin.rstrip("/").lower()
        own = {f"http://{headers.get('host', '').lower()}", f"https://{headers.get('host', '').lower()}"}
        if normalised not in own and normalised not in self.allowed_origins:
            raise OriginRefused(
                f"writes from origin {origin!r} are refused (allow it with `omnigraph serve --allowed-origin {origin}`)",
                {"origin": origin},
            )

    async def read_body(self, policy: Policy, headers: dict[str, str], receive: Receive) -> bytes | None:
        """Step 4 of the module docstring: the whole body, or None when the client went away.

        A body over the limit is refused (413) once it has been read and discarded, when it is at
        most :data:`DRAIN_BYTES` long and arrives within the body timeout: a client that sends the
        whole body before it reads (Python's urllib, for one) then reads the 413 instead of a
        broken pipe. A longer body, or one announced with ``Expect: 100-continue`` (the client
        waits before it sends), is refused at once, before a byte is read.
        """
        limits = self.settings.limits
        limit = limits.json_body_bytes if policy.body == JSON_BODY else limits.load_body_bytes
        declared = headers.get("content-length", "")
        refusal: ResourceLimit | None = None
        if declared.isdigit() and int(declared) > limit:
            refusal = ResourceLimit("body_bytes", limit, int(declared), f"a request body of {declared} bytes exceeds the limit of {limit}")
            if int(declared) > DRAIN_BYTES or "100-continue" in headers.get("expect", "").lower():
                raise refusal
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.body_timeout
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
            except TimeoutError as error:
                if refusal is not None:
                    raise refusal from None
                raise RequestTimeout(
                    f"the request body did not arrive within {limits.body_timeout:g} s", {"timeout_seconds": limits.body_timeout}
                ) from error
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit and refusal is None:
                refusal = ResourceLimit("body_bytes", limit, size, f"the request body exceeds the limit of {limit} bytes")
            if refusal is not None and size > DRAIN_BYTES:
                raise refusal
            if refusal is None:
                chunks.append(chunk)
            if not message.get("more_body", False):
                if refusal is not None:
                    raise refusal
                return b"".join(chunks)


async def _admitted(
    handler: Callable[[Request], Coroutine[Any, Any, Response]],
    request: Request,
    gate: _GateConfig,
    policy: Policy,
    headers: dict[str, str],
    state: dict[str, Any],
) -> Response:
    """Steps 1 to 4 of the module docstring, then ``handler``."""
    try:
        gate.admit(policy, request.method, headers, state)
        names.check_path(request.path_params)
    except OmnigraphError as error:
        return _refusal(error)
    if not _announces_body(headers):
        return await handler(request)
    try:
        body = await gate.read_body(policy, headers, request.receive)
    except OmnigraphError as error:
        return _refusal(error, close=True)
    if body is None:
        return Response(status_code=400, headers={"connection": "close"})  # the client went away
    return await handler(Request(request.scope, _replay(body, request.receive)))


def _headers(scope: Scope) -> dict[str, str]:
    """The request headers, names lower case; a repeated header keeps its first value."""
    found: dict[str, str] = {}
    for name, value in scope["headers"]:
        found.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return found


def _announces_body(headers: dict[str, str]) -> bool:
    length = headers.get("content-length")
    return "transfer-encoding" in headers or (length is not None and length != "0")


def _check_media_type(policy: Policy, headers: dict[str, str]) -> None:
    media = headers.get("content-type", "").split(";")[0].strip().lower()
    accepted = MEDIA_TYPES[policy.body]
    if media not in accepted:
        raise UnsupportedMediaType(
            f"a body of type {media or '(none)'!r} is refused here; send Content-Type: {' or '.join(sorted(accepted))}",
            {"content_type": media, "accepted": sorted(accepted)},
        )


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body read by the gate, then the connection's own."""
    pending = True

    async def replayed() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _refusal(error: OmnigraphError, *, close: bool = False) -> JSONResponse:
    headers: dict[str, str] = {"www-authenticate": "Bearer"} if isinstance(error, Unauthorized) else {}
    if close:
        headers["connection"] = "close"
    return JSONResponse(error.to_json(), status_code=error.http_status, headers=headers)


def install_gate(app: FastAPI, settings: ServeSettings, tokens: TokenTable | None) -> None:
    """Give ``app``'s guarded routes their gate (before it serves)."""
    setattr(app.state, GATE_STATE, _GateConfig(settings, tokens))


def _routes(routes: list[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route under ``routes``, through included routers.

    Some FastAPI versions keep an included router as one entry holding the router.
    """
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None and not isinstance(route, APIRoute):
            yield from _routes(included.routes)
        else:
            yield route


def audit_routes(app: FastAPI) -> list[tuple[str, Policy]]:
    """``(path, policy)`` of every route of ``app``.

    Raises ``RuntimeError`` naming each route that is not a :class:`GuardedRoute` or does not
    declare exactly one policy. The app calls it when it starts, so a route that forgot its grant
    keeps the server from starting.
    """
    found: list[tuple[str, Policy]] = []
    problems: list[str] = []
    for route in _routes(app.router.routes):
        name = f"{sorted(getattr(route, 'methods', None) or [])} {getattr(route, 'path', route)}"
        policy = single_policy(route) if isinstance(route, GuardedRoute) else None
        if not isinstance(route, GuardedRoute):
            problems.append(f"{name} is not a omnigraph.server.gate.GuardedRoute (create its router with route_class=GuardedRoute)")
        elif policy is None:
            problems.append(f"{name} declares no grant, or several (use omnigraph.server.access.requires or public)")
        else:
            found.append((route.path, policy))
    if problems:
        raise RuntimeError("routes the gate cannot guard: " + "; ".join(problems))
    return found
