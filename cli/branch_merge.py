"""``omnigraph branch merge SRC [--into B] [--json] GRAPH``."""

from __future__ import annotations

import click

from cli.support import actor_name, echo_result, emit_json, json_option, reports_errors, say
from engine.door import FENCED_PROFILE
from engine.graph import open_graph
from engine.manifest import MAIN
from engine.ops import merge_branch


@click.command("merge")
@click.argument("source")
@click.option("--into", default=MAIN, show_default=True, help="The branch to merge into.")
@json_option
@click.argument("graph")
@reports_errors
def branch_merge(source: str, into: str, graph: str, as_json: bool) -> None:
    """Merge branch SOURCE into --into: up to date, fast-forward, or one merge commit."""
    opened = open_graph(graph, FENCED_PROFILE, write=True)
    for record in opened.recovered:
        say(f"recovered interrupted commit {record.operation_id} on {record.graph_branch}: {record.outcome}")
    result = merge_branch(opened, source, into, actor=actor_name())
    if as_json:
        emit_json(result.document())
        return
    if result.commit is None:
        echo_result(f"{into} is already up to date with {source}")
        return
    counts = result.document()["changes"]
    inserted = sum(c["inserted"] for c in counts.values())
    updated = sum(c["updated"] for c in counts.values())
    deleted = sum(c["deleted"] for c in counts.values())
    kind = "fast-forwarded" if result.outcome == "fast_forward" else "merged"
    echo_result(
        f"{kind} {source} into {into}: commit {result.commit.commit_id} "
        f"(parents {' '.join(result.commit.parents)}); {inserted} inserted, {updated} updated, {deleted} deleted"
    )
