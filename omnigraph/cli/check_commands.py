"""``omnigraph check GRAPH [--json]``: the read-only integrity check of a whole graph.

Exit 0 when the graph is clean. Otherwise exit 4 (``validation_failed``) with the full report: on
stdout one line per finding (``kind  branch  table  message``), or with ``--json`` the error
document whose ``details`` is the report (``graph``, ``stamp``, ``branches``, ``images_checked``,
``findings``, ``ok``). The id scan is the migrator's bounded-memory validator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

import omnigraph
from omnigraph.cli.support import echo_result, emit_json, json_option, reports_errors
from omnigraph.errors import ValidationFailed

if TYPE_CHECKING:
    from omnigraph import CheckReport


def _render(report: CheckReport) -> None:
    for finding in report.findings:
        echo_result(f"{finding.kind}\t{finding.branch or '-'}\t{finding.table_key or finding.table_path or '-'}\t{finding.message}")


@click.command("check")
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def check_command(uri: str, as_json: bool) -> None:
    """Check every branch of GRAPH: pins, heads, intents, stamp, ids and edge endpoints."""
    report = omnigraph.check(uri)
    summary = f"{len(report.branches)} branch(es), {report.images_checked} image(s), stamp {report.stamp}"
    if report.ok:
        if as_json:
            emit_json(report.to_json())
        else:
            echo_result(f"{report.graph}: clean ({summary})")
        return
    if not as_json:
        _render(report)
    raise ValidationFailed(f"{report.graph}: {len(report.findings)} integrity finding(s) ({summary})", report.to_json())
