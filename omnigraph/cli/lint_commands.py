"""``omnigraph lint --schema S.pg --query Q.gq [--json]``: type-check every query of a file, no graph.

Every query, read or mutation, is checked on its own (:func:`omnigraph.lint.lint`), so one run
reports each refused query with its ``gq error at LINE:COLUMN``. Exit 0 when every query checks:
on stdout one line per query (``ok  read  NAME``) and per warning, or with ``--json`` the lint
report (``status``, ``results`` with each query's ``operation`` descriptor, ``findings``).
Otherwise exit 1 (``bad_request``): the same lines (a refused query's line carries its error),
or with ``--json`` the error document whose ``details`` is the report. A schema or query file
that is missing, unreadable or not UTF-8, and a refused schema, are ``bad_request`` too.
"""

from __future__ import annotations

from typing import Any

import click

from omnigraph.cli.shared_commands import read_text_file
from omnigraph.cli.support import echo_result, emit_json, json_option, reports_errors
from omnigraph.errors import BadRequest


def _lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for result in report["results"]:
        shown = f"{result['status']:<6}{result['kind']:<9}{result['name']}"
        lines.append(f"{shown}: {result['error']}" if result["status"] == "error" else shown)
        lines.extend(f"warning {result['name']}: {warning}" for warning in result.get("warnings", ()))
    lines.extend(f"{finding['severity']} {finding['code']}: {finding['message']}" for finding in report["findings"])
    return lines


@click.command("lint")
@click.option("--schema", "schema_path", required=True, help="The .pg schema file to check against.")
@click.option("--query", "query_path", required=True, help="The .gq file whose every query is checked.")
@json_option
@reports_errors
def lint_command(schema_path: str, query_path: str, as_json: bool) -> None:
    """Type-check every query of a .gq file against a .pg schema file; no graph is read."""
    from omnigraph.lint import lint

    schema = read_text_file(schema_path, "schema file")
    source = read_text_file(query_path, "query file")
    report = lint(schema, source, schema_path=schema_path, query_path=query_path)
    if not as_json:
        for line in _lines(report):
            echo_result(line)
    summary = f"{report['queries_processed']} query(ies), {report['errors']} error(s), {report['warnings']} warning(s)"
    if report["status"] == "ok":
        if as_json:
            emit_json(report)
        else:
            echo_result(f"{query_path}: {summary}")
        return
    raise BadRequest(f"{query_path}: {summary}", report)
