"""``omnigraph-migrate rebuild GRAPH --to NEW_GRAPH``: export, init at format 5, load, per branch."""

from __future__ import annotations

import click

from omnigraph import migrate
from omnigraph.cli.support import actor_name, echo_result, emit_json, json_option, reports_errors, say


@click.command("rebuild")
@click.argument("uri", metavar="GRAPH")
@click.option("--to", "destination", required=True, help="The new, empty location of the format-5 graph.")
@json_option
@reports_errors
def rebuild_command(uri: str, destination: str, as_json: bool) -> None:
    """Copy GRAPH's current data into a NEW format-5 graph by export and load, every branch.

    GRAPH is only read; stop its writers first. The new graph has the same branches and rows but
    none of GRAPH's history: see "rebuild" in docs/operations.md for what is not carried over.
    """
    outcome = migrate.rebuild(uri, destination, actor=actor_name(), report=None if as_json else say)
    if as_json:
        emit_json(outcome.to_dict())
        return
    for branch in outcome.branches:
        echo_result(f"{branch['name']}\t{sum(branch['rows'].values())} rows\t(from {branch['parent'] or '-'})")
    echo_result(f"rebuilt {uri} as {destination} at format 5 ({len(outcome.branches)} branch(es))")
