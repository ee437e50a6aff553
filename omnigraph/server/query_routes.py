"""The read query routes: ``POST /branches/{branch}/query`` and ``POST /branches/{branch}/explain``.

``/query`` answers one ``.gq`` read query with the output document; ``/explain`` takes the same
body and answers how it would run, running nothing.

Body ``{query, name, params, at}`` (``at``: a commit of the branch to read, else its head).
Reads are served at every stamp the program reads; the query is parsed and checked before any
graph data is read. Errors as everywhere in the API: 400 ``bad_request`` (syntax, type,
parameter, a mutation sent here), 404 ``not_found`` (branch or commit), 408 ``timeout`` (the
query's time limit), 413 ``resource_limit`` (the query's memory, spill disk, or answer size). A
query whose client goes away is stopped (:mod:`omnigraph.server.cancellation`). Both routes need
the ``read`` grant (:data:`GRANT`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

import omnigraph
from omnigraph.results import QueryPlan, QueryResult
from omnigraph.server.access import requires
from omnigraph.server.gate import GuardedRoute
from omnigraph.server.grants import Grant
from omnigraph.server.query_pool import QueryPool
from omnigraph.server.service import GraphService

GRANT = Grant.READ


class QueryRequest(BaseModel):  # noqa: D101 - a docstring would become its OpenAPI description
    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="The .gq source.")
    name: str | None = Field(default=None, description="Which query of the source to run.")
    params: dict[str, Any] = Field(default_factory=dict)
    at: str | None = Field(default=None, description="Read the branch as of this commit (time travel).")


def query_router(service: GraphService, pool: QueryPool) -> APIRouter:
    """The query routes of ``service``'s graph, its queries run on ``pool``; none for the format-4 writer's emulation.

    The release it emulates had no read queries.
    """
    router = APIRouter(route_class=GuardedRoute)
    if service.program != omnigraph.ENGINE:
        return router

    @router.post("/branches/{branch}/query", response_model=QueryResult, tags=["reads"], dependencies=[requires(GRANT)])
    async def query(branch: str, body: QueryRequest, request: Request) -> JSONResponse:
        """Run one read query on ``branch`` (or its commit ``at``); stopped past its time limit, or when the client goes away."""
        return await pool.answer_unless_gone(
            request, lambda cancel: service.query(branch, body.query, body.name, body.params, body.at, cancel)
        )

    @router.post("/branches/{branch}/explain", response_model=QueryPlan, tags=["reads"], dependencies=[requires(GRANT)])
    def explain(branch: str, body: QueryRequest) -> dict[str, Any]:
        """How the read query would run on ``branch`` (or its commit ``at``): tables, indexes, traversal modes; nothing is run."""
        return service.explain(branch, body.query, body.name, body.params, body.at)

    return router
