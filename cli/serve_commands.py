"""``serve``: run the HTTP server (:mod:`server.app`) on one graph, for a program profile."""

from __future__ import annotations

import os

import click

from cli.support import reports_errors, say
from engine.door import EngineProfile
from engine.graph import open_graph


def add_serve_command(group: click.Group, profile: EngineProfile) -> None:
    """Attach ``serve GRAPH [--host] [--port] [--workers]`` for ``profile`` to ``group``."""

    @group.command("serve")
    @click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
    @click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
    @click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
                  help="Server processes (each registers in the fleet and writes through the fenced protocol).")
    @click.argument("graph")
    @reports_errors
    def serve_command(host: str, port: int, workers: int, graph: str) -> None:
        """Serve GRAPH over HTTP until interrupted (OpenAPI at /docs)."""
        import uvicorn  # imported here: the other commands do not pay for it

        opened = open_graph(graph, profile, write=False)  # refuse a missing or unknown-format graph now
        address = f"http://{host}:{port}"
        os.environ["OMNIGRAPH_SERVE_GRAPH"] = opened.store.uri
        os.environ["OMNIGRAPH_SERVE_PROGRAM"] = profile.program
        os.environ["OMNIGRAPH_SERVE_ADDRESS"] = address
        say(f"{profile.program} serving {opened.store.uri} (format {opened.stamp}) on {address} with {workers} worker(s)")
        uvicorn.run("server.app:app_from_env", factory=True, host=host, port=port, workers=workers,
                    log_level="warning", timeout_graceful_shutdown=10)
