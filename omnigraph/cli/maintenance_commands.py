"""Routine Lance maintenance: ``omnigraph drift show|adopt|revert``, ``omnigraph recover`` and ``omnigraph optimize``.

Each works on format-5 graphs and on format-4 graphs (maintenance changes no row through the
write door, and a format-4 graph must be maintainable before its migration); a graph under a
migration barrier is refused. On a format-4 graph ``drift adopt`` skips the fencing checks (the
migration makes them) and ``optimize`` protects every version a migration sidecar pins.
"""

from __future__ import annotations

import datetime as dt
import re

import click

from omnigraph.cli.progress import StderrProgress
from omnigraph.cli.support import echo_result, emit_json, json_option, reports_errors, say

MAIN = "main"
_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> dt.timedelta:
    """``90s``, ``15m``, ``12h``, ``7d``, ``2w`` (or a sum such as ``1d12h``)."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise click.BadParameter(f"{text!r} is not a duration such as 0s, 15m, 12h, 7d or 2w")
    return dt.timedelta(seconds=sum(int(n) * _UNIT_SECONDS[u] for n, u in parts))


@click.group("drift")
def drift_group() -> None:
    """Table commits made outside the engine: show, adopt or revert them."""


@drift_group.command("show")
@click.option("--branch", default=MAIN, show_default=True)
@click.option("--table", default=None, help="One table key, e.g. node:Person.")
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def drift_show(branch: str, table: str | None, uri: str, as_json: bool) -> None:
    """Show the commits between each table's pin and its HEAD, and whether they change rows."""
    from omnigraph.maintenance import drift_show

    shown = drift_show(uri, branch=branch, table=table)
    reports = shown.tables
    if as_json:
        emit_json(shown.to_dict())
        return
    if not reports:
        echo_result(f"no out-of-band commits on branch {branch}")
    for report in reports:
        echo_result(f"{report.describe()}: {report.verdict} (rows preserved: {report.rows_preserved})")
        if report.verdict == "drift":
            commands = shown.commands(report)
            say(f"  keep the rows: {commands['adopt']}\n  restore v{report.pinned_version}: {commands['revert']}")


@drift_group.command("adopt")
@click.option("--branch", default=MAIN, show_default=True)
@click.option("--table", default=None, help="One table key, e.g. node:Person.")
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def drift_adopt(branch: str, table: str | None, uri: str, as_json: bool) -> None:
    """Pin each table's HEAD (after the fencing checks) in one graph commit."""
    from omnigraph.maintenance import drift_adopt

    adopted = drift_adopt(uri, branch=branch, table=table, announce=say)
    reports = adopted.adopted
    if as_json:
        emit_json(adopted.to_dict())
        return
    if not reports:
        echo_result(f"nothing to adopt on branch {branch}")
    for report in reports:
        echo_result(f"adopted {'+'.join(report.operations)} {report.span} on {report.table_key}")


@drift_group.command("revert")
@click.option("--branch", default=MAIN, show_default=True)
@click.option("--table", default=None, help="One table key, e.g. node:Person.")
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def drift_revert(branch: str, table: str | None, uri: str, as_json: bool) -> None:
    """Restore each table's pinned rows as a new version and pin it (one graph commit per table)."""
    from omnigraph.maintenance import drift_revert

    reverted = drift_revert(uri, branch=branch, table=table, announce=say)
    reports = reverted.reverted
    if as_json:
        emit_json(reverted.to_dict())
        return
    if not reports:
        echo_result(f"nothing to revert on branch {branch}")
    for report in reports:
        echo_result(f"reverted {report.table_key} to the rows of v{report.pinned_version} ({report.span} undone)")


@click.command(
    "recover",
    help="Open the graph read-write: resolve interrupted commits of dead writers, adopt out-of-band "
    "commits that change no row, then report any drift left (exit 5, naming `omnigraph drift`).",
)
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def recover_command(uri: str, as_json: bool) -> None:
    """``omnigraph recover``: :func:`omnigraph.maintenance.recover`, reported on stdout (``help`` says what it does)."""
    from omnigraph.maintenance import recover

    result = recover(uri, announce=say)
    if as_json:
        emit_json(result.to_dict())
        return
    echo_result(f"recovered {len(result.recovered)} interrupted commit(s), adopted {len(result.adopted)} out-of-band span(s); no drift")
    if result.in_flight:
        say(f"{len(result.in_flight)} commit(s) of live writers are still in flight: {', '.join(result.in_flight)}")


@click.command("optimize")
@click.option("--branch", default=MAIN, show_default=True)
@click.option("--compact", is_flag=True, help="Compact each owned table's data files.")
@click.option("--index", "index_column", default=None, help="Build (or rebuild) a BTREE index on this column.")
@click.option(
    "--declared-indexes",
    is_flag=True,
    help="Build (or rebuild) the indexes the schema's @index declarations ask for (vector, full-text, BTREE).",
)
@click.option(
    "--key-indexes",
    is_flag=True,
    help="Build or refresh only the key indexes (BTREE on id, and on src/dst of edges); every compaction or index build does this too.",
)
@click.option(
    "--cleanup-older-than",
    "cleanup_older_than",
    default=None,
    metavar="DUR",
    help="Delete table versions older than DUR (0s, 12h, 7d) that nothing pins.",
)
@click.option("--dry-run", is_flag=True, help="Report what would be done; change nothing.")
@json_option
@click.argument("uri", metavar="GRAPH")
@reports_errors
def optimize_command(
    branch: str,
    compact: bool,
    index_column: str | None,
    declared_indexes: bool,
    key_indexes: bool,
    cleanup_older_than: str | None,
    dry_run: bool,
    uri: str,
    as_json: bool,
) -> None:
    """Compact, index and clean up old versions; compaction and indexes are published as a graph commit."""
    from omnigraph.maintenance import optimize

    older_than = parse_duration(cleanup_older_than) if cleanup_older_than is not None else None
    report = optimize(
        uri,
        branch=branch,
        compact=compact,
        index_column=index_column,
        declared_indexes=declared_indexes,
        key_indexes=key_indexes,
        cleanup_older_than=older_than,
        dry_run=dry_run,
        progress=None if as_json else StderrProgress(),
        announce=say,
    )
    if as_json:
        emit_json(report.to_json())
        return
    verb = "would" if dry_run else "did"
    for table in report.tables:
        echo_result(f"{table['table_key']}: {verb} {', '.join(table['actions'])}")
    for skipped in report.skipped:
        say(f"{skipped['table_key']}: skipped, {skipped['reason']}")
    for cleaned in report.cleanup:
        where = f"{cleaned['table_path']} ({cleaned['table_branch'] or 'main'})"
        echo_result(f"{where}: {verb} delete {len(cleaned['deleted_versions'])} version(s), keeping {cleaned['kept_versions']}")
