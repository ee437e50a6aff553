"""``omnigraph schema show [--json] GRAPH``: the accepted schema and its catalog, read-only.

The document and the rendering are :meth:`omnigraph.Graph.schema` and :meth:`omnigraph.Graph.schema_text`.
"""

from __future__ import annotations

import click

from omnigraph.cli.support import echo_result, emit_json, json_option, open_for_command, reports_errors


@click.group("schema")
def schema_group() -> None:
    """The graph's schema."""


@schema_group.command("show")
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def schema_show(uri: str, as_json: bool) -> None:
    """Print the accepted schema of GRAPH and the catalog derived from it, metadata included."""
    with open_for_command(uri, read_only=True) as opened:
        if as_json:
            emit_json(opened.schema())
            return
        for line in opened.schema_text():
            echo_result(line)
