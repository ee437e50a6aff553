"""Everything a server process needs to know, in one validated document.

``omnigraph serve`` builds a :class:`ServeSettings` from its options and hands it to every
worker process through one environment variable (uvicorn starts workers with the app's import
path only); :func:`settings_from_env` reads it back, validated again.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

SETTINGS_ENV = "OMNIGRAPH_SERVE_SETTINGS"
MIB = 1024 * 1024
CONNECTION_HEADROOM = 32
"""Connections a worker keeps open beyond ``max_connections`` (probes, and the 503 answers of the others);
one more is closed as soon as it is accepted (:mod:`omnigraph.server.protocol`)."""
FILES_RESERVE = 256
"""File descriptors a worker keeps for its own files beyond its connections."""


class Limits(BaseModel):
    """What one request or connection may take. Sizes in bytes, times in seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    json_body_bytes: int = Field(default=1 * MIB, ge=1, description="Body of every endpoint but load.")
    load_body_bytes: int = Field(default=32 * MIB, ge=1, description="Body of POST .../load.")
    body_timeout: float = Field(default=60.0, gt=0, description="Time to receive a whole request body.")
    header_timeout: float = Field(default=10.0, gt=0, description="Time to receive a request's line and headers.")
    keep_alive: int = Field(default=5, ge=1, description="An idle keep-alive connection is closed after this.")
    max_connections: int = Field(
        default=2048, ge=1, description="Beyond this, requests but the open ones are answered 503 at once (the open ones up to 32 more)."
    )
    max_header_bytes: int = Field(default=16 * 1024, ge=1024, description="Request line and headers together.")


class ServeSettings(BaseModel):
    """One server: the graph, the program profile, who may call it, and its limits.

    ``tokens_file`` None means the server was started ``--unauthenticated``: every request then
    holds every grant. ``allowed_hosts`` are the host names a ``Host`` header may name (no port);
    ``allowed_origins`` are the origins (``scheme://host[:port]``) besides the server's own from
    which a browser may write, and which get CORS headers.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    graph: str
    program: str
    address: str | None = None
    tokens_file: str | None
    allowed_hosts: list[str] = Field(min_length=1)
    allowed_origins: list[str] = Field(default_factory=list)
    docs: bool = True
    limits: Limits = Field(default_factory=Limits)

    def to_env(self) -> dict[str, str]:
        """The environment that hands these settings to a worker process (see :func:`settings_from_env`)."""
        return {SETTINGS_ENV: self.model_dump_json()}


def settings_from_env() -> ServeSettings:
    """The settings ``omnigraph serve`` put in the environment of this worker process."""
    raw = os.environ.get(SETTINGS_ENV)
    if raw is None:
        raise RuntimeError(f"{SETTINGS_ENV} is not set: start the server with `omnigraph serve`")
    return ServeSettings.model_validate_json(raw)
