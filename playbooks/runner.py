"""Run a playbook step by step: show, (ask,) record, act, record, stop at the first failure.

For each step the runner prints what it will do; a step with ``confirm: true`` asks before it
acts unless ``--yes``; when nobody can answer (no ``--yes``, stdin not a terminal) the step fails
as a usage error (exit 2) naming ``--yes``, before it acts. Every step is recorded in the run's durable journal
(:mod:`omnigraph.playbooks.journal`, under ``journal_root``) before it acts and again with its outcome, and every finished step is
also recorded as a ``playbook_step`` in the migration ledger as soon as a migration is known
(steps before that are read back from the journal then). A failed step stops the playbook and
prints the exact next command; the JSON report and JUnit XML describe the whole run.
Failpoints ``playbook.acting.<step id>`` (recorded, not acted on) and
``playbook.finished.<step id>`` (outcome recorded) end the runner at each step.
"""

from __future__ import annotations

import string
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from omnigraph import migrate
from omnigraph.engine.errors import EXIT_ERROR, EXIT_USAGE, BadRequest, NotFound, OmnigraphError
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.progress import Progress
from omnigraph.engine.schema.ids import new_ulid
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.records import PlaybookStep
from omnigraph.playbooks.actions import ACTIONS, AnswerUnavailable, StepContext, StepFailed, StepResult
from omnigraph.playbooks.journal import JournalRecord, RunArtifacts, RunJournal, RunStarted, Writer, this_writer
from omnigraph.playbooks.model import Playbook, Step

StepStatus = Literal["ok", "failed", "skipped"]


@dataclass
class StepReport:
    """How one step of a run ended: its status, summary, duration, report data and the next command if it failed."""

    id: str
    title: str
    action: str
    status: StepStatus
    summary: str
    duration_seconds: float
    data: dict[str, Any] = field(default_factory=dict)
    next_command: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The step's entry in the run's JSON report."""
        return {
            "id": self.id,
            "title": self.title,
            "action": self.action,
            "status": self.status,
            "summary": self.summary,
            "duration_seconds": self.duration_seconds,
            "data": self.data,
            "next_command": self.next_command,
        }


@dataclass
class RunReport:
    """A whole run: the playbook, the graph, every step's report, the exit code and where the run is recorded."""

    playbook: str
    graph: str
    run_id: str
    started_at: float
    finished_at: float = 0.0
    steps: list[StepReport] = field(default_factory=list)
    exit_code: int = 0
    recorded_in: str | None = None
    up_to_date: bool = False
    journal: str | None = None

    @property
    def ok(self) -> bool:
        """True if the run succeeded (exit code 0)."""
        return self.exit_code == 0

    @property
    def outage_seconds(self) -> float | None:
        """How long the migration's barrier held writers off, as the step that finished it reported (None if none did)."""
        reported = [step.data["outage_seconds"] for step in self.steps if isinstance(step.data.get("outage_seconds"), (int, float))]
        return reported[-1] if reported else None

    def to_json(self) -> dict[str, Any]:
        """The run's JSON report (``--report`` and ``--json``)."""
        return {
            "playbook": self.playbook,
            "graph": self.graph,
            "run_id": self.run_id,
            "ok": self.ok,
            "status": "up_to_date" if self.up_to_date and self.ok else ("ok" if self.ok else "failed"),
            "exit_code": self.exit_code,
            "duration_seconds": round(self.finished_at - self.started_at, 3),
            "outage_seconds": self.outage_seconds,
            "recorded_in_ledger": self.recorded_in,
            "journal": self.journal,
            "steps": [step.to_json() for step in self.steps],
        }


class _LedgerLink:
    """Appends the run's finished steps, read back from its journal, to the migration's ledger.

    Nothing is appended until a migration (graph, id, token) is known and its ledger has a first
    record; then every finished step so far is, and each later one as it finishes. Steps themselves append to the same ledger
    (run, resume, repair), so every append opens the ledger afresh to find its current end.
    """

    def __init__(self, playbook: str, journal: RunJournal, linked: int = 0):
        self.playbook = playbook
        self.journal = journal
        self.linked = linked
        self.target: tuple[str, str, str] | None = None
        self.location: str | None = None

    def sync(self, variables: dict[str, str]) -> None:
        if self.target is None and {"migration_graph", "migration_id", "token"} <= variables.keys():
            self.target = (variables["migration_graph"], variables["migration_id"], variables["token"])
            ledger = migrate.migration_ledger(self.target[0], self.target[1])
            self.location = f"{ledger.store.uri}/{ledger.directory}"
        if self.target is None:
            return
        graph, migration_id, token = self.target
        finished = [r for r in self.journal.records() if r.phase == "finished"]
        ledger = migrate.migration_ledger(graph, migration_id)
        try:
            ledger.replay()
        except NotFound:
            return  # its holder died before the first record: linked once a resume starts the ledger
        for record in finished[self.linked :]:
            assert record.status is not None
            ledger.append(
                PlaybookStep(
                    token=token,
                    migration_id=migration_id,
                    playbook=self.playbook,
                    step=record.step,
                    status=record.status,
                    detail=record.detail,
                )
            )
        self.linked = len(finished)


def _expand(value: str, variables: dict[str, str], step: Step) -> str:
    try:
        return string.Template(value).substitute(variables)
    except KeyError as missing:
        raise StepFailed(
            f"step {step.id} needs variable {missing.args[0]!r}, which is not set",
            f"rerun with --var {missing.args[0]}=VALUE",
        ) from None


def playbook_variables(playbook: Playbook, uri: str, user: str, overrides: dict[str, str], run_id: str | None = None) -> dict[str, str]:
    """The run's variables: the built-ins, the playbook's defaults, then ``overrides`` (``--var``).

    The built-ins are ``graph``, ``run_id`` (new unless given) and ``user``. An unknown override is
    ``bad_request``.
    """
    settable = playbook.settable_variables()
    unknown = sorted(set(overrides) - settable)
    if unknown:
        raise BadRequest(
            f"--var {', '.join(unknown)}: not a variable of playbook {playbook.name} "
            f"(settable: {', '.join(sorted(settable)) or 'none'}; graph, run_id and user are built in)",
            {"unknown": unknown, "settable": sorted(settable)},
        )
    variables = {"graph": uri, "run_id": run_id or new_ulid(), "user": user}
    for name, spec in sorted(playbook.variables.items()):
        if name in overrides:
            continue
        if spec.default is not None:
            variables[name] = string.Template(spec.default).safe_substitute(variables)
    variables.update(overrides)
    return variables


def _journal_record(
    playbook: Playbook,
    variables: dict[str, str],
    step: Step,
    phase: Literal["acting", "finished"],
    outcome: StepReport | None = None,
    outputs: dict[str, str] | None = None,
    exit_code: int = 0,
    ends_run: bool = False,
) -> JournalRecord:
    return JournalRecord(
        run_id=variables["run_id"],
        playbook=playbook.name,
        graph=variables["graph"],
        step=step.id,
        phase=phase,
        status=outcome.status if outcome else None,
        detail=outcome.summary if outcome else "",
        migration_id=variables.get("migration_id"),
        outputs=dict(sorted((outputs or {}).items())),
        exit_code=exit_code,
        next_command=outcome.next_command if outcome else None,
        duration_seconds=outcome.duration_seconds if outcome else 0.0,
        ends_run=ends_run,
        writer=this_writer(),
    )


@dataclass
class Operator:
    """How a run reaches its operator: questions, progress and the human channel."""

    ask: Callable[[str], bool]
    holder_dead: Callable[[str], bool | None]
    progress: Progress
    say: Callable[[str], None]


def run_playbook(
    playbook: Playbook,
    playbook_path: str,
    uri: str,
    *,
    user: str,
    overrides: dict[str, str],
    journal_root: str,
    operator: Operator,
    artifacts: RunArtifacts | None = None,
    yes: bool = False,
) -> RunReport:
    """Run every step in order until one fails; returns the report (never raises for a step).

    The run's start is journalled first (:class:`~omnigraph.playbooks.journal.RunStarted`, with the
    ``artifacts`` the caller writes at the end and whether ``yes`` was given), so that ``playbook
    resume`` can finish it, and write them, if this process dies.
    """
    artifacts = artifacts or RunArtifacts()
    variables = playbook_variables(playbook, open_store(uri).uri, user, overrides)
    report = RunReport(playbook.name, variables["graph"], variables["run_id"], time.time())
    journal = RunJournal(open_store(journal_root), variables["run_id"])
    journal.start(
        RunStarted(
            run_id=variables["run_id"],
            playbook=playbook_path,
            playbook_name=playbook.name,
            graph=variables["graph"],
            overrides=dict(sorted(overrides.items())),
            user=user,
            writer=this_writer(),
            artifacts=artifacts,
            yes=yes,
        )
    )
    return run_steps(playbook, playbook_path, variables, journal, report, operator, artifacts=artifacts)


def run_steps(
    playbook: Playbook,
    playbook_path: str,
    variables: dict[str, str],
    journal: RunJournal,
    report: RunReport,
    operator: Operator,
    *,
    first: int = 0,
    resumed_from: tuple[Writer, ...] = (),
    linked: int = 0,
    artifacts: RunArtifacts | None = None,
) -> RunReport:
    """Run the steps of ``playbook`` from index ``first`` until one fails, adding to ``report``.

    ``resumed_from`` are the processes that ran this run before (a ``playbook resume``): a step
    whose goal already holds then counts as done and the run goes on to its later steps (the
    smoke test and release check after a migration a crash interrupted), and a migrate step
    continues a migration whose claim one of them took. ``linked`` finished steps of the journal
    are already in the migration's ledger. A failed step's next command keeps the run's
    ``artifacts`` flags.
    """
    link = _LedgerLink(playbook.name, journal, linked)
    context = StepContext(
        variables,
        playbook_path,
        operator.ask,
        operator.progress,
        operator.say,
        operator.holder_dead,
        resumed_from,
        journal.location,
        (artifacts or RunArtifacts()).flags(),
    )
    say = operator.say
    total = len(playbook.steps)
    for number, step in enumerate(playbook.steps[first:], start=first + 1):
        say(f"\n[{number}/{total}] {step.title}")
        say(f"    {string.Template(step.explain.strip()).safe_substitute(variables)}")
        started = time.time()
        finished = False
        outputs: dict[str, str] = {}
        try:
            params = {name: _expand(value, variables, step) for name, value in sorted(step.params.items())}
            if step.confirm and not operator.ask(f"Run step '{step.title}' now?"):
                raise StepFailed(f"the operator declined step {step.id}", context.rerun())
            journal.append(_journal_record(playbook, variables, step, "acting"))
            failpoint(f"playbook.acting.{step.id}")
            result: StepResult = ACTIONS[step.action](context, params)
        except AnswerUnavailable as unanswered:
            outcome = StepReport(
                step.id,
                step.title,
                step.action,
                "failed",
                f"step {step.id} asks {unanswered.question!r}, but stdin is not a terminal and --yes was not "
                "given: nothing was done; run it again with --yes to answer yes (or from a terminal)",
                round(time.time() - started, 3),
                {},
                context.rerun("--yes"),
            )
            report.exit_code = EXIT_USAGE
        except StepFailed as failure:
            outputs = failure.outputs
            outcome = StepReport(
                step.id,
                step.title,
                step.action,
                "failed",
                failure.summary,
                round(time.time() - started, 3),
                failure.data,
                failure.next_command,
            )
            report.exit_code = failure.exit_code
        except OmnigraphError as error:
            outcome = StepReport(
                step.id,
                step.title,
                step.action,
                "failed",
                error.message,
                round(time.time() - started, 3),
                error.details,
                f"omnigraph-migrate status {variables['graph']}",
            )
            report.exit_code = error.exit_code
        except Exception as error:
            outcome = StepReport(
                step.id,
                step.title,
                step.action,
                "failed",
                f"internal error: {type(error).__name__}: {error}",
                round(time.time() - started, 3),
                {},
                f"omnigraph-migrate status {variables['graph']} (and report this error)",
            )
            report.exit_code = EXIT_ERROR
        else:
            outputs = result.outputs
            finished = result.finished and not resumed_from
            status: StepStatus = "skipped" if result.skipped else "ok"
            outcome = StepReport(step.id, step.title, step.action, status, result.summary, round(time.time() - started, 3), result.data)
        variables.update(outputs)
        report.steps.append(outcome)
        journal.append(_journal_record(playbook, variables, step, "finished", outcome, outputs, report.exit_code, finished))
        link.sync(variables)
        failpoint(f"playbook.finished.{step.id}")
        if outcome.status == "failed":
            say(f"    FAILED: {outcome.summary}")
            say(f"    next: {outcome.next_command}")
            break
        say(f"    {outcome.status}: {outcome.summary}")
        if finished:
            report.up_to_date = True
            say("    nothing left to do: no later step runs")
            break
    report.finished_at = time.time()
    report.recorded_in = link.location
    report.journal = journal.location
    if report.exit_code == 0 and any(s.status == "failed" for s in report.steps):
        report.exit_code = EXIT_ERROR
    return report
