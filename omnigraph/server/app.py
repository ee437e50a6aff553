"""The FastAPI application: one graph, one program profile, endpoints for what the CLI does.

Endpoint handlers that touch the graph are plain ``def`` functions (FastAPI runs them in its worker
threads) or ``await`` :func:`starlette.concurrency.run_in_threadpool`: no Lance or object-storage
call runs on the event loop. Read queries run on a pool of their own
(:mod:`omnigraph.server.query_pool`), and the probes stay out of both pools, so that requests
which fill one cannot starve them: ``/healthz`` is answered on the event loop, and ``/readyz``
reads the stamp in a small pool of its own (:data:`PROBE_THREADS` threads). Errors are
``{"error": {code, message, details}}`` with the HTTP status of the error's code, the graph's
root replaced by ``GRAPH`` (:mod:`omnigraph.server.redact`); ``format_barrier`` (503) is a write
refused at a stamp this program does not write. Each process registers itself in the fleet
registry (``Graph.fleet_membership``) for its lifetime.

Every route is a :class:`omnigraph.server.gate.GuardedRoute` (host, token and grant, origin, content type,
body limits, checked before the handler) and declares its grant (:mod:`omnigraph.server.access`); the app
refuses to start with one that does not. Around the routes, outermost first:
:class:`omnigraph.server.observe.Observe` (access log, metrics) and CORS headers for the allowed origins
(only when some are configured).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

import omnigraph
import omnigraph.adjacency
from omnigraph import __version__
from omnigraph.errors import BadRequest, OmnigraphError
from omnigraph.results import CreatedBranch, DeletedBranch, LoadResult, MergeResult, MutationResult, Readiness, Snapshot
from omnigraph.server import metrics, models
from omnigraph.server.access import NDJSON_BODY, public, requires
from omnigraph.server.docs_ui import add_docs_routes
from omnigraph.server.errors import RangeNotSatisfiable
from omnigraph.server.gate import GuardedRoute, audit_routes, install_gate
from omnigraph.server.grants import Grant, Principal
from omnigraph.server.observe import Observe
from omnigraph.server.query_pool import QueryPool
from omnigraph.server.query_routes import query_router
from omnigraph.server.ranges import byte_range
from omnigraph.server.redact import Redactor
from omnigraph.server.service import GraphService
from omnigraph.server.settings import ServeSettings, settings_from_env
from omnigraph.server.throttled_log import install_accept_error_handler
from omnigraph.server.tokens import TokenTable, read_tokens_file

PROBE_THREADS = 2
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": models.ErrorResponse} for status in (400, 401, 403, 404, 408, 409, 412, 413, 415, 421, 499, 500, 503)
}


def _error_response(error: OmnigraphError, redactor: Redactor) -> JSONResponse:
    return JSONResponse(redactor.document(error.to_json()), status_code=error.http_status)


def create_app(settings: ServeSettings) -> FastAPI:
    """The application serving ``settings.graph`` as ``settings.program``.

    The tokens file (when the server is not unauthenticated) is read and validated here.
    """
    program = settings.program
    tokens = None if settings.tokens_file is None else TokenTable(read_tokens_file(settings.tokens_file))
    service = GraphService(settings.graph, program, on_recovery=metrics.count_recoveries)
    omnigraph.adjacency.listen(metrics.count_adjacency)
    probes = ThreadPoolExecutor(PROBE_THREADS, thread_name_prefix="omnigraph-probe")
    queries = QueryPool()

    @asynccontextmanager
    async def lifespan(started: FastAPI) -> AsyncIterator[None]:
        audit_routes(started)  # a route without a declared grant: refuse to start
        install_accept_error_handler(asyncio.get_running_loop())
        membership = service.graph.fleet_membership("server", settings.address)
        await run_in_threadpool(membership.start)
        try:
            yield
        finally:
            await run_in_threadpool(service.stop_writes)
            await run_in_threadpool(membership.stop)
            probes.shutdown(wait=False)
            queries.shutdown()
            metrics.forget_process(os.getpid())

    app = FastAPI(
        title=f"{program} serve",
        version=__version__,
        description=f"HTTP access to one graph (writes format {service.graph.writes_format}).",
        lifespan=lifespan,
        responses=_ERRORS,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,  # served by omnigraph.server.docs_ui, open routes like the rest
    )
    app.router.route_class = GuardedRoute
    redactor = Redactor(settings.graph)
    _install_error_handlers(app, redactor)
    _add_routes(app, service, program, probes)
    app.include_router(query_router(service, queries))
    if settings.docs:
        add_docs_routes(app)
    install_gate(app, settings, tokens)
    if settings.allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.allowed_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "If-Match", "X-Omnigraph-Actor"],
        )
    app.add_middleware(Observe, redactor=redactor)
    return app


def _add_routes(app: FastAPI, service: GraphService, program: str, probes: ThreadPoolExecutor) -> None:
    @app.get("/healthz", response_model=models.Health, tags=["health"], dependencies=[public()])
    async def healthz() -> dict[str, Any]:
        """The process is alive (touches no storage)."""
        return {"status": "ok"}

    @app.get(
        "/readyz",
        response_model=Readiness,
        tags=["health"],
        dependencies=[public()],
        responses={503: {"model": Readiness, "description": "Not ready for writes (reads still work)."}},
    )
    async def readyz() -> JSONResponse:
        """Ready for writes: 200 when the stamp is one this program writes and no claim is held, else 503."""
        document = await asyncio.get_running_loop().run_in_executor(probes, service.readiness)
        return JSONResponse(document, status_code=200 if document["writable"] else 503)

    @app.get("/version", response_model=models.VersionInfo, tags=["health"], dependencies=[requires(Grant.READ)])
    def version() -> dict[str, Any]:
        return {"program": program, "version": __version__, "format": service.graph.writes_format}

    @app.get(
        "/metrics",
        tags=["health"],
        response_class=Response,
        dependencies=[requires(Grant.READ)],
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text exposition."}},
    )
    def prometheus_metrics() -> Response:
        """Every metric of every worker process, in the Prometheus text format (``docs/serving.md``)."""
        return Response(metrics.exposition(service.graph.stamp, program), media_type=metrics.CONTENT_TYPE)

    @app.get("/branches", response_model=models.BranchList, tags=["branches"], dependencies=[requires(Grant.READ)])
    def list_branches() -> dict[str, Any]:
        return {"branches": service.branches()}

    @app.post("/branches", response_model=CreatedBranch, status_code=201, tags=["branches"])
    def create_branch(body: models.BranchCreate, principal: Annotated[Principal, requires(Grant.BRANCH)]) -> dict[str, Any]:
        principal.check_write(body.name, "create")
        return service.create_branch(body.name, body.from_branch)

    @app.delete("/branches/{name}", response_model=DeletedBranch, tags=["branches"])
    def delete_branch(name: str, principal: Annotated[Principal, requires(Grant.BRANCH)]) -> dict[str, Any]:
        principal.check_write(name, "delete")
        service.delete_branch(name)
        return {"deleted": name}

    @app.get("/branches/{branch}/snapshot", response_model=Snapshot, tags=["reads"], dependencies=[requires(Grant.READ)])
    def snapshot(branch: str) -> dict[str, Any]:
        return service.snapshot(branch)

    @app.get("/branches/{branch}/commits", response_model=models.CommitList, tags=["reads"], dependencies=[requires(Grant.READ)])
    def commits(branch: str) -> dict[str, Any]:
        return {"branch": branch, "commits": service.commits(branch)}

    @app.get(
        "/branches/{branch}/export",
        tags=["reads"],
        response_class=StreamingResponse,
        dependencies=[requires(Grant.EXPORT)],
        responses={200: {"content": {"application/x-ndjson": {}}, "description": "JSONL, sorted by table key then id."}},
    )
    def export(branch: str, types: Annotated[list[str], Query(alias="type")] = []) -> StreamingResponse:  # noqa: B006
        """The branch as JSONL (the load format), streamed; ``type`` (repeatable) limits the types."""
        return StreamingResponse(service.export(branch, list(types)), media_type="application/x-ndjson")

    @app.get(
        "/branches/{branch}/blob",
        tags=["reads"],
        response_class=StreamingResponse,
        dependencies=[requires(Grant.READ)],
        responses={
            200: {"content": {"application/octet-stream": {}}, "description": "The cell's bytes."},
            206: {"content": {"application/octet-stream": {}}, "description": "The bytes of the one range asked for."},
            416: {"model": models.ErrorResponse, "description": "A range that selects no byte of the cell."},
        },
    )
    def blob(
        branch: str,
        type_name: Annotated[str, Query(alias="type")],
        row_id: Annotated[str, Query(alias="id")],
        prop: Annotated[str, Query(alias="property")],
        range_header: Annotated[str | None, Header(alias="range")] = None,
    ) -> Response:
        """One Blob cell's bytes, streamed (``omnigraph blob get``): ``?type=T&id=ID&property=P``
        (query parameters, so any id fits); ``Content-Length`` is the cell's size. A single
        ``Range: bytes=...`` is answered 206 with ``Content-Range``, one that selects no byte
        416; several ranges (or another unit) are ignored: the whole cell, 200.
        """  # noqa: D205 - the route's OpenAPI description, served as written
        reader = service.blob(branch, type_name, row_id, prop)
        try:
            wanted = byte_range(range_header, reader.size)
        except RangeNotSatisfiable as refused:
            reader.close()
            return JSONResponse(refused.to_json(), status_code=416, headers={"Content-Range": f"bytes */{reader.size}"})
        headers = {"Accept-Ranges": "bytes"}
        if wanted is None:
            headers["Content-Length"] = str(reader.size)
            return StreamingResponse(reader.chunks(), media_type="application/octet-stream", headers=headers)
        start, stop = wanted
        headers.update({"Content-Length": str(stop - start), "Content-Range": f"bytes {start}-{stop - 1}/{reader.size}"})
        chunks = reader.chunks(start=start, stop=stop)
        return StreamingResponse(chunks, status_code=206, media_type="application/octet-stream", headers=headers)

    @app.post(
        "/branches/{branch}/load",
        response_model=LoadResult,
        tags=["writes"],
        openapi_extra={"requestBody": {"required": True, "content": {"application/x-ndjson": {}}}},
    )
    async def load(
        branch: str,
        request: Request,
        mode: Annotated[Literal["append", "merge", "overwrite"], Query()],
        principal: Annotated[Principal, requires(Grant.WRITE, body=NDJSON_BODY)],
    ) -> dict[str, Any]:
        """Load a JSONL body as one commit: append = strict insert, merge = upsert, overwrite = replace.
        The body is parsed and validated before the server's write lock is taken.
        """  # noqa: D205 - the route's OpenAPI description, served as written
        principal.check_write(branch, "load")
        data = await request.body()  # read and bounded by the gate already
        return await run_in_threadpool(service.load, branch, mode, data, principal.actor)

    if program == omnigraph.ENGINE:  # the format-4 release had neither

        @app.post("/branches/{name}/merge", response_model=MergeResult, tags=["branches"])
        def merge_branch(name: str, body: models.MergeRequest, principal: Annotated[Principal, requires(Grant.MERGE)]) -> dict[str, Any]:
            """Three-way merge of branch ``name`` into ``into`` (up to date, fast-forward or a merge
            commit); any conflict is 409 ``merge_conflict`` with the full list, nothing written.
            """  # noqa: D205 - the route's OpenAPI description, served as written
            principal.check_write(body.into, "merge")
            return service.merge(name, body.into, principal.actor)

        @app.post("/schema/plan", tags=["schema"], dependencies=[requires(Grant.READ)])
        def plan_schema(body: models.SchemaRequest) -> dict[str, Any]:
            """The steps from the accepted schema to ``schema`` (``omnigraph schema plan --json``); writes nothing."""
            return service.plan_schema(body.schema_source)

        @app.post("/schema/apply", tags=["schema"])
        def apply_schema(body: models.SchemaRequest, principal: Annotated[Principal, requires(Grant.ADMIN)]) -> dict[str, Any]:
            """Apply ``schema`` to every branch, one commit per branch (``omnigraph schema apply --json``); needs the
            ``admin`` grant, and ``allow_data_loss`` for steps that drop types or properties.
            """  # noqa: D205 - the route's OpenAPI description, served as written
            principal.check_every_branch()
            return service.apply_schema(body.schema_source, body.allow_data_loss, principal.actor)

        @app.post("/branches/{branch}/mutate", response_model=MutationResult, tags=["writes"])
        def mutate(
            branch: str,
            body: models.MutateRequest,
            principal: Annotated[Principal, requires(Grant.WRITE)],
            if_match: Annotated[str | None, Header()] = None,
        ) -> dict[str, Any]:
            """Run one ``.gq`` query as one commit; ``if_commit`` in the body (or ``If-Match: <commit id>``)
            refuses (412 ``precondition_failed``, nothing written) unless the branch head is that commit
            (``--if-commit``); both given must name the same commit.
            """  # noqa: D205 - the route's OpenAPI description, served as written
            principal.check_write(branch, "mutate")
            if if_match is not None and body.if_commit is not None and if_match != body.if_commit:
                raise BadRequest(
                    f"If-Match names commit {if_match} but if_commit names {body.if_commit}; give one condition; nothing was written",
                    {"if_match": if_match, "if_commit": body.if_commit},
                )
            if_commit = body.if_commit if body.if_commit is not None else if_match
            return service.mutate(branch, body.query, body.name, body.params, if_commit, principal.actor)


def _install_error_handlers(app: FastAPI, redactor: Redactor) -> None:
    @app.exception_handler(OmnigraphError)
    async def omnigraph_error(_: Request, error: OmnigraphError) -> JSONResponse:
        return _error_response(error, redactor)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
        problems = [
            {"loc": [str(part) for part in item.get("loc", ())], "msg": str(item.get("msg")), "type": str(item.get("type"))}
            for item in error.errors()
        ]
        summary = "; ".join(f"{'.'.join(p['loc'])}: {p['msg']}" for p in problems)
        return _error_response(BadRequest(f"invalid request: {summary}", {"errors": problems}), redactor)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        if error.status_code == 404:
            body = {"error": {"code": "not_found", "message": f"no endpoint {request.url.path}", "details": {}}}
        else:
            body = {"error": {"code": "bad_request", "message": str(error.detail), "details": {}}}
        return JSONResponse(body, status_code=error.status_code)


def app_from_env() -> FastAPI:
    """Uvicorn factory: the app of the settings ``omnigraph serve`` put in the environment."""
    return create_app(settings_from_env())
