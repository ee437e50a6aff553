"""``omnigraph``: the format-5 (fenced) engine CLI.

Every subcommand but ``commit`` and ``version`` lives in its own module, imported only when it
is invoked (:class:`omnigraph.cli.lazy.LazyGroup`): ``omnigraph --help`` and ``omnigraph version`` load
none of Lance, Arrow, DuckDB or FastAPI (``tests/guards/test_startup_imports.py``).
"""

from __future__ import annotations

import datetime as dt
from typing import NoReturn

import click

import omnigraph
from omnigraph.cli.console import run_script
from omnigraph.cli.lazy import LazyCommand, LazyGroup
from omnigraph.cli.shared_commands import shared_lazy_commands
from omnigraph.cli.support import echo_result, emit_json, json_option, open_for_command, reports_errors

MAIN = "main"

COMMANDS = {
    **shared_lazy_commands(omnigraph.ENGINE),
    "blob": LazyCommand("omnigraph.cli.blob_commands:blob_group", "Stream the bytes of one Blob property cell (`blob get`)."),
    "branch": LazyCommand(
        "omnigraph.cli.branch_merge:branch_group_with_merge", "Create, list and delete graph branches.", (omnigraph.ENGINE,)
    ),
    "check": LazyCommand(
        "omnigraph.cli.check_commands:check_command", "Check every branch of GRAPH: pins, heads, intents, stamp, ids and edge endpoints."
    ),
    "drift": LazyCommand(
        "omnigraph.cli.maintenance_commands:drift_group", "Table commits made outside the engine: show, adopt or revert them."
    ),
    "lint": LazyCommand(
        "omnigraph.cli.lint_commands:lint_command", "Type-check every query of a .gq file against a .pg schema file; no graph is read."
    ),
    "mutate": LazyCommand(
        "omnigraph.cli.mutate:mutate_command", "Run one .gq mutation query on a branch as one graph commit (or, chunked, as one per chunk)."
    ),
    "optimize": LazyCommand(
        "omnigraph.cli.maintenance_commands:optimize_command",
        "Compact, index and clean up old versions; compaction and indexes are published as a graph commit.",
    ),
    "query": LazyCommand(
        "omnigraph.cli.query:query_command", "Run one .gq read query on a branch (or one of its commits) and print the answer."
    ),
    "recover": LazyCommand(
        "omnigraph.cli.maintenance_commands:recover_command",
        "Open the graph read-write: resolve interrupted commits of dead writers, adopt out-of-band commits that change "
        "no row, then report any drift left (exit 5, naming `omnigraph drift`).",
    ),
    "schema": LazyCommand("omnigraph.cli.schema_commands:schema_group", "The graph's schema."),
    "token": LazyCommand("omnigraph.cli.token_commands:token_group", "Bearer tokens for `omnigraph serve`."),
}
"""The lazy subcommands: where each is built and the one-line help ``omnigraph --help`` lists."""


@click.group(cls=LazyGroup, lazy_commands=COMMANDS)
def cli() -> None:
    """omnigraph: the fenced graph engine (format 5)."""


@cli.group("commit")
def commit_group() -> None:
    """Graph commit history."""


@commit_group.command("list")
@click.option("--branch", default=MAIN, show_default=True)
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def commit_list(branch: str, uri: str, as_json: bool) -> None:
    """List the commits reachable from a branch head, newest first."""
    with open_for_command(uri, read_only=True) as opened:
        documents = [commit.to_dict() for commit in opened.commits(branch)]
    if as_json:
        emit_json({"branch": branch, "commits": documents})
        return
    for doc in documents:
        when = dt.datetime.fromtimestamp(doc["committed_at"] / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        merged = f"  (parents {' '.join(doc['parents'])})" if len(doc["parents"]) > 1 else ""
        echo_result(f"{doc['commit_id']}  {when}Z  {doc['actor']}  {doc['message']}{merged}")


@cli.command("version")
@json_option
def version_command(as_json: bool) -> None:
    """Print the tool version and the format it writes."""
    if as_json:
        emit_json({"version": omnigraph.__version__, "format": omnigraph.WRITES_FORMAT})
        return
    echo_result(f"omnigraph {omnigraph.__version__} (writes format {omnigraph.WRITES_FORMAT})")


def main() -> NoReturn:
    """The ``omnigraph`` console script: :func:`omnigraph.cli.console.run_script` of :data:`cli`."""
    run_script(cli)
