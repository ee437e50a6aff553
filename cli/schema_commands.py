"""``omnigraph schema show [--json] GRAPH``: the accepted schema and its catalog, read-only.

The document and the rendering are :mod:`engine.ops.schema_document`'s.
"""

from __future__ import annotations

import click

from cli.support import echo_result, emit_json, json_option, reports_errors
from engine.door import FENCED_PROFILE
from engine.graph import open_graph
from engine.ops.schema_document import render_schema, schema_document


@click.group("schema")
def schema_group() -> None:
    """The graph's schema."""


@schema_group.command("show")
@json_option
@click.argument("graph")
@reports_errors
def schema_show(graph: str, as_json: bool) -> None:
    """Print the accepted schema of GRAPH and the catalog derived from it, metadata included."""
    opened = open_graph(graph, FENCED_PROFILE, write=False)
    if as_json:
        emit_json(schema_document(opened))
        return
    for line in render_schema(opened):
        echo_result(line)
