"""``omnigraph drift show|adopt|revert``, ``omnigraph recover`` and ``omnigraph optimize``:
routine Lance maintenance.

Both work on format-5 graphs and on format-4 graphs (maintenance changes no row through the
write door, and a format-4 graph must be maintainable before its migration); a graph under a
migration barrier is refused. On a format-4 graph ``drift adopt`` skips the fencing checks (the
migration makes them) and ``optimize`` protects every version a migration sidecar pins.
"""

from __future__ import annotations

import datetime as dt
import re

import click

from cli.progress import StderrProgress
from cli.support import actor_name, echo_result, emit_json, json_option, reports_errors, say
from engine.door import FENCED_PROFILE, LEGACY_PROFILE
from engine.errors import BadRequest, NotFound
from engine.graph import Graph, open_graph
from engine.maintenance.optimize import optimize
from engine.maintenance.progress import SilentProgress
from engine.manifest import MAIN, Manifest
from engine.reconcile import drift, intents, recovery
from engine.storage import FORMAT_4, open_store

_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> dt.timedelta:
    """``90s``, ``15m``, ``12h``, ``7d``, ``2w`` (or a sum such as ``1d12h``)."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise click.BadParameter(f"{text!r} is not a duration such as 0s, 15m, 12h, 7d or 2w")
    return dt.timedelta(seconds=sum(int(n) * _UNIT_SECONDS[u] for n, u in parts))


def open_for_maintenance(uri: str, *, write: bool) -> Graph:
    """Open with the profile of the graph's format: 5 -> fenced engine, 4 -> format-4 rules.

    Any other stamp is refused by the fenced engine's rules (a migration barrier names
    ``omnigraph-migrate status``)."""
    store = open_store(uri)
    manifest = Manifest(store)
    stamp = manifest.read_stamp()[0] if manifest.exists() else None
    profile = LEGACY_PROFILE if stamp == FORMAT_4 else FENCED_PROFILE
    return open_graph(uri, profile, write=write)


def _report_opened(graph: Graph) -> None:
    for record in graph.recovered:
        say(f"recovered interrupted commit {record.operation_id} on {record.graph_branch}: {record.outcome}")
    for adopted in graph.adopted:
        say(f"adopted {'+'.join(adopted.operations)} {adopted.span} on {adopted.table_key} ({adopted.graph_branch})")


def _table_filter(graph: Graph, branch: str, table: str | None) -> list[str] | None:
    if table is None:
        return None
    if table not in graph.manifest.snapshot(branch).tables:
        raise NotFound(
            f"branch {branch!r} has no table {table!r} (see `omnigraph snapshot --branch {branch} {graph.store.uri}`)",
            {"table": table},
        )
    return [table]


def add_maintenance_commands(group: click.Group) -> None:
    """Attach ``drift`` and ``optimize`` to the ``omnigraph`` group."""

    @group.group("drift")
    def drift_group() -> None:
        """Table commits made outside the engine: show, adopt or revert them."""

    @drift_group.command("show")
    @click.option("--branch", default=MAIN, show_default=True)
    @click.option("--table", default=None, help="One table key, e.g. node:Person.")
    @json_option
    @click.argument("graph")
    @reports_errors
    def drift_show(branch: str, table: str | None, graph: str, as_json: bool) -> None:
        """Show the commits between each table's pin and its HEAD, and whether they change rows."""
        opened = open_for_maintenance(graph, write=False)
        opened.manifest.require_branch(branch)
        reports = drift.out_of_band(
            opened.store, opened.manifest, branch, _table_filter(opened, branch, table), compare_rows=True, include_forks=True
        )
        if as_json:
            emit_json({"branch": branch, "tables": [r.to_json() for r in reports]})
            return
        if not reports:
            echo_result(f"no out-of-band commits on branch {branch}")
        for report in reports:
            echo_result(f"{report.describe()}: {report.verdict} (rows preserved: {report.rows_preserved})")
            if report.verdict == "drift":
                commands = drift.commands_for(opened.store.uri, report)
                say(f"  keep the rows: {commands['adopt']}\n  restore v{report.pinned_version}: {commands['revert']}")

    @drift_group.command("adopt")
    @click.option("--branch", default=MAIN, show_default=True)
    @click.option("--table", default=None, help="One table key, e.g. node:Person.")
    @json_option
    @click.argument("graph")
    @reports_errors
    def drift_adopt(branch: str, table: str | None, graph: str, as_json: bool) -> None:
        """Pin each table's HEAD (after the fencing checks) in one graph commit."""
        opened = open_for_maintenance(graph, write=True)
        _report_opened(opened)
        opened.manifest.require_branch(branch)
        reports = drift.out_of_band(opened.store, opened.manifest, branch, _table_filter(opened, branch, table), include_forks=True)
        version = None
        if reports:
            version = drift.adopt(
                opened.store, opened.manifest, branch, reports, actor=actor_name(),
                require_fencing=opened.profile.router.with_pk,
            )
        if as_json:
            emit_json({"branch": branch, "adopted": [r.to_json() for r in reports], "manifest_version": version})
            return
        if not reports:
            echo_result(f"nothing to adopt on branch {branch}")
        for report in reports:
            echo_result(f"adopted {'+'.join(report.operations)} {report.span} on {report.table_key}")

    @drift_group.command("revert")
    @click.option("--branch", default=MAIN, show_default=True)
    @click.option("--table", default=None, help="One table key, e.g. node:Person.")
    @json_option
    @click.argument("graph")
    @reports_errors
    def drift_revert(branch: str, table: str | None, graph: str, as_json: bool) -> None:
        """Restore each table's pinned rows as a new version and pin it (one graph commit per table)."""
        opened = open_for_maintenance(graph, write=True)
        _report_opened(opened)
        opened.manifest.require_branch(branch)
        reports = drift.out_of_band(opened.store, opened.manifest, branch, _table_filter(opened, branch, table), include_forks=True)
        versions = [drift.revert(opened.store, opened.manifest, report, actor=actor_name()) for report in reports]
        if as_json:
            emit_json({"branch": branch, "reverted": [r.to_json() for r in reports], "manifest_versions": versions})
            return
        if not reports:
            echo_result(f"nothing to revert on branch {branch}")
        for report in reports:
            echo_result(f"reverted {report.table_key} to the rows of v{report.pinned_version} ({report.span} undone)")

    @group.command("recover")
    @json_option
    @click.argument("graph")
    @reports_errors
    def recover_command(graph: str, as_json: bool) -> None:
        """Open the graph read-write: resolve interrupted commits of dead writers, adopt out-of-band
        commits that change no row, then report any drift left (exit 5, naming `omnigraph drift`)."""
        opened = open_for_maintenance(graph, write=True)
        _report_opened(opened)
        finished = recovery.finish_interrupted_branch_operations(opened.store, opened.manifest)
        for name in finished:
            say(f"completed an interrupted create or delete of branch {name}")
        drifted = []
        for branch in opened.manifest.branches():
            drifted += drift.out_of_band(opened.store, opened.manifest, branch, include_forks=True)
        pending = [i.operation_id for i in intents.list_intents(opened.store)]
        document = {
            "recovered": [r.model_dump(mode="json") for r in opened.recovered],
            "adopted": [r.to_json() for r in opened.adopted],
            "in_flight": pending,
            "branch_operations_completed": finished,
        }
        if drifted:
            error = drift.drift_error(opened.store.uri, drifted)
            error.details["recovered"] = document["recovered"]
            raise error
        if as_json:
            emit_json(document)
            return
        echo_result(
            f"recovered {len(opened.recovered)} interrupted commit(s), adopted {len(opened.adopted)} "
            f"out-of-band span(s); no drift"
        )
        if pending:
            say(f"{len(pending)} commit(s) of live writers are still in flight: {', '.join(pending)}")

    @group.command("optimize")
    @click.option("--branch", default=MAIN, show_default=True)
    @click.option("--compact", is_flag=True, help="Compact each owned table's data files.")
    @click.option("--index", "index_column", default=None, help="Build (or rebuild) a BTREE index on this column.")
    @click.option("--cleanup-older-than", "cleanup_older_than", default=None, metavar="DUR",
                  help="Delete table versions older than DUR (0s, 12h, 7d) that nothing pins.")
    @click.option("--dry-run", is_flag=True, help="Report what would be done; change nothing.")
    @json_option
    @click.argument("graph")
    @reports_errors
    def optimize_command(
        branch: str, compact: bool, index_column: str | None, cleanup_older_than: str | None, dry_run: bool,
        graph: str, as_json: bool,
    ) -> None:
        """Compact, index and clean up old versions; compaction and indexes are published as a graph commit."""
        older_than = parse_duration(cleanup_older_than) if cleanup_older_than is not None else None
        if not compact and index_column is None and older_than is None:
            raise BadRequest("nothing to do: pass --compact, --index COLUMN and/or --cleanup-older-than DUR")
        opened = open_for_maintenance(graph, write=True)
        _report_opened(opened)
        from migrator.sidecar import pinned_images  # the ledger models: loaded only by optimize

        report = optimize(
            opened, branch, compact=compact, index_column=index_column, cleanup_older_than=older_than,
            dry_run=dry_run, actor=actor_name(), progress=SilentProgress() if as_json else StderrProgress(),
            extra_pins=pinned_images(opened.store),
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
