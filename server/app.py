"""The FastAPI application: one graph, one program profile, endpoints for what the CLI does.

Endpoint handlers that touch the graph are plain ``def`` functions (FastAPI runs them in its worker
threads) or ``await`` :func:`starlette.concurrency.run_in_threadpool`: no Lance or object-storage
call runs on the event loop. Errors are ``{"error": {code, message, details}}`` with the HTTP status
of the error's code (REFERENCE.md); ``format_barrier`` (503) is a write refused at a stamp this
program does not write. Each process registers itself in the fleet registry
(:mod:`engine.access.fleet`) for its lifetime.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine import __version__
from engine.access import fleet
from engine.door import FENCED_PROFILE, LEGACY_PROFILE, EngineProfile
from engine.errors import BadRequest, Internal, OmnigraphError, ResourceLimit
from server import models
from server.query_routes import query_router
from server.service import GraphService

PROFILES: dict[str, EngineProfile] = {FENCED_PROFILE.program: FENCED_PROFILE, LEGACY_PROFILE.program: LEGACY_PROFILE}
MAX_BODY_BYTES = int(os.environ.get("OMNIGRAPH_SERVE_MAX_BODY_BYTES", str(256 * 1024 * 1024)))
DEFAULT_ACTOR = "http"

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": models.ErrorResponse} for status in (400, 404, 409, 412, 413, 500, 503)
}


def _error_response(error: OmnigraphError, status: int | None = None) -> JSONResponse:
    return JSONResponse(error.to_json(), status_code=status or error.http_status)


def create_app(uri: str, profile: EngineProfile, address: str | None = None) -> FastAPI:
    """The application serving graph ``uri`` as ``profile.program``."""
    service = GraphService(uri, profile)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        membership = fleet.Membership(service.store, profile.program, "server", profile.init_stamp, address)
        await run_in_threadpool(membership.start)
        try:
            yield
        finally:
            await run_in_threadpool(service.stop_writes)
            await run_in_threadpool(membership.stop)

    app = FastAPI(
        title=f"{profile.program} serve",
        version=__version__,
        description=f"HTTP access to the graph at {service.store.uri} (writes format {profile.init_stamp}).",
        lifespan=lifespan,
        responses=_ERRORS,
    )
    _install_error_handlers(app)
    app.include_router(query_router(service))

    def actor_of(header: str | None) -> str:
        return header or DEFAULT_ACTOR

    @app.get("/healthz", response_model=models.Health, tags=["health"])
    def healthz() -> dict[str, Any]:
        """The process is alive (touches no storage)."""
        return {"status": "ok"}

    @app.get("/readyz", response_model=models.Readiness, tags=["health"],
             responses={503: {"model": models.Readiness, "description": "Not ready for writes (reads still work)."}})
    def readyz() -> JSONResponse:
        """Ready for writes: 200 when the stamp is one this program writes and no claim is held, else 503."""
        document = service.readiness()
        return JSONResponse(document, status_code=200 if document["writable"] else 503)

    @app.get("/version", response_model=models.VersionInfo, tags=["health"])
    def version() -> dict[str, Any]:
        return {"program": profile.program, "version": __version__, "format": profile.init_stamp}

    @app.get("/branches", response_model=models.BranchList, tags=["branches"])
    def list_branches() -> dict[str, Any]:
        return {"branches": service.branches()}

    @app.post("/branches", response_model=models.BranchCreated, status_code=201, tags=["branches"])
    def create_branch(body: models.BranchCreate) -> dict[str, Any]:
        return service.create_branch(body.name, body.from_branch)

    @app.delete("/branches/{name}", response_model=models.BranchDeleted, tags=["branches"])
    def delete_branch(name: str) -> dict[str, Any]:
        service.delete_branch(name)
        return {"deleted": name}

    @app.get("/branches/{branch}/snapshot", response_model=models.Snapshot, tags=["reads"])
    def snapshot(branch: str) -> dict[str, Any]:
        return service.snapshot(branch)

    @app.get("/branches/{branch}/commits", response_model=models.CommitList, tags=["reads"])
    def commits(branch: str) -> dict[str, Any]:
        return {"branch": branch, "commits": service.commits(branch)}

    @app.get("/branches/{branch}/export", tags=["reads"], response_class=StreamingResponse,
             responses={200: {"content": {"application/x-ndjson": {}}, "description": "JSONL, sorted by table key then id."}})
    def export(branch: str, types: Annotated[list[str], Query(alias="type")] = []) -> StreamingResponse:  # noqa: B006
        """The branch as JSONL (the load format), streamed; ``type`` (repeatable) limits the types."""
        return StreamingResponse(service.export(branch, list(types)), media_type="application/x-ndjson")

    @app.post("/branches/{branch}/load", response_model=models.LoadResponse, tags=["writes"])
    async def load(
        branch: str,
        request: Request,
        mode: Annotated[Literal["append", "merge", "overwrite"], Query()],
        x_omnigraph_actor: Annotated[str | None, Header()] = None,
    ) -> dict[str, Any]:
        """Load a JSONL body as one commit: append = strict insert, merge = upsert, overwrite = replace."""
        data = await _read_body(request)
        return await run_in_threadpool(service.load, branch, mode, data, actor_of(x_omnigraph_actor))

    if profile.program == FENCED_PROFILE.program:  # the format-4 release had neither
        @app.post("/branches/{name}/merge", response_model=models.MergeResponse, tags=["branches"])
        def merge_branch(
            name: str, body: models.MergeRequest, x_omnigraph_actor: Annotated[str | None, Header()] = None,
        ) -> dict[str, Any]:
            """Three-way merge of branch ``name`` into ``into`` (up to date, fast-forward or a merge
            commit); any conflict is 409 ``merge_conflict`` with the full list, nothing written."""
            return service.merge(name, body.into, actor_of(x_omnigraph_actor))

        @app.post("/branches/{branch}/mutate", response_model=models.MutateResponse, tags=["writes"])
        def mutate(
            branch: str,
            body: models.MutateRequest,
            if_match: Annotated[str | None, Header()] = None,
            x_omnigraph_actor: Annotated[str | None, Header()] = None,
        ) -> dict[str, Any]:
            """Run one ``.gq`` query as one commit; ``If-Match: <commit id>`` refuses (412) unless the
            branch head is that commit (``--if-commit``)."""
            return service.mutate(branch, body.query, body.name, body.params, if_match, actor_of(x_omnigraph_actor))

    return app


async def _read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise ResourceLimit("body_bytes", MAX_BODY_BYTES, int(declared), f"request body of {declared} bytes exceeds {MAX_BODY_BYTES}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ResourceLimit("body_bytes", MAX_BODY_BYTES, size, f"request body exceeds {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(OmnigraphError)
    async def omnigraph_error(_: Request, error: OmnigraphError) -> JSONResponse:
        return _error_response(error)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
        problems = [
            {"loc": [str(part) for part in item.get("loc", ())], "msg": str(item.get("msg")), "type": str(item.get("type"))}
            for item in error.errors()
        ]
        summary = "; ".join(f"{'.'.join(p['loc'])}: {p['msg']}" for p in problems)
        return _error_response(BadRequest(f"invalid request: {summary}", {"errors": problems}))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        if error.status_code == 404:
            body = {"error": {"code": "not_found", "message": f"no endpoint {request.url.path}", "details": {}}}
        else:
            body = {"error": {"code": "bad_request", "message": str(error.detail), "details": {}}}
        return JSONResponse(body, status_code=error.status_code)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, error: Exception) -> JSONResponse:
        return _error_response(Internal(f"{type(error).__name__}: {error}"))


def app_from_env() -> FastAPI:
    """uvicorn factory: ``OMNIGRAPH_SERVE_GRAPH``, ``OMNIGRAPH_SERVE_PROGRAM``, ``OMNIGRAPH_SERVE_ADDRESS``."""
    program = os.environ.get("OMNIGRAPH_SERVE_PROGRAM", FENCED_PROFILE.program)
    return create_app(os.environ["OMNIGRAPH_SERVE_GRAPH"], PROFILES[program], os.environ.get("OMNIGRAPH_SERVE_ADDRESS"))
