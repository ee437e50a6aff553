"""``serve``: run the HTTP server (:mod:`omnigraph.server.app`) on one graph, for a program profile.

Starting rules (``docs/serving.md``, "Securing a server"): a tokens file (``--tokens`` or
``OMNIGRAPH_TOKENS_FILE``) is required, or ``--unauthenticated`` (``OMNIGRAPH_UNAUTHENTICATED=1``)
as an explicit choice, which is refused on an address other than loopback unless
``--allow-remote-unauthenticated`` is given too. Each choice that leaves the server open prints
a warning line on stderr, as does plain HTTP on a non-loopback address.
"""

from __future__ import annotations

import ipaddress
import os
import resource
import shutil
import signal
import tempfile

import click

from omnigraph.cli.support import open_for_command, reports_errors, say
from omnigraph.server.settings import CONNECTION_HEADROOM, FILES_RESERVE, Limits, ServeSettings
from omnigraph.server.tokens import read_tokens_file

METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
_DEFAULTS = Limits()


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` listens on loopback only (``localhost`` or a loopback address)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _check_authentication(host: str, tokens: str | None, unauthenticated: bool, allow_remote: bool) -> None:
    """Refuse (usage error) a start that would leave the server open by accident.

    Every open or plain-HTTP choice that was made on purpose is warned about on stderr.
    """
    if tokens is not None and unauthenticated:
        raise click.UsageError("--tokens and --unauthenticated exclude each other: choose one")
    if tokens is None and not unauthenticated:
        raise click.UsageError(
            "serve needs a tokens file: --tokens FILE (or OMNIGRAPH_TOKENS_FILE), with entries printed by "
            "`omnigraph token create --actor NAME --grant read`; or --unauthenticated to serve without "
            "authentication on a loopback address"
        )
    if unauthenticated and not is_loopback(host):
        if not allow_remote:
            raise click.UsageError(
                f"--unauthenticated on {host}, which is not a loopback address, would let anyone who can reach it "
                "read and write the graph: use --tokens FILE, bind --host 127.0.0.1, or add --allow-remote-unauthenticated"
            )
        say(
            f"warning: serving WITHOUT authentication on {host}: anyone who can reach this address may read, write and "
            "delete the graph (--allow-remote-unauthenticated)"
        )
    elif unauthenticated:
        say("warning: serving without authentication (--unauthenticated): every local process and user may read and write the graph")
    if tokens is not None and not is_loopback(host):
        say(
            f"warning: plain HTTP on {host}: bearer tokens cross the network in clear; terminate TLS in a reverse "
            "proxy in front of this server (docs/serving.md)"
        )


def connection_budget(requested: int, soft: int, hard: int) -> tuple[int, int]:
    """``(open-files soft limit, max connections)`` for ``requested`` connections under ``soft``/``hard`` limits.

    A worker needs a descriptor per connection, up to the cap plus its headroom, and its own files
    besides: the soft limit is raised up to the hard one if need be, and when even that is short
    the connection cap is lowered to fit (an ``accept()`` that runs out of descriptors stalls every
    client, probes included). ``RLIM_INFINITY`` (-1) is no limit.
    """
    needed = requested + CONNECTION_HEADROOM + FILES_RESERVE
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft, requested
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    return target, max(1, min(requested, target - CONNECTION_HEADROOM - FILES_RESERVE))


def _fit_open_files_limit(requested: int) -> int:
    """Raise the open-files limit for ``requested`` connections; the connection cap that fits (with a warning when lowered)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target, connections = connection_budget(requested, soft, hard)
    if target != soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if connections < requested:
        say(
            f"warning: the open-files limit ({hard}) leaves room for {connections} connections, not --max-connections "
            f"{requested} (each worker also keeps {CONNECTION_HEADROOM} for probes and {FILES_RESERVE} for its files): "
            f"serving at most {connections}; raise the hard limit (ulimit -Hn) to serve more"
        )
    return connections


def serve_command_for(program: str) -> click.Command:
    """``serve GRAPH`` and its options for ``program`` (an :mod:`omnigraph` program profile)."""

    @click.command("serve")
    @click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
    @click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
    @click.option(
        "--workers",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Server processes (each registers in the fleet and writes through the fenced protocol).",
    )
    @click.option(
        "--tokens",
        "tokens",
        type=click.Path(dir_okay=False),
        envvar="OMNIGRAPH_TOKENS_FILE",
        help="Tokens file (YAML or JSON): who may call the server, with which grants.",
    )
    @click.option(
        "--unauthenticated",
        is_flag=True,
        envvar="OMNIGRAPH_UNAUTHENTICATED",
        help="Serve without tokens: every caller holds every grant (loopback only).",
    )
    @click.option("--allow-remote-unauthenticated", is_flag=True, help="Allow --unauthenticated on an address other than loopback.")
    @click.option(
        "--allowed-host",
        "allowed_hosts",
        multiple=True,
        metavar="NAME",
        help="A host name the Host header may name, besides the bind address and localhost (repeatable).",
    )
    @click.option(
        "--allowed-origin",
        "allowed_origins",
        multiple=True,
        metavar="ORIGIN",
        help="An origin (scheme://host[:port]) browsers may write from, sent CORS headers (repeatable).",
    )
    @click.option(
        "--max-json-bytes",
        type=click.IntRange(min=1),
        default=_DEFAULTS.json_body_bytes,
        show_default=True,
        help="Body limit of every endpoint but load.",
    )
    @click.option(
        "--max-load-bytes", type=click.IntRange(min=1), default=_DEFAULTS.load_body_bytes, show_default=True, help="Body limit of load."
    )
    @click.option(
        "--body-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=_DEFAULTS.body_timeout,
        show_default=True,
        help="Seconds to receive a whole request body (else 408).",
    )
    @click.option(
        "--header-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=_DEFAULTS.header_timeout,
        show_default=True,
        help="Seconds to receive a request's line and headers (else the connection is closed).",
    )
    @click.option(
        "--keep-alive",
        type=click.IntRange(min=1),
        default=_DEFAULTS.keep_alive,
        show_default=True,
        help="Seconds an idle keep-alive connection stays open.",
    )
    @click.option(
        "--max-connections",
        type=click.IntRange(min=1),
        default=_DEFAULTS.max_connections,
        show_default=True,
        help="Connections served per worker; beyond them requests are answered 503 at once, but /healthz and /readyz.",
    )
    @click.option("--docs/--no-docs", default=True, show_default=True, help="Serve /docs and /openapi.json.")
    @click.argument("uri", metavar="GRAPH")
    @reports_errors
    def serve_command(
        host: str,
        port: int,
        workers: int,
        tokens: str | None,
        unauthenticated: bool,
        allow_remote_unauthenticated: bool,
        allowed_hosts: tuple[str, ...],
        allowed_origins: tuple[str, ...],
        max_json_bytes: int,
        max_load_bytes: int,
        body_timeout: float,
        header_timeout: float,
        keep_alive: int,
        max_connections: int,
        docs: bool,
        uri: str,
    ) -> None:
        """Serve GRAPH over HTTP until interrupted (OpenAPI at /docs)."""
        import uvicorn  # imported here: the other commands do not pay for it

        _check_authentication(host, tokens, unauthenticated, allow_remote_unauthenticated)
        if tokens is not None:
            read_tokens_file(tokens)  # refuse a bad file now, not in each worker
        with open_for_command(uri, read_only=True, program=program) as opened:  # refuse a missing or unknown-format graph now
            uri, stamp = opened.uri, opened.format
        address = f"http://{host}:{port}"
        max_connections = _fit_open_files_limit(max_connections)
        limits = Limits(
            json_body_bytes=max_json_bytes,
            load_body_bytes=max_load_bytes,
            body_timeout=body_timeout,
            header_timeout=header_timeout,
            keep_alive=keep_alive,
            max_connections=max_connections,
        )
        settings = ServeSettings(
            graph=uri,
            program=program,
            address=address,
            tokens_file=None if tokens is None else os.path.abspath(tokens),
            allowed_hosts=sorted({host.strip("[]").lower(), "localhost", *(h.lower() for h in allowed_hosts)}),
            allowed_origins=list(allowed_origins),
            docs=docs,
            limits=limits,
        )
        os.environ.update(settings.to_env())
        own_metrics_dir = METRICS_DIR_ENV not in os.environ
        if own_metrics_dir:
            os.environ[METRICS_DIR_ENV] = tempfile.mkdtemp(prefix="omnigraph-metrics-")
        say(f"{program} serving {uri} (format {stamp}) on {address} with {workers} worker(s)")
        # uvicorn re-raises a SIGTERM it handled once it has shut down gracefully, which would end
        # this process with -15; a handler that does nothing makes that a clean exit 0.
        previous = signal.signal(signal.SIGTERM, lambda *_: None)
        try:
            uvicorn.run(
                "omnigraph.server.app:app_from_env",
                factory=True,
                host=host,
                port=port,
                workers=workers,
                http="omnigraph.server.protocol:HeadDeadlineProtocol",
                log_level="warning",
                access_log=False,
                proxy_headers=False,
                server_header=False,
                ws="none",
                timeout_graceful_shutdown=10,
                timeout_keep_alive=keep_alive,  # the connection cap is the gate's and the protocol's (limits)
                h11_max_incomplete_event_size=limits.max_header_bytes,
            )
        finally:
            signal.signal(signal.SIGTERM, previous)
            if own_metrics_dir:
                shutil.rmtree(os.environ.pop(METRICS_DIR_ENV), ignore_errors=True)

    return serve_command
