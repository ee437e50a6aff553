"""``omnigraph query --query F.gq [--name N] [--params JSON] [--branch B] [--at COMMIT] [--format F] [--json] [--explain] GRAPH``.

Runs one read query; reads work at every stamp the format-5 program reads (4, migrating, 5).
``--explain`` prints how it would run instead (text, or the plan document with ``--json``).
Output on stdout: ``table`` (the default: aligned columns, a header and a row count), ``json``
(the output document ``{query, branch, commit, columns, types, rows}``, as ``--json`` prints
it: its keys sorted, each row's keys in column order),
``jsonl`` (one row object per line, keys in column order) or ``csv`` (a header, then one line
per row; NULL is an empty field, lists are JSON text).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from omnigraph.cli.mutate import parse_params
from omnigraph.cli.shared_commands import read_text_file
from omnigraph.cli.support import echo_result, emit_json, json_option, open_for_command, reports_errors

if TYPE_CHECKING:
    from omnigraph.graph import Answer

MAIN = "main"
FORMATS = ("table", "json", "jsonl", "csv")


def _text(value: Any) -> str:
    """A value as one table or CSV cell (strings as they are, NULL empty, others as JSON)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _table(answer: Answer) -> Iterator[str]:
    rows = [[_text(value) if value is not None else "null" for value in row] for row in answer.rows()]
    widths = [max([len(name)] + [len(row[i]) for row in rows]) for i, name in enumerate(answer.columns)]
    yield "  ".join(name.ljust(width) for name, width in zip(answer.columns, widths, strict=True)).rstrip()
    yield "  ".join("-" * width for width in widths)
    for row in rows:
        yield "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
    yield f"({len(rows)} row{'' if len(rows) == 1 else 's'})"


def _plan_lines(plan: dict[str, Any]) -> Iterator[str]:
    """``query --explain`` as text: one line per table, variable, traversal and filter."""
    yield f"query {plan['query']} on {plan['branch']} at commit {plan['commit']}"
    if plan["executor"] == "direct":
        yield (
            "  answered directly from the rows its keys reach, without a DuckDB statement (unless a probe passes its bound,"
            " or a variable-length traversal's adjacency does not fit the bound on adjacencies)"
        )
    elif plan["executor"] == "degrees":
        yield (
            "  counted without DuckDB, from the edge table's adjacency if this process holds it, else from its columns"
            " when they fit the bound on adjacencies (else by one DuckDB statement)"
        )
    else:
        yield "  answered by one DuckDB statement"
    for table in plan["tables"]:
        indexes = ", ".join(f"{i['name']} ({i['type']} on {', '.join(i['columns'])})" for i in table["indexes"]) or "no index"
        yield f"  table {table['table']} v{table['version']}: {table['rows']} rows; {indexes}"
    for var in plan["variables"]:
        how = f"id lookup {json.dumps(var['id_lookup'])}" if var["id_lookup"] is not None else "scan"
        how += f" served by {var['id_index']}" if var["id_index"] is not None else ""
        yield f"  {var['variable']}: {var['table']}, {how}, at most {var['estimated_rows']} rows"
    for hop in plan["hops"]:
        low, high = hop["bounds"]
        start = f", from {hop['start']}" if hop["start"] else ""
        start += f", stops after {hop['stops_after']} pairs" if hop["stops_after"] is not None else ""
        start += f", frontier served by {hop['frontier_index']}" if hop["frontier_index"] is not None else ""
        bound = f"{hop['edge_variable']}:" if hop["edge_variable"] else ""
        yield (
            f"  {hop['from']} {bound}{hop['edge']}{{{low},{high}}} {hop['to']}: {hop['mode']}{start}, direction {hop['direction']}, "
            f"at most {hop['estimated_rows']} edges per hop"
        )
    for item in plan["filters"]:
        where = "pushed into the scan" if item["pushed_into_scan"] else "applied after the scan"
        where = "applied after the joins that bind its variables" if item["after_joins"] else where
        served = f", served by {item['index']}" if item["index"] else ""
        yield f"  filter {item['filter']}: {where}{served}"
    for item in plan["searches"]:
        if item["candidates"] is not None:
            how = f"the {item['candidates']} nearest candidates from {item['index']}, then exact distances"
        elif item["index"] is not None:
            how = f"scores read from {item['index']}"
        elif item["function"] == "nearest":
            how = "exact distances of every row" if item["ordering"] else "computed per row"
        elif item["function"] == "rrf":
            how = "fused from the two rankings over the matching rows"
        else:
            how = "computed from the text of every row"
        yield f"  {item['function']}({item['column']}, ...){' ordering' if item['ordering'] else ''}: {how}"


def _write(answer: Answer, output: str) -> None:
    if output == "json":
        # The document's own keys sorted, as every --json prints them; a row's keys in column order.
        emit_json(dict(sorted(answer.document().items())), sort_keys=False)
    elif output == "jsonl":
        for row in answer.rows():
            echo_result(json.dumps(dict(zip(answer.columns, row, strict=True)), ensure_ascii=False))
    elif output == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(answer.columns)
        for row in answer.rows():
            writer.writerow([_text(value) for value in row])
    else:
        for line in _table(answer):
            echo_result(line)


@click.command("query")
@click.option("--query", "query_file", required=True, type=click.Path(dir_okay=False, path_type=Path), help="The .gq file.")
@click.option("--name", default=None, help="The query to run (required when the file declares several).")
@click.option("--params", "params_json", default=None, help='Parameter values as a JSON object, e.g. \'{"name": "Ann"}\'.')
@click.option("--branch", default=MAIN, show_default=True)
@click.option("--at", "at_commit", default=None, help="Read the branch as of this commit (see `commit list`).")
@click.option(
    "--format", "output", type=click.Choice(FORMATS), default=None, help="Output format (default: table; --json is --format json)."
)
@click.option("--explain", is_flag=True, help="Print how the query would run (tables, indexes, traversal modes), without running it.")
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def query_command(
    query_file: Path,
    name: str | None,
    params_json: str | None,
    branch: str,
    at_commit: str | None,
    output: str | None,
    explain: bool,
    uri: str,
    as_json: bool,
) -> None:
    """Run one .gq read query on a branch (or one of its commits) and print the answer."""
    if as_json and output not in (None, "json"):
        raise click.UsageError(f"--json prints the JSON document; it cannot be combined with --format {output}")
    params = parse_params(params_json)
    source = read_text_file(str(query_file), "query file")
    from omnigraph.sources import check_read_query

    check_read_query(source, name)  # syntax, --name and the kind: refused before any I/O
    if explain:
        if output not in (None, "json"):
            raise click.UsageError(f"--explain prints the plan as text or, with --json, as JSON; not --format {output}")
        with open_for_command(uri, read_only=True) as opened:
            plan = opened.explain_query(source, name=name, params=params, branch=branch, at=at_commit)
        if as_json or output == "json":
            emit_json(plan.to_dict())
        else:
            for line in _plan_lines(plan.to_dict()):
                echo_result(line)
        return
    with (
        open_for_command(uri, read_only=True) as opened,
        opened.open_query(source, name=name, params=params, branch=branch, at=at_commit) as answer,
    ):
        _write(answer, "json" if as_json else output or "table")
