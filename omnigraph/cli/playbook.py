"""``omnigraph-migrate playbook run|resume|list|show``: YAML runbooks, and their runs afterwards.

``run PLAYBOOK GRAPH`` runs a playbook (a path or a bundled name) step by step, journalling every
step; ``resume JOURNAL`` finishes a run whose runner died, from its journal (``ROOT/<run id>``, as
the report's ``journal`` names it), and writes the report and JUnit XML of the whole run;
``list`` prints the runs under a journal root with their state; ``show JOURNAL`` prints one run's
records. A step that must ask while stdin is not a terminal and ``--yes`` was not given fails as
a usage error (exit 2) naming ``--yes``. Both ``run`` and ``resume`` exit with the code of the
failed step, 0 when every step ran.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from omnigraph.cli.answer_options import answer_check_options, chosen_queries
from omnigraph.cli.progress import StderrProgress
from omnigraph.cli.support import actor_name, echo_result, emit_json, json_option, reports_errors, say
from omnigraph.errors import OmnigraphError
from omnigraph.migrate import SilentProgress
from omnigraph.playbooks.actions import AnswerUnavailable
from omnigraph.playbooks.journal import RunArtifacts, default_journal_root
from omnigraph.playbooks.model import load_playbook
from omnigraph.playbooks.report import refusal_documents, write_json, write_junit
from omnigraph.playbooks.runner import Operator, RunReport, run_playbook
from omnigraph.playbooks.runs import list_runs, open_run, resume_run, summarize
from omnigraph.playbooks.runs import resume_command as command_to_resume


def _operator(yes: bool, holder_dead: bool, as_json: bool) -> Operator:
    def ask(question: str) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            raise AnswerUnavailable(question)
        return click.confirm(question, default=False, err=True)

    def ask_holder_dead(question: str) -> bool | None:
        if holder_dead:
            return True
        if yes or not sys.stdin.isatty():
            return None
        return click.confirm(question, default=False, err=True)

    return Operator(ask, ask_holder_dead, SilentProgress() if as_json else StderrProgress(), say)


def _finish(report: RunReport, planned: list[tuple[str, str]], report_path: Path | None, junit_path: Path | None, as_json: bool) -> None:
    if report_path is not None:
        write_json(report, report_path)
    if junit_path is not None:
        write_junit(report, planned, junit_path)
    if as_json:
        emit_json(report.to_json())
    else:
        verdict = "up to date, nothing to do" if report.up_to_date else ("ok" if report.ok else "FAILED")
        echo_result(f"playbook {report.playbook}: {verdict} ({len(report.steps)}/{len(planned)} steps run)")
        say(f"journal: {report.journal}")
    if not report.ok:
        raise SystemExit(report.exit_code)


def _with_refusal_documents(playbook: str, uri: str, report_path: Path | None, junit_path: Path | None, run: Callable[[], Any]) -> Any:
    """Run ``run``; a refusal before any step (an invalid file or --var) still writes the report and JUnit."""
    try:
        return run()
    except OmnigraphError as refused:
        document, junit = refusal_documents(playbook, uri, refused)
        if report_path is not None:
            report_path.write_text(json.dumps(document, sort_keys=True, indent=2) + "\n", encoding="utf-8")
        if junit_path is not None:
            junit_path.write_bytes(junit)
        raise


def _artifacts(report_path: Path | None, junit_path: Path | None) -> RunArtifacts:
    """The report and JUnit files asked for, as absolute paths (a resume may run elsewhere)."""
    return RunArtifacts(report=str(report_path.resolve()) if report_path else None, junit=str(junit_path.resolve()) if junit_path else None)


yes_option = click.option("--yes", is_flag=True, help="Do not ask before acting (CI); confirmations count as given.")
holder_dead_option = click.option(
    "--holder-dead", is_flag=True, help="The operator has checked the claim's holder process is gone (--yes never answers that)."
)
report_option = click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), help="Write a JSON report.")
junit_option = click.option("--junit", "junit_path", type=click.Path(dir_okay=False, path_type=Path), help="Write JUnit XML.")
journal_root_option = click.option(
    "--journal",
    "journal_root",
    metavar="ROOT",
    help="Directory or s3:// prefix for run journals [default: $OMNIGRAPH_STATE_DIR/playbook-runs, "
    "else ~/.local/state/omnigraph/playbook-runs].",
)


@click.group("playbook")
def playbook_group() -> None:
    """Run a YAML runbook (upgrade, staging-rehearsal, resume-crashed, duplicate-repair), finish an interrupted run, list and show runs."""


@playbook_group.command("run")
@click.argument("playbook_file")
@click.argument("uri", metavar="GRAPH")
@yes_option
@holder_dead_option
@report_option
@junit_option
@journal_root_option
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="Set a playbook variable (repeatable).")
@answer_check_options
@json_option
@reports_errors
def run_command(
    playbook_file: str,
    uri: str,
    yes: bool,
    holder_dead: bool,
    report_path: Path | None,
    junit_path: Path | None,
    journal_root: str | None,
    variables: tuple[str, ...],
    queries_path: Path | None,
    query_params_path: Path | None,
    as_json: bool,
) -> None:
    """Run PLAYBOOK_FILE (a path or a bundled name) against GRAPH, step by step.

    --queries and --query-params set the variables queries and query_params (the answer check
    of the upgrade and staging-rehearsal playbooks), as absolute paths.
    """
    overrides = {}
    for setting in variables:
        name, sep, value = setting.partition("=")
        if not sep or not name:
            raise click.UsageError(f"--var takes NAME=VALUE, got {setting!r}")
        overrides[name] = value
    chosen_queries(queries_path, query_params_path)  # unusable files: refused before any step
    if queries_path is not None:
        overrides["queries"] = str(queries_path.resolve())
    if query_params_path is not None:
        overrides["query_params"] = str(query_params_path.resolve())

    def run() -> tuple[RunReport, list[tuple[str, str]]]:
        playbook, _ = load_playbook(playbook_file)
        report = run_playbook(
            playbook,
            playbook_file,
            uri,
            user=actor_name(),
            overrides=overrides,
            journal_root=journal_root or default_journal_root(),
            operator=_operator(yes, holder_dead, as_json),
            artifacts=_artifacts(report_path, junit_path),
            yes=yes,
        )
        return report, [(step.id, step.title) for step in playbook.steps]

    report, planned = _with_refusal_documents(playbook_file, uri, report_path, junit_path, run)
    if report.up_to_date:
        _name_unfinished_runs(report, journal_root or default_journal_root())
    _finish(report, planned, report_path, junit_path, as_json)


def _name_unfinished_runs(report: RunReport, root: str) -> None:
    """Name the earlier runs of the same playbook on the same graph that never finished.

    A run that found its goal already reached says so on stderr: their later steps (a smoke test
    or a release check) never ran.
    """
    for summary in list_runs(root):
        started = summary.started
        if (
            summary.state == "interrupted"
            and started is not None
            and started.run_id != report.run_id
            and started.playbook_name == report.playbook
            and started.graph == report.graph
        ):
            say(f"next: run {started.run_id} of this playbook never finished: `{command_to_resume(summary)}` runs its remaining steps")


@playbook_group.command(
    "resume",
    help="Finish the playbook run journalled at JOURNAL (ROOT/<run id>) whose runner died: the step it "
    "died in and every later one; the report and JUnit cover the whole run and go to the files the run was "
    "started with, unless --report/--junit name others.",
)
@click.argument("journal")
@yes_option
@holder_dead_option
@report_option
@junit_option
@json_option
@reports_errors
def resume_command(journal: str, yes: bool, holder_dead: bool, report_path: Path | None, junit_path: Path | None, as_json: bool) -> None:
    """``omnigraph-migrate playbook resume``: the run's remaining steps (``help`` says which), then its report.

    The report and JUnit go to ``--report``/``--junit``, else to the files the run was started with.
    """
    report, planned, artifacts = resume_run(journal, _operator(yes, holder_dead, as_json), _artifacts(report_path, junit_path))
    _finish(
        report,
        planned,
        Path(artifacts.report) if artifacts.report else None,
        Path(artifacts.junit) if artifacts.junit else None,
        as_json,
    )


@playbook_group.command("list")
@journal_root_option
@json_option
@reports_errors
def list_command(journal_root: str | None, as_json: bool) -> None:
    """List the playbook runs journalled under ROOT (oldest first) with their state."""
    runs = [summary.to_json() for summary in list_runs(journal_root or default_journal_root())]
    if as_json:
        emit_json({"runs": runs})
        return
    for run in runs:
        total = run["steps_total"] if run["steps_total"] is not None else "?"
        echo_result(
            f"{run['run_id']}  {run['state']:<11}  {run['playbook']}  {run['graph']}  "
            f"{len(run['steps_finished'])}/{total} steps  {run['journal']}"
        )


@playbook_group.command("show")
@click.argument("journal")
@json_option
@reports_errors
def show_command(journal: str, as_json: bool) -> None:
    """Show the run journalled at JOURNAL: what it was asked to do, every record, its state."""
    summary = summarize(open_run(journal))
    document = {
        **summary.to_json(),
        "start": summary.started.model_dump(mode="json") if summary.started else None,
        "records": [record.model_dump(mode="json") for record in summary.records],
    }
    if as_json:
        emit_json(document)
        return
    echo_result(f"run {document['run_id']}: playbook {document['playbook']} on {document['graph']}: {document['state']}")
    for seq, record in enumerate(summary.records, start=1):
        outcome = f" {record.status}: {record.detail}" if record.phase == "finished" else ""
        echo_result(f"{seq:>4}  {record.at}  {record.step:<14} {record.phase}{outcome}")
    if summary.state in ("interrupted", "failed"):
        say(f"next: `{command_to_resume(summary)}` finishes it")
