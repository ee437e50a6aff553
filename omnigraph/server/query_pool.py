"""Where a server's read queries run: a pool of their own, and a query stopped when its client goes away.

Queries run on :class:`QueryPool`'s threads (:data:`QUERY_THREADS_PER_CPU` per CPU), not on
the worker threads of the other routes: a flood of long queries waits for a query thread and
cannot take the threads that writes and snapshots need, nor so much CPU that the event loop
(and the probes it answers, ``/healthz`` and ``/readyz``) is starved. The answer's JSON is
rendered on the query thread too, so a large answer never blocks the event loop.

While a query runs (or waits for a thread), :meth:`QueryPool.answer_unless_gone` waits on the
event loop for the connection's ``http.disconnect``. When the client disconnects before the
answer is ready, it fires the query's :class:`omnigraph.QueryCancel`: DuckDB is interrupted and
the query ends within a fraction of a second with ``cancelled`` (logged; nobody receives it),
freeing its thread instead of running to its time limit for nobody; a query still waiting for a
thread ends as soon as it gets one, before it reads anything.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

import omnigraph
from omnigraph.errors import QueryCancelled

QUERY_THREADS_PER_CPU = 4


async def _disconnected(request: Request) -> None:
    """Return once the client has gone (its body was read already: nothing else arrives before)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class QueryPool:
    """The threads one server process runs read queries on (module docstring); :meth:`shutdown` at exit."""

    def __init__(self) -> None:
        threads = QUERY_THREADS_PER_CPU * (os.cpu_count() or 1)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="omnigraph-query")

    async def answer_unless_gone(self, request: Request, query: Callable[[omnigraph.QueryCancel], dict[str, Any]]) -> JSONResponse:
        """``query(cancel)``'s document as the response, run on a query thread; cancelled if the client goes away first."""
        cancel = omnigraph.QueryCancel()

        def run() -> JSONResponse:
            if cancel.cancelled:  # the client went away while the query waited for a thread
                raise QueryCancelled("the query was cancelled (its client went away) before it started")
            return JSONResponse(query(cancel))

        answer = asyncio.get_running_loop().run_in_executor(self._executor, run)
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            either: list[asyncio.Future[Any]] = [answer, gone]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not answer.done():
                cancel.cancel()
            return await answer
        finally:
            gone.cancel()

    def shutdown(self) -> None:
        """Stop taking queries (the process is exiting); the running ones end on their own."""
        self._executor.shutdown(wait=False)
