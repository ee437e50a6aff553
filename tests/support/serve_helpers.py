"""Running real ``omnigraph serve`` / ``omnigraph-v4 serve`` processes on loopback for tests.

A server is started either with a tokens file (``tokens=``; the client then sends ``token``) or,
explicitly, ``--unauthenticated``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from omnigraph.engine.access.fleet import list_records
from omnigraph.engine.storage.store import open_store
from omnigraph.server.grants import Grant
from omnigraph.server.scopes import BranchScope
from omnigraph.server.tokens import TokenEntry, new_token
from tests.support.graph_helpers import ACTOR, OMNIGRAPH, jsonl

STARTUP_SECONDS = 60.0
NDJSON = {"content-type": "application/x-ndjson"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """A running server process and an httpx client bound to it."""

    program: Path
    graph: str
    process: subprocess.Popen[bytes]
    base_url: str
    log: Any
    token: str | None = None
    client: httpx.Client = field(init=False)
    _final: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.client = self.new_client(self.token)

    def new_client(self, token: str | None, **headers: str) -> httpx.Client:
        """A client of this server sending ``token`` (if any) and ``headers`` with every request."""
        sent = dict(headers)
        if token is not None:
            sent["authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.base_url, timeout=120.0, headers=sent)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop the process with ``sig`` and wait for it; its exit status (its output stays readable)."""
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=30)
        finally:
            self._final = self.output()
            self.log.close()

    def output(self) -> str:
        """Everything the process printed so far (stdout and stderr)."""
        if self.log.closed:
            return self._final
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def load(self, lines: list[str], mode: str = "append", branch: str = "main") -> httpx.Response:
        return self.client.post(f"/branches/{branch}/load", params={"mode": mode}, content=jsonl(lines), headers=NDJSON)


@dataclass(frozen=True)
class Tokens:
    """A tokens file written for a test, and the tokens it admits by actor."""

    path: Path
    by_actor: dict[str, str]


def write_tokens(
    directory: Path,
    grants_by_actor: dict[str, list[Grant]],
    scopes: dict[str, BranchScope] | None = None,
    protected_branches: list[str] | None = None,
) -> Tokens:
    """A tokens file (YAML) in ``directory`` with one fresh token per actor (its ``branch_scope`` from
    ``scopes``, else any), and ``protected_branches`` when given."""
    entries: list[TokenEntry] = []
    by_actor: dict[str, str] = {}
    for actor, grants in grants_by_actor.items():
        token, entry = new_token(actor, grants, (scopes or {}).get(actor, "any"))
        entries.append(entry)
        by_actor[actor] = token
    document: dict[str, Any] = {"tokens": [entry.model_dump(mode="json", exclude_defaults=True) for entry in entries]}
    if protected_branches is not None:
        document["protected_branches"] = protected_branches
    path = directory / "tokens.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return Tokens(path, by_actor)


def _registered(graph: str, address: str) -> int:
    return sum(1 for record in list_records(open_store(graph)) if record.address == address)


def start_server(
    program: Path,
    graph: str,
    *extra: str,
    workers: int = 1,
    tokens: Path | None = None,
    token: str | None = None,
    env: dict[str, str] | None = None,
) -> Server:
    """Start ``program serve graph`` on a free loopback port, with the tokens file ``tokens`` (the
    client sending ``token``) or else ``--unauthenticated``, and ``env`` on top of this process's
    environment (no failpoint unless ``env`` arms one); wait until ``/healthz`` answers and every
    worker process has registered in the fleet."""
    auth = ["--tokens", str(tokens)] if tokens is not None else ["--unauthenticated"]
    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - the server writes its log there for its whole life; closed when it stops
    environment = {key: value for key, value in os.environ.items() if key != "OMNIGRAPH_FAILPOINTS"}
    environment["OMNIGRAPH_ACTOR"] = ACTOR
    environment.update(env or {})
    process = subprocess.Popen(
        [str(program), "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers), *auth, *extra, graph],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=environment,
    )
    server = Server(program, graph, process, f"http://127.0.0.1:{port}", log, token)
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{program.name} serve exited with {process.returncode}:\n{server.output()}")
        try:
            if server.client.get("/healthz", timeout=1.0).status_code == 200 and _registered(graph, server.base_url) == workers:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    server.stop(signal.SIGKILL)
    raise AssertionError(f"{program.name} serve did not answer /healthz within {STARTUP_SECONDS}s")


def start_fenced(
    graph: str, *extra: str, workers: int = 1, tokens: Path | None = None, token: str | None = None, env: dict[str, str] | None = None
) -> Server:
    return start_server(OMNIGRAPH, graph, *extra, workers=workers, tokens=tokens, token=token, env=env)


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Assert ``response`` is the error ``code`` with HTTP ``status``; its ``error`` object."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == code, body
    return dict(body["error"])


def stored_state(uri: str) -> dict[str, str]:
    """Every object under the graph root with its digest, except the fleet registry (which running
    servers rewrite on their own): equal before and after a request proves it wrote nothing."""
    from tests.support.check_helpers import tree_digest

    return {path: digest for path, digest in tree_digest(uri).items() if not path.startswith("__fleet/")}
