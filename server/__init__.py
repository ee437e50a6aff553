"""HTTP serving over the engine (FastAPI + uvicorn): endpoints, readiness, fleet registration."""
