"""Playbook runs after the fact: list the journalled runs, show one, and finish one whose runner died.

A run is its journal (:mod:`omnigraph.playbooks.journal`) at ``<journal root>/<run id>``. Its state is
folded from the records: ``done`` (every step finished ok or skipped, or a step found the goal
already reached), ``failed`` (the last step finished failed), otherwise ``running`` while the
process that wrote its last record is alive on this host, else ``interrupted`` (its runner died
inside a step, or between two).

:func:`resume_run` finishes an unfinished run in this process: it refuses (``claim_held``, exit 3)
while the run's last writer is alive on this host, and (``bad_request``) a run that is done or
has no start document; otherwise it loads the same playbook with the same variables plus every
output the finished steps established, and runs from the first step that did not finish ok: the
step the runner died in runs again (each action checks what is already true, a migrate step
continues the migration the dead runner claimed), and a step whose goal already holds no longer
ends the run. The report then covers every step, those of earlier processes included (their
``data`` is not journalled and is empty), and is written, with the JUnit XML, to the files the
run was started with (``--report``/``--junit``, journalled in its start document) unless the
resume names others. A finished step the dead runner journalled but had not yet copied to the
migration's ledger stays only in the journal.

:func:`resume_command` is the one command that finishes a run (with ``--yes`` when the run was
started with it), as ``playbook show``, a re-run that finds its goal reached, and
``omnigraph-migrate status`` (:func:`interrupted_runs` of the graph) name it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from omnigraph.claims.liveness import alive_here
from omnigraph.engine.errors import BadRequest, ClaimHeld, NotFound
from omnigraph.engine.storage.store import open_store
from omnigraph.playbooks.journal import JournalRecord, RunArtifacts, RunJournal, RunStarted, Writer
from omnigraph.playbooks.model import load_playbook
from omnigraph.playbooks.runner import Operator, RunReport, StepReport, playbook_variables, run_steps

RunState = Literal["done", "failed", "interrupted", "running"]


def open_run(location: str) -> RunJournal:
    """The journal at ``location``: ``ROOT/<run id>``, a directory or ``s3://`` prefix, as a report's ``journal`` names it.

    ``bad_request`` for a location without a run id, ``not_found`` if nothing is journalled there.
    """
    root, _, run_id = location.rstrip("/").rpartition("/")
    if not root or not run_id:
        raise BadRequest(f"{location!r} is not a playbook run journal (ROOT/<run id>)", {"journal": location})
    journal = RunJournal(open_store(root), run_id)
    if journal.started() is None and not journal.records():
        raise NotFound(f"no playbook run journal at {location} (`omnigraph-migrate playbook list` lists the runs)", {"journal": location})
    return journal


@dataclass(frozen=True)
class RunSummary:
    """One run as its journal tells it."""

    journal: str
    started: RunStarted | None
    records: list[JournalRecord]
    state: RunState
    steps_total: int | None

    def to_json(self) -> dict[str, Any]:
        """The run's JSON document, as ``playbook list --json`` lists it (``playbook show --json`` adds to it)."""
        last = self.records[-1] if self.records else None
        return {
            "journal": self.journal,
            "run_id": self.started.run_id if self.started else (last.run_id if last else None),
            "playbook": self.started.playbook if self.started else (last.playbook if last else None),
            "graph": self.started.graph if self.started else (last.graph if last else None),
            "started_at": self.started.at if self.started else None,
            "state": self.state,
            "steps_finished": sorted({r.step for r in self.records if r.phase == "finished" and r.status != "failed"}),
            "steps_total": self.steps_total,
            "last": last.model_dump(mode="json") if last else None,
        }


def _writers(started: RunStarted | None, records: list[JournalRecord]) -> list[Writer]:
    found = [started.writer] if started else []
    return found + [r.writer for r in records if r.writer is not None]


def summarize(journal: RunJournal) -> RunSummary:
    """Fold ``journal`` into its :class:`RunSummary` (see the module docstring for the states)."""
    started = journal.started()
    records = journal.records()
    steps: list[str] | None = None
    if started is not None:
        try:
            steps = [step.id for step in load_playbook(started.playbook)[0].steps]
        except BadRequest:
            steps = None
    writers = _writers(started, records)
    last = records[-1] if records else None
    state: RunState
    if any(r.ends_run for r in records):
        state = "done"
    elif last is not None and last.phase == "finished" and last.status == "failed":
        state = "failed"
    elif steps is not None and last is not None and last.phase == "finished" and last.step == steps[-1]:
        state = "done"
    elif writers and alive_here(writers[-1].host, writers[-1].pid, writers[-1].process_start):
        state = "running"
    else:
        state = "interrupted"
    return RunSummary(journal.location, started, records, state, len(steps) if steps is not None else None)


def list_runs(root: str) -> list[RunSummary]:
    """Every run journalled under ``root``, oldest first (run ids are ULIDs)."""
    store = open_store(root)
    return [summarize(RunJournal(store, name)) for name in sorted(store.list("")) if not name.startswith(".")]


def resume_command(summary: RunSummary) -> str:
    """The command that finishes the run ``summary`` describes (see the module docstring)."""
    yes = " --yes" if summary.started is not None and summary.started.yes else ""
    return f"omnigraph-migrate playbook resume {summary.journal}{yes}"


def interrupted_runs(root: str, graph: str) -> list[RunSummary]:
    """The runs journalled under ``root`` on ``graph`` (a root URI) whose runner died, oldest first."""
    store = open_store(root)
    if not store.exists(""):
        return []
    return [s for s in list_runs(root) if s.state == "interrupted" and s.started is not None and s.started.graph == graph]


def resume_run(
    location: str, operator: Operator, artifacts: RunArtifacts | None = None
) -> tuple[RunReport, list[tuple[str, str]], RunArtifacts]:
    """Finish the run journalled at ``location`` (see the module docstring).

    Returns the report, the playbook's planned steps ``(id, title)`` and the files to write them
    to: those of ``artifacts`` that are set, else those the run was started with.
    """
    journal = open_run(location)
    summary = summarize(journal)
    started = summary.started
    if started is None:
        raise BadRequest(f"{location} has no start document: it was journalled by an older release and cannot be resumed")
    if summary.state == "running":
        writer = _writers(started, summary.records)[-1]
        raise ClaimHeld(
            f"playbook run {started.run_id} is still running: process {writer.pid} on this host wrote its last record; "
            "let it finish, or stop it and make sure it is gone, then resume",
            {"journal": location, "writer": writer.model_dump(mode="json")},
        )
    if summary.state == "done":
        raise BadRequest(
            f"playbook run {started.run_id} is done; nothing to resume (`omnigraph-migrate playbook show {location}`)",
            {"journal": location},
        )
    chosen = artifacts or RunArtifacts()
    artifacts = RunArtifacts(report=chosen.report or started.artifacts.report, junit=chosen.junit or started.artifacts.junit)
    playbook, _ = load_playbook(started.playbook)
    variables = playbook_variables(playbook, started.graph, started.user, started.overrides, started.run_id)
    done: dict[str, JournalRecord] = {}
    for record in summary.records:
        if record.phase == "finished":
            variables.update(record.outputs)
            if record.status in ("ok", "skipped"):
                done[record.step] = record
            else:
                done.pop(record.step, None)
    first = next((i for i, step in enumerate(playbook.steps) if step.id not in done), len(playbook.steps))
    report = RunReport(playbook.name, started.graph, started.run_id, time.time())
    for step in playbook.steps[:first]:
        record = done[step.id]
        assert record.status is not None
        report.steps.append(StepReport(step.id, step.title, step.action, record.status, record.detail, record.duration_seconds))
    # Once a step named the migration, every step finished until then was linked to its ledger, and
    # each later one as it finished: all of them up to the last finished record naming it.
    finished = [r for r in summary.records if r.phase == "finished"]
    linked = max((i + 1 for i, r in enumerate(finished) if r.migration_id is not None), default=0)
    run_steps(
        playbook,
        started.playbook,
        variables,
        journal,
        report,
        operator,
        first=first,
        resumed_from=tuple(_writers(started, summary.records)),
        linked=linked,
        artifacts=artifacts,
    )
    return report, [(step.id, step.title) for step in playbook.steps], artifacts
