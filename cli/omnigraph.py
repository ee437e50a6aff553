"""``omnigraph``: the format-5 (fenced) engine CLI."""

from __future__ import annotations

import datetime as dt

import click

import omnigraph
from cli.branch_merge import branch_merge
from cli.check_commands import add_check_command
from cli.maintenance_commands import add_maintenance_commands
from cli.mutate import mutate_command
from cli.query import query_command
from cli.schema_commands import schema_group
from cli.serve_commands import add_serve_command
from cli.shared_commands import add_shared_commands
from cli.support import echo_result, emit_json, json_option, open_graph, reports_errors
from cli.token_commands import token_group

MAIN = "main"


@click.group()
def cli() -> None:
    """omnigraph: the fenced graph engine (format 5)."""


add_shared_commands(cli, omnigraph.ENGINE)
cli.commands["branch"].add_command(branch_merge)  # type: ignore[attr-defined]
cli.add_command(mutate_command)
cli.add_command(query_command)
add_serve_command(cli, omnigraph.ENGINE)
add_check_command(cli)
add_maintenance_commands(cli)
cli.add_command(token_group)
cli.add_command(schema_group)


@cli.group("commit")
def commit_group() -> None:
    """Graph commit history."""


@commit_group.command("list")
@click.option("--branch", default=MAIN, show_default=True)
@json_option
@click.argument("graph")
@reports_errors
def commit_list(branch: str, graph: str, as_json: bool) -> None:
    """List the commits reachable from a branch head, newest first."""
    with open_graph(graph, read_only=True) as opened:
        documents = [commit.to_dict() for commit in opened.commits(branch)]
    if as_json:
        emit_json({"branch": branch, "commits": documents})
        return
    for doc in documents:
        when = dt.datetime.fromtimestamp(doc["committed_at"] / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
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


def main() -> None:
    cli()
