"""``omnigraph schema show|plan|apply``: the accepted schema, and changing it on every branch.

``show [--json] GRAPH`` prints the accepted schema and its catalog (:meth:`omnigraph.Graph.schema`,
:meth:`omnigraph.Graph.schema_text`). ``plan --schema NEW.pg [--json] GRAPH`` prints the steps from
the accepted schema to ``NEW.pg`` and writes nothing (:meth:`omnigraph.Graph.plan_schema`).
``apply --schema NEW.pg [--allow-data-loss] [--json] GRAPH`` applies them to every branch
(:meth:`omnigraph.Graph.apply_schema`). Text output: one line per step, ``[data loss]`` and
``[validated]`` marking what drops data and what existing rows are checked against.
"""

from __future__ import annotations

from typing import Any

import click

from omnigraph.cli.shared_commands import read_text_file
from omnigraph.cli.support import echo_result, emit_json, json_option, open_for_command, reports_errors, say, say_recovered


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


def _plan_lines(plan: dict[str, Any]) -> list[str]:
    """The text form of a plan document (``schema plan --json``, or the plan part of ``schema apply --json``)."""
    if plan["from_schema_id"] == plan["to_schema_id"]:
        return ["the schema is already accepted: nothing to change"]
    steps = plan["steps"]
    lines = [f"{len(steps)} step(s) from schema {plan['from_schema_id'][:12]} to {plan['to_schema_id'][:12]}:"]
    for step in steps:
        marks = ("  [data loss]" if step["data_loss"] else "") + ("  [validated]" if step["validates"] else "")
        lines.append(f"  {step['kind']:<16} {step['detail']}{marks}")
    if not steps:
        lines.append("  (the source text changes; no table changes)")
    return lines


@schema_group.command("plan")
@click.option("--schema", "schema_path", required=True, help="The proposed .pg schema file.")
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def schema_plan(schema_path: str, uri: str, as_json: bool) -> None:
    """Print the steps from GRAPH's accepted schema to the --schema file; write nothing."""
    source = read_text_file(schema_path, "schema file")
    with open_for_command(uri, read_only=True) as opened:
        plan = opened.plan_schema(source)
    document = {**plan.model_dump(mode="json"), "data_loss": plan.data_loss}
    if as_json:
        emit_json(document)
        return
    for line in _plan_lines(document):
        echo_result(line)
    if plan.data_loss:
        say("applying this plan drops stored data: `schema apply` needs --allow-data-loss")


@schema_group.command("apply")
@click.option("--schema", "schema_path", required=True, help="The new .pg schema file.")
@click.option("--allow-data-loss", is_flag=True, help="Apply steps that drop types or properties and their values.")
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def schema_apply(schema_path: str, allow_data_loss: bool, uri: str, as_json: bool) -> None:
    """Apply the --schema file to every branch of GRAPH: one graph commit per branch."""
    source = read_text_file(schema_path, "schema file")
    with open_for_command(uri) as opened:
        say_recovered(opened)
        applied = opened.apply_schema(source, allow_data_loss=allow_data_loss)
    document = applied.document()
    if as_json:
        emit_json(document)
        return
    for line in _plan_lines(document):
        echo_result(line)
    commits = document["commits"]
    if document["outcome"] == "unchanged":
        for branch, commit_id in commits.items():
            echo_result(f"brought branch {branch} to the accepted schema: commit {commit_id}")
        return
    for branch, commit_id in commits.items():
        echo_result(f"branch {branch}: commit {commit_id}" if commit_id else f"branch {branch}: deleted meanwhile")
    echo_result(f"accepted schema {document['to_schema_id'][:12]} on {len(commits)} branch(es)")
