"""HTTP serving (FastAPI + uvicorn) over the engine: endpoints, readiness, fleet registration.

Every route declares the grant it needs (:mod:`omnigraph.server.access`: ``requires(Grant.X)`` or
``public()``) and is a :class:`omnigraph.server.gate.GuardedRoute`, whose gate checks the caller before the
handler runs; a router added later does the same (``APIRouter(route_class=GuardedRoute)``), or
the app refuses to start.
"""
