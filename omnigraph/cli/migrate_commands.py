"""The commands ``omnigraph-migrate`` defines itself.

They are preflight, plan, run, prepare, cutover, resume, abort, status, verify, duplicates, repair and copy
(:mod:`omnigraph.cli.migrate` lists them; ``claim``, ``playbook``, ``rebuild`` and ``refence`` have
modules of their own).

Every command drives the migrator through :mod:`omnigraph.migrate`, whose functions import the
migrator when they are called: importing this module (to run one command, or to print its
``--help``) costs only what the options need.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from omnigraph import migrate
from omnigraph.cli.answer_options import answer_check_options, chosen_queries
from omnigraph.cli.executor_options import chosen_executor, executor_options
from omnigraph.cli.fleet_options import ignore_fleet_option, report_fleet
from omnigraph.cli.parallel_option import parallel_option
from omnigraph.cli.progress import StderrProgress
from omnigraph.cli.support import actor_name, echo_result, emit_json, json_option, reports_errors, say
from omnigraph.errors import EXIT_VALIDATION_FAILED, BadRequest, ValidationFailed
from omnigraph.migrate import Migrated, Progress, SilentProgress


def _progress(as_json: bool) -> Progress:
    return SilentProgress() if as_json else StderrProgress()


def _print_inventory(entries: Sequence[Mapping[str, Any]]) -> None:
    for line in migrate.inventory_lines(entries):
        echo_result(line)


def _inventory_on_stdout(command: Any) -> Any:
    """Without --json, a validation failure also prints its inventory on stdout."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ValidationFailed as failure:
            if not kwargs.get("as_json") and failure.details.get("inventory"):
                _print_inventory(failure.details["inventory"])
            raise

    return wrapper


class Duration(click.ParamType):  # type: ignore[type-arg]
    """Seconds, written ``5s``, ``500ms``, ``2m`` or a plain number of seconds (:func:`omnigraph.migrate.duration_seconds`)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        """The duration in seconds; a usage error for anything else."""
        if isinstance(value, float):
            return value
        try:
            return migrate.duration_seconds(str(value))
        except BadRequest as error:
            self.fail(error.message, param, ctx)


max_outage_option = click.option(
    "--max-outage",
    type=Duration(),
    default="5s",
    show_default=True,
    help="Refuse to raise the barrier when the cutover is estimated to keep writers out longer than this "
    "(and wait no longer than this for writers' commits under it).",
)
run_max_outage_option = click.option(
    "--max-outage",
    type=Duration(),
    default=None,
    help="Refuse the cutover when it is estimated to keep writers out longer than this (e.g. 5s) [default: no bound].",
)


def _say_estimate(estimate: Mapping[str, Any]) -> None:
    say(
        f"predicted cutover: {estimate['units']} unit(s), {estimate['changed_rows']} changed row(s) since the receipts, "
        f"{estimate['unreceived_rows']} row(s) without a receipt: about {estimate['estimated_seconds']:.1f}s of outage"
    )


@click.command("preflight")
@click.argument("uri", metavar="GRAPH")
@click.option("--validate", is_flag=True, help="Also scan every pinned image for duplicate or null ids.")
@ignore_fleet_option
@json_option
@reports_errors
@_inventory_on_stdout
def preflight_command(uri: str, validate: bool, ignore_fleet: bool, as_json: bool) -> None:
    """Read-only readiness check: stamp 4, no pending writes, no claim, no live registered writer, every unit listed."""
    document = migrate.preflight(uri, validate=validate, ignore_fleet=ignore_fleet, progress=_progress(as_json)).to_dict()
    if as_json:
        emit_json(document)
        return
    inherited = sum(1 for u in document["units"] if u["inherited"])
    echo_result(
        f"ready: {document['graph']} is at format 4 with {len(document['branches'])} branch(es), "
        f"{len(document['units'])} unit(s) ({inherited} inherited), {document['images']} distinct image(s)"
        + ("; no duplicate or null ids" if validate else "; add --validate to scan ids")
    )
    report_fleet(document["fleet"])
    for report in document["out_of_band"]:
        echo_result(
            f"out-of-band: {report['table_key']} on {report['graph_branch']} v{report['pinned_version']}.."
            f"v{report['head_version']} changes no row; `run` adopts it before pinning"
        )
    say(
        f"next: `omnigraph-migrate run {document['graph']}` (writers go on while it validates; they are held off "
        f"for its cutover only), or `omnigraph-migrate prepare {document['graph']}` then `cutover` by hand"
    )


@click.command("plan")
@click.argument("uri", metavar="GRAPH")
@json_option
@reports_errors
def plan_command(uri: str, as_json: bool) -> None:
    """List the units (branch, table, pinned image) a migration would process, and predict its cutover."""
    document = migrate.plan(uri).to_dict()
    if as_json:
        emit_json(document)
        return
    for unit in document["units"]:
        pinned = f"{unit['pinned_table_branch'] or 'main'}@v{unit['pinned_table_version']}"
        echo_result(f"{unit['graph_branch']:<20} {unit['table_key']:<28} {pinned:<20} {'inherited' if unit['inherited'] else 'owned'}")
    _say_estimate(document["cutover"])


@click.command("run")
@click.argument("uri", metavar="GRAPH")
@click.option(
    "--owner",
    default=None,
    help="Who runs the migration (recorded in the claim and ledger) [default: OMNIGRAPH_ACTOR, else the login name].",
)
@run_max_outage_option
@ignore_fleet_option
@executor_options
@parallel_option
@answer_check_options
@json_option
@reports_errors
@_inventory_on_stdout
def run_command(
    uri: str,
    owner: str | None,
    max_outage: float | None,
    ignore_fleet: bool,
    executor: str,
    ray_address: str | None,
    parallel: int | None,
    queries_path: Path | None,
    query_params_path: Path | None,
    as_json: bool,
) -> None:
    """Migrate every branch of GRAPH to format 5: prepare online, then a cutover of at most --max-outage.

    Format-4 writers go on while every image is validated; they are held off only for the cutover.
    On a graph already at format 5 (no claim held, verify passes) it does nothing and exits 0.
    With --executor ray the images are validated as Ray tasks (docs/operations.md). With
    --queries the stamp also needs every read query to answer as it did before (docs/queries.md).
    """
    queries = chosen_queries(queries_path, query_params_path)
    with chosen_executor(executor, ray_address) as validator:
        outcome = migrate.run(
            uri,
            owner=owner,
            ignore_fleet=ignore_fleet,
            executor=validator,
            progress=_progress(as_json),
            queries=queries,
            parallel=parallel,
            max_outage=max_outage,
        )
    if as_json:
        emit_json(outcome.to_dict())
        return
    if isinstance(outcome, migrate.UpToDate):
        echo_result(outcome.message)
        return
    _say_migrated(uri, outcome)


@click.command("prepare")
@click.argument("uri", metavar="GRAPH")
@click.option("--token", default=None, help="Catch up the prepared migration of this claim token instead of starting one.")
@click.option("--owner", default=None, help="Who runs the migration [default: OMNIGRAPH_ACTOR, else the login name].")
@executor_options
@parallel_option
@json_option
@reports_errors
@_inventory_on_stdout
def prepare_command(
    uri: str, token: str | None, owner: str | None, executor: str, ray_address: str | None, parallel: int | None, as_json: bool
) -> None:
    """Validate every pinned image of GRAPH online (writers go on) and record a receipt for each.

    Without --token it starts a migration under an online claim; with it, the prepared migration
    catches up (only images that appeared or moved since are validated). Then run `cutover`.
    """
    with chosen_executor(executor, ray_address) as validator:
        outcome = migrate.prepare(uri, token=token, owner=owner, executor=validator, progress=_progress(as_json), parallel=parallel)
    if as_json:
        emit_json(outcome.to_dict())
        return
    echo_result(
        f"prepared migration {outcome.migration_id} (round {outcome.rounds}): {outcome.images} image(s) have receipts, "
        f"{outcome.validated} validated now ({outcome.changed_rows} changed row(s) read from receipts); the graph is "
        "still at stamp 4 and writable"
    )
    _say_estimate(outcome.cutover)
    say(
        f"next: `omnigraph-migrate cutover {uri} --token {outcome.token}` "
        f"(or `omnigraph-migrate prepare {uri} --token {outcome.token}` to catch up first)"
    )


@click.command("cutover")
@click.argument("uri", metavar="GRAPH")
@click.option("--token", required=True, help="The token of the prepared migration's claim.")
@click.option("--owner", default=None, help="Who runs the cutover [default: OMNIGRAPH_ACTOR, else the login name].")
@max_outage_option
@ignore_fleet_option
@executor_options
@parallel_option
@answer_check_options
@json_option
@reports_errors
@_inventory_on_stdout
def cutover_command(
    uri: str,
    token: str,
    owner: str | None,
    max_outage: float,
    ignore_fleet: bool,
    executor: str,
    ray_address: str | None,
    parallel: int | None,
    queries_path: Path | None,
    query_params_path: Path | None,
    as_json: bool,
) -> None:
    """Raise the barrier, validate only what moved since prepare, install the primary keys, stamp 5, release.

    Refused with nothing written when the predicted outage exceeds --max-outage.
    """
    queries = chosen_queries(queries_path, query_params_path)
    with chosen_executor(executor, ray_address) as validator:
        outcome = migrate.cutover(
            uri,
            token=token,
            owner=owner,
            max_outage=max_outage,
            ignore_fleet=ignore_fleet,
            executor=validator,
            progress=_progress(as_json),
            queries=queries,
            parallel=parallel,
        )
    if as_json:
        emit_json(outcome.to_dict())
        return
    _say_migrated(uri, outcome)


@click.command(
    "resume",
    help="Continue a crashed migration from its ledger and sidecars (images not yet found clean are validated "
    "on --executor). Answers the migration recorded are checked before the stamp; --queries is only needed "
    "if the run died before recording them.",
)
@click.argument("uri", metavar="GRAPH")
@click.option("--token", required=True, help="The token of the crashed migration's claim.")
@executor_options
@parallel_option
@answer_check_options
@json_option
@reports_errors
@_inventory_on_stdout
def resume_command(
    uri: str,
    token: str,
    executor: str,
    ray_address: str | None,
    parallel: int | None,
    queries_path: Path | None,
    query_params_path: Path | None,
    as_json: bool,
) -> None:
    """``omnigraph-migrate resume``: :func:`omnigraph.migrate.resume` on the chosen executor (``help`` says what it does)."""
    queries = chosen_queries(queries_path, query_params_path)
    with chosen_executor(executor, ray_address) as validator:
        outcome = migrate.resume(uri, token=token, executor=validator, progress=_progress(as_json), queries=queries, parallel=parallel)
    if as_json:
        emit_json(outcome.to_dict())
        return
    echo_result(f"migration {outcome.migration_id} completed: {outcome.units} unit(s); stamp is {outcome.stamp}")
    _say_answers(outcome)


@click.command("abort")
@click.argument("uri", metavar="GRAPH")
@click.option("--token", required=True, help="The token of the migration's claim.")
@click.option("--reason", default="aborted by operator", show_default=True)
@json_option
@reports_errors
def abort_command(uri: str, token: str, reason: str, as_json: bool) -> None:
    """Put stamp 4 back and release the claim (before stamp 5 only). Installed PKs stay."""
    document = migrate.abort(uri, token=token, reason=reason).to_dict()
    if as_json:
        emit_json(document)
        return
    echo_result(
        f"aborted migration {document['migration_id']}: stamp is 4 again and the claim is released. "
        "Primary keys already installed stay (roll-forward only); old writers may run again, so a "
        "later `run` re-validates every image."
    )


@click.command("status")
@click.argument("uri", metavar="GRAPH")
@click.option(
    "--tail",
    "tail_records",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Show only the last N ledger records (the state is still the whole ledger's).",
)
@click.option(
    "--journal",
    "journal_root",
    metavar="ROOT",
    help="Where playbook runs are journalled [default: $OMNIGRAPH_STATE_DIR/playbook-runs, else "
    "~/.local/state/omnigraph/playbook-runs]; an interrupted run on GRAPH is named with the command that finishes it.",
)
@json_option
@reports_errors
def status_command(uri: str, tail_records: int | None, journal_root: str | None, as_json: bool) -> None:
    """The stamp, the claim holder (and every process acting for it), the latest migration's ledger, and the command to run next."""
    from omnigraph.playbooks.journal import default_journal_root
    from omnigraph.playbooks.runs import interrupted_runs, resume_command

    shown = migrate.status(uri, tail=tail_records)
    document = shown.to_dict()
    runs = interrupted_runs(journal_root or default_journal_root(), document["graph"])
    document["playbook_runs"] = [{**run.to_json(), "next": resume_command(run)} for run in runs]
    if as_json:
        emit_json(document)
        return
    echo_result(f"graph {document['graph']}: stamp {document['stamp']}")
    claim = document["claim"]
    if claim:
        echo_result(
            f"claim held by {claim['owner']} on {claim['host']} (pid {claim['pid']}) since {claim['created_at']}; "
            f"migration {claim['migration_id']}, token {claim['token']}"
        )
        for process in document["acting"]:
            echo_result(
                f"  {process['action']}: {process['owner']} on {process['host']} (pid {process['pid']}) "
                f"since {process['since']}: {process['liveness']}"
            )
    else:
        echo_result("no claim")
    if shown.ledger is not None:
        units = ", ".join(f"{state}: {count}" for state, count in document["units_by_state"].items()) or "none planned"
        echo_result(
            f"migration {document['migration_id']}: phase {document['phase']}; units {units}; "
            f"{document['ledger_records']} ledger record(s) over {document['elapsed_seconds']}s"
        )
        if document["barrier_age_seconds"] is not None:
            echo_result(f"the barrier has been up for {document['barrier_age_seconds']}s (writers are refused until the claim is released)")
        elif document["outage_seconds"] is not None:
            echo_result(f"writers were held for {document['outage_seconds']}s in all")
        echo_result(migrate.ledger_table(shown).rstrip())
    elif claim:
        echo_result(
            f"migration {claim['migration_id']}: no ledger record yet (its process stopped, or has not gone on, after taking the claim)"
        )
    for run in document["playbook_runs"]:
        say(
            f"playbook: run {run['run_id']} of {run['playbook']} on this graph was interrupted at step {run['last']['step']} "
            f"(its runner died); `{run['next']}` finishes it, and writes the report and JUnit it was asked for"
        )
    say(f"next: {document['next']}")


@click.command(
    "verify",
    help="Check every live table on every branch has the PK [id] and nothing is unpublished; with "
    "--queries, also that they answer as when the migration recorded them.",
)
@click.argument("uri", metavar="GRAPH")
@answer_check_options
@json_option
@reports_errors
def verify_command(uri: str, queries_path: Path | None, query_params_path: Path | None, as_json: bool) -> None:
    """``omnigraph-migrate verify``: :func:`omnigraph.migrate.verify` (``help`` says what it checks)."""
    document = migrate.verify(uri, queries=chosen_queries(queries_path, query_params_path)).to_dict()
    if as_json:
        emit_json(document)
        return
    echo_result(f"ok: every live table on every branch of {document['graph']} is fenced (stamp {document['stamp']})")
    for case in document.get("answer_check", []):
        echo_result(f"ok: query {case['query']} on {case['graph_branch']}: {case['message']}")


def _say_migrated(uri: str, outcome: Migrated) -> None:
    """The human result of a migration that reached stamp 5 (``run`` and ``cutover``), with the outage and what next."""
    echo_result(
        f"migrated {outcome.units} unit(s) over {outcome.images} image(s); stamp is now {outcome.stamp}; "
        f"writers were held for {outcome.outage_seconds}s"
    )
    _say_answers(outcome)
    say(f"next: `omnigraph-migrate verify {uri}`, then restart writers with the new omnigraph")


def _say_answers(outcome: Migrated) -> None:
    """One line per checked answer (nothing without an answer check)."""
    for case in outcome.answer_check:
        echo_result(f"answer unchanged: query {case['query']} on {case['graph_branch']} ({case['rows']} row(s))")


@click.command("duplicates")
@click.argument("uri", metavar="GRAPH")
@json_option
@reports_errors
def duplicates_command(uri: str, as_json: bool) -> None:
    """Print every duplicate or null id of every pinned image (exit 4 if any); takes no claim."""
    document = migrate.duplicates(uri, progress=_progress(as_json)).to_dict()
    if as_json:
        emit_json(document)
    else:
        _print_inventory(document["inventory"])
        echo_result(f"{len(document['inventory'])} problem(s) in {document['images']} image(s)")
    if document["inventory"]:
        raise SystemExit(EXIT_VALIDATION_FAILED)


@click.command("repair")
@click.argument("uri", metavar="GRAPH")
@click.option("--token", required=True, help="The token of the migration's claim.")
@click.option(
    "--decisions", "decisions_path", required=True, type=click.Path(dir_okay=False, path_type=Path), help="The decisions file (YAML)."
)
@click.option("--template", is_flag=True, help="Write a decisions template to --decisions instead of applying.")
@json_option
@reports_errors
def repair_command(uri: str, token: str, decisions_path: Path, template: bool, as_json: bool) -> None:
    """Repair duplicate/null ids behind the barrier, as decided in a decisions file."""
    if template:
        decisions = migrate.repair_template(uri, token=token, progress=_progress(as_json))
        migrate.write_repair_decisions(decisions_path, decisions)
        document: dict[str, Any] = {"template": str(decisions_path), "entries": len(decisions.decisions)}
        if as_json:
            emit_json(document)
            return
        echo_result(f"wrote {len(decisions.decisions)} entries to {decisions_path}: set an action on each, then rerun without --template")
        return
    document = migrate.repair(uri, token=token, decisions=migrate.read_repair_decisions(decisions_path), actor=actor_name()).to_dict()
    if as_json:
        emit_json(document)
        return
    echo_result(
        f"applied {len(document['commits'])} repair commit(s); next: `omnigraph-migrate duplicates {uri}` to check, "
        f"then `omnigraph-migrate resume {uri} --token {token}`"
    )


@click.command("copy")
@click.argument("source")
@click.argument("destination")
@json_option
@reports_errors
def copy_command(source: str, destination: str, as_json: bool) -> None:
    """Copy a graph root (all branches and versions) to an empty DESTINATION, for rehearsals.

    SOURCE is only read. Branches of the copy keep reading their inherited data files from
    SOURCE (Lance records the root's URI), so keep SOURCE in place: the copy is not a backup.
    """
    document = migrate.copy(source, destination).to_dict()
    if as_json:
        emit_json(document)
        return
    echo_result(f"copied {document['objects']} objects ({document['bytes']} bytes) from {source} to {destination}")
