"""``omnigraph mutate --query F.gq [--name N] [--params JSON] [--branch B] [--if-commit ID] [--json] GRAPH``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from cli.support import actor_name, echo_result, emit_json, json_option, reports_errors, say
from engine.door import FENCED_PROFILE
from engine.graph import open_graph
from engine.manifest import MAIN
from engine.ops.mutate import mutate, select_query


def parse_params(raw: str | None) -> dict[str, Any]:
    """The ``--params`` JSON object (``{}`` when not given); anything else is a usage error."""
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as error:
        raise click.BadParameter(f"not valid JSON: {error}", param_hint="--params") from None
    if not isinstance(value, dict):
        raise click.BadParameter("must be a JSON object of parameter values", param_hint="--params")
    return value


@click.command("mutate")
@click.option("--query", "query_file", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The .gq file.")
@click.option("--name", default=None, help="The query to run (required when the file declares several).")
@click.option("--params", "params_json", default=None, help='Parameter values as a JSON object, e.g. \'{"name": "Ann"}\'.')
@click.option("--branch", default=MAIN, show_default=True)
@click.option("--if-commit", default=None, help="Refuse (precondition_failed) unless the branch head is this commit.")
@json_option
@click.argument("graph")
@reports_errors
def mutate_command(
    query_file: Path, name: str | None, params_json: str | None, branch: str, if_commit: str | None, graph: str, as_json: bool
) -> None:
    """Run one .gq mutation query on a branch as one graph commit."""
    try:
        source = query_file.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise click.BadParameter(f"{query_file} is not UTF-8 text: {error.reason}", param_hint="--query") from None
    params = parse_params(params_json)
    select_query(source, name)  # syntax, --name and the insert/delete mix: refused before any I/O
    opened = open_graph(graph, FENCED_PROFILE, write=True)
    for record in opened.recovered:
        say(f"recovered interrupted commit {record.operation_id} on {record.graph_branch}: {record.outcome}")
    result = mutate(opened, source, name=name, params=params, branch=branch, if_commit=if_commit, actor=actor_name())
    document = result.document()
    if as_json:
        emit_json(document)
        return
    for key in ("affected_nodes", "affected_edges", "distinct_nodes", "distinct_edges"):
        echo_result(f"{key}: {document[key]}")
    echo_result(f"commit: {document['commit'] or 'null'}")
