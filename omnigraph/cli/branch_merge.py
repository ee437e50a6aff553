"""``omnigraph branch merge SRC [--into B] [--json] GRAPH``, and the engine's ``branch`` group that holds it.

A refused merge (``merge_conflict``) lists its rows in text mode too: one line per conflicting id
or invalid row, sorted by table, id and kind, the first :data:`LISTED_ROWS` of them and a count
of the rest (``--json`` carries every one in ``details.conflicts``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from omnigraph.cli.shared_commands import branch_group_for
from omnigraph.cli.support import echo_result, emit_json, json_option, open_for_command, reports_errors, say_recovered
from omnigraph.errors import MergeConflict

MAIN = "main"
LISTED_ROWS = 20


def conflict_lines(conflicts: Sequence[Mapping[str, Any]]) -> list[str]:
    """The text listing of a ``merge_conflict``'s rows: sorted, capped at :data:`LISTED_ROWS`, with the count of the rest."""
    rows = sorted(conflicts, key=lambda c: (str(c.get("table_key")), str(c.get("id")), str(c.get("kind"))))
    lines = []
    for row in rows[:LISTED_ROWS]:
        fix = f": {row['fix']}" if row.get("fix") else ""
        lines.append(f"  {row.get('table_key')} {row.get('id')} ({row.get('kind')}){fix}")
    if len(rows) > LISTED_ROWS:
        lines.append(f"  ... and {len(rows) - LISTED_ROWS} more (`--json` lists every one)")
    return lines


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
        try:
            result = opened.merge(source, into=into)
        except MergeConflict as refused:
            if as_json:
                raise
            listing = "\n".join(conflict_lines(refused.details.get("conflicts", [])))
            raise MergeConflict(f"{refused.message}\n{listing}", refused.details) from None
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
