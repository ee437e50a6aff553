"""``omnigraph mutate --query F.gq [--name N] [--params JSON] [--branch B] [--if-commit ID] [--json] GRAPH``.

For an update or delete that matches more rows than one commit carries: ``--chunk-rows N`` (one
atomic commit per chunk, :meth:`omnigraph.Graph.mutate_chunked`) and ``--resume OPERATION``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import click

import omnigraph
from omnigraph.cli.shared_commands import read_text_file
from omnigraph.cli.support import echo_result, emit_json, json_option, open_for_command, reports_errors, say, say_recovered

MAIN = "main"


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


def _source(query_file: Path | None) -> str | None:
    if query_file is None:
        return None
    return read_text_file(str(query_file), "query file")


@click.command("mutate")
@click.option(
    "--query",
    "query_file",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The .gq file (required unless --resume).",
)
@click.option("--name", default=None, help="The query to run (required when the file declares several).")
@click.option("--params", "params_json", default=None, help='Parameter values as a JSON object, e.g. \'{"name": "Ann"}\'.')
@click.option("--branch", default=MAIN, show_default=True)
@click.option("--if-commit", default=None, help="Refuse (precondition_failed) unless the branch head is this commit.")
@click.option(
    "--chunk-rows",
    type=click.IntRange(min=1, max=8192),
    default=None,
    help="Update/delete only: one commit per chunk of at most N matched rows (not atomic as a whole).",
)
@click.option(
    "--resume", "resume", default=None, metavar="OPERATION", help="Continue the chunked mutation OPERATION from its last committed chunk."
)
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def mutate_command(
    query_file: Path | None,
    name: str | None,
    params_json: str | None,
    branch: str,
    if_commit: str | None,
    chunk_rows: int | None,
    resume: str | None,
    uri: str,
    as_json: bool,
) -> None:
    """Run one .gq mutation query on a branch as one graph commit (or, chunked, as one per chunk)."""
    params = parse_params(params_json)  # the command line first (exit 2), then the file it names (exit 1)
    if resume is not None and (query_file is not None or chunk_rows is not None or if_commit is not None):
        raise click.UsageError("--resume continues a chunked mutation with its own query and options; give only GRAPH")
    if resume is None and query_file is None:
        raise click.UsageError("--query is required (or --resume OPERATION)")
    if chunk_rows is not None and if_commit is not None:
        raise click.UsageError("--if-commit and --chunk-rows do not combine: a chunked mutation makes many commits")
    source = _source(query_file)
    from omnigraph.sources import MAX_ROWS, check_mutation

    checked = check_mutation(source, name) if source is not None else None  # refused before any I/O
    with open_for_command(uri) as opened:
        say_recovered(opened)
        if resume is not None:
            document = opened.resume_mutation(resume, announce=say).to_dict()
        elif chunk_rows is not None:
            assert source is not None
            document = opened.mutate_chunked(source, chunk_rows=chunk_rows, params=params, name=name, branch=branch, announce=say).to_dict()
        else:
            assert source is not None and query_file is not None and checked is not None
            try:
                document = opened.mutate(source, params=params, name=name, branch=branch, if_commit=if_commit).to_dict()
            except omnigraph.ResourceLimit as limit:
                if limit.details.get("resource") == "rows" and "insert" not in checked.verbs:
                    command = shlex.join(
                        [
                            "omnigraph",
                            "mutate",
                            "--query",
                            str(query_file),
                            *(["--name", name] if name else []),
                            *(["--params", params_json] if params_json else []),
                            "--branch",
                            branch,
                            "--chunk-rows",
                            str(MAX_ROWS),
                            opened.uri,
                        ]
                    )
                    limit.message += f"; next: `{command}`"
                    limit.details["next"] = command
                raise
    if chunk_rows is not None or resume is not None:
        if as_json:
            emit_json(document)
            return
        for key in ("affected_nodes", "affected_edges"):
            echo_result(f"{key}: {document[key]}")
        echo_result(f"commits: {len(document['commits'])} (operation {document['operation_id']})")
        return
    if as_json:
        emit_json(document)
        return
    for key in ("affected_nodes", "affected_edges", "distinct_nodes", "distinct_edges"):
        echo_result(f"{key}: {document[key]}")
    echo_result(f"commit: {document['commit'] or 'null'}")
