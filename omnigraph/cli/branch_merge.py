"""``omnigraph branch merge SRC [--into B] [--json] GRAPH``, and the engine's ``branch`` group that holds it."""

from __future__ import annotations

import click

from omnigraph.cli.shared_commands import branch_group_for
from omnigraph.cli.support import echo_result, emit_json, json_option, open_for_command, reports_errors, say_recovered

MAIN = "main"


@click.command("merge")
@click.argument("source")
@click.option("--into", default=MAIN, show_default=True, help="The branch to merge into.")
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def branch_merge(source: str, into: str, uri: str, as_json: bool) -> None:
    """Merge branch SOURCE into --into: up to date, fast-forward, or one merge commit."""
    with open_for_command(uri) as opened:
        say_recovered(opened)
        result = opened.merge(source, into=into)
    if as_json:
        emit_json(result.to_dict())
        return
    if result.commit is None:
        echo_result(f"{into} is already up to date with {source}")
        return
    counts = result.changes
    inserted = sum(c["inserted"] for c in counts.values())
    updated = sum(c["updated"] for c in counts.values())
    deleted = sum(c["deleted"] for c in counts.values())
    kind = "fast-forwarded" if result.outcome == "fast_forward" else "merged"
    echo_result(
        f"{kind} {source} into {into}: commit {result.commit} "
        f"(parents {' '.join(result.parents)}); {inserted} inserted, {updated} updated, {deleted} deleted"
    )


def branch_group_with_merge(program: str) -> click.Group:
    """The shared ``branch`` group of ``program`` with ``merge`` added (the format-5 CLI's)."""
    group = branch_group_for(program)
    group.add_command(branch_merge)
    return group
