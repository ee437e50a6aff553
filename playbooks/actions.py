"""What a playbook step can do: one function per action, registered in :data:`ACTIONS`.

An action gets the step's expanded parameters and the run's context, does its work through the
migrator and engine APIs (never by shelling out), and returns a :class:`StepResult`. A failure is
a :class:`StepFailed` carrying the exact next command for the operator; errors of the toolkit
that an action does not translate are reported by the runner with a generic next command.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnigraph.claims.acting import refuse_if_acting
from omnigraph.claims.claim import inspect
from omnigraph.claims.document import ClaimDocument
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import (
    EXIT_CLAIM_HELD,
    EXIT_ERROR,
    EXIT_VALIDATION_FAILED,
    ClaimHeld,
    KeyConflict,
    OmnigraphError,
)
from omnigraph.engine.graph import Graph, open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import MAIN
from omnigraph.engine.ops.branches import create_branch, delete_branch
from omnigraph.engine.ops.export import export_lines
from omnigraph.engine.ops.load import load
from omnigraph.engine.progress import Progress
from omnigraph.engine.reconcile import recovery
from omnigraph.engine.storage.store import copy_root, open_store
from omnigraph.ledger.render import render_table
from omnigraph.migrator import inspection, layout, repair
from omnigraph.migrator.inspection import UpToDate
from omnigraph.migrator.layout import CLAIM_PATH
from omnigraph.migrator.run import MigrationOutcome, resume_migration, run_migration
from omnigraph.migrator.verify import AnswerQueries
from omnigraph.playbooks.journal import Writer


@dataclass(frozen=True)
class StepResult:
    """A finished step: one-line summary, data for the report, variables for later steps.

    ``finished``: the playbook's goal already holds (an upgrade of a graph already at format 5);
    the runner stops with success and runs no later step.
    """

    summary: str
    data: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    skipped: bool = False
    finished: bool = False


class StepFailed(Exception):
    """A step that did not achieve its goal; ``next_command`` is what the operator runs next.

    ``outputs`` are variables the failed step still established (a migration that stopped holding
    its claim), so that the run is recorded in that migration's ledger.
    """

    def __init__(
        self,
        summary: str,
        next_command: str,
        exit_code: int = EXIT_ERROR,
        data: dict[str, Any] | None = None,
        outputs: dict[str, str] | None = None,
    ):
        super().__init__(summary)
        self.summary = summary
        self.next_command = next_command
        self.exit_code = exit_code
        self.data = data or {}
        self.outputs = outputs or {}


class AnswerUnavailable(Exception):
    """The operator cannot be asked (``--yes`` not given and stdin is not a terminal)."""

    def __init__(self, question: str):
        super().__init__(question)
        self.question = question


@dataclass
class StepContext:
    """What an action may use: variables, the operator, progress and the human channel."""

    variables: dict[str, str]
    playbook_path: str
    ask: Callable[[str], bool]
    """Asks the operator a yes/no question; raises :class:`AnswerUnavailable` when nobody can answer."""
    progress: Progress
    say: Callable[[str], None]
    holder_dead: Callable[[str], bool | None]
    """Answers "is the claim's holder dead?": True/False, or None when it may not be asked
    (``--yes`` without ``--holder-dead``: ``--yes`` never answers it)."""
    resumed_from: tuple[Writer, ...] = ()
    """The processes that ran this run before, when it is a ``playbook resume``."""
    journal: str = ""
    """Where this run is journalled (``ROOT/<run id>``)."""

    @property
    def actor(self) -> str:
        return self.variables["user"]

    def rerun(self, *flags: str, **extra: str) -> str:
        """The command that runs this playbook again (with flags and extra --var settings); in a
        resumed run, the command that resumes it again (its variables are the journalled ones)."""
        settings = "".join(f" {flag}" for flag in flags)
        if self.resumed_from:
            return f"omnigraph-migrate playbook resume {self.journal}{settings}"
        settings += "".join(f" --var {name}={value}" for name, value in sorted(extra.items()))
        return f"omnigraph-migrate playbook run {self.playbook_path} {self.variables['graph']}{settings}"


Action = Callable[[StepContext, dict[str, str]], StepResult]


def _flag(params: dict[str, str], name: str) -> bool:
    return params.get(name, "false").lower() in ("1", "true", "yes")


def _claim_outputs(graph: str) -> dict[str, str]:
    holder = inspect(open_store(graph), CLAIM_PATH)
    if holder is None:
        return {}
    return {"token": holder.token, "migration_id": holder.migration_id, "migration_graph": graph}


def _repair_route(graph: str) -> str:
    """Duplicates are repaired behind the barrier: a run stops at validation holding it."""
    return (
        f"stop every writer, then `omnigraph-migrate run {graph}` (it stops at validation "
        f"and keeps the barrier), then `omnigraph-migrate playbook run duplicate-repair {graph}`"
    )


def preflight(ctx: StepContext, params: dict[str, str]) -> StepResult:
    graph = params["graph"]
    try:
        up_to_date = inspection.up_to_date(graph)
        if up_to_date is not None:
            return StepResult(up_to_date.message, up_to_date.to_json(), finished=True)
        document = inspection.preflight(graph, _flag(params, "validate"), ctx.progress)
    except OmnigraphError as error:
        next_command = {
            "claim_held": f"omnigraph-migrate playbook run resume-crashed {graph}",
            "format_refused": f"omnigraph-migrate verify {graph}",
            "recovery_required": f"omnigraph recover {graph}",
            "validation_failed": _repair_route(graph),
        }.get(error.code, f"omnigraph-migrate status {graph}")
        raise StepFailed(f"not ready: {error.message}", next_command, error.exit_code, error.details) from error
    summary = f"format 4, {len(document['branches'])} branch(es), {len(document['units'])} unit(s), {document['images']} image(s)" + (
        ", no duplicate or null ids" if "inventory" in document else ""
    )
    return StepResult(summary, {"branches": len(document["branches"]), "units": len(document["units"])})


def confirm(ctx: StepContext, params: dict[str, str]) -> StepResult:
    question = params["question"]
    if not ctx.ask(question):
        raise StepFailed(f"not confirmed: {question}", ctx.rerun())
    return StepResult(f"confirmed: {question}")


def confirm_holder_dead(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Ask whether the claim's holder is dead; refused outright while it is alive on this host.

    ``--yes`` alone never answers this question: it needs ``--holder-dead`` or an interactive yes.
    """
    graph, question = params["graph"], params["question"]
    holder = inspect(open_store(graph), CLAIM_PATH)
    if holder is None:
        raise StepFailed(f"no migration claim on {graph}: there is no holder", f"omnigraph-migrate status {graph}")
    try:
        refuse_if_acting(open_store(graph), CLAIM_PATH, holder, "go on")
    except ClaimHeld as alive:
        raise StepFailed(alive.message, ctx.rerun(), alive.exit_code, alive.details) from alive
    answer = ctx.holder_dead(question)
    if answer is None:
        raise StepFailed(
            f"--yes does not answer whether the holder (pid {holder.pid} on {holder.host}) is dead; "
            "check that its process is gone, then confirm it explicitly with --holder-dead",
            ctx.rerun("--yes", "--holder-dead"),
            EXIT_CLAIM_HELD,
            {"holder": holder.model_dump(mode="json")},
        )
    if not answer:
        raise StepFailed(f"not confirmed: {question}", ctx.rerun())
    return StepResult(f"confirmed dead: {holder.owner}'s process {holder.pid} on {holder.host}")


def _own_claim(ctx: StepContext, graph: str) -> ClaimDocument | None:
    """The migration claim of ``graph`` if a process that ran this playbook run before took it
    (a resumed run whose runner died mid-migration), else None."""
    holder = inspect(open_store(graph), CLAIM_PATH)
    if holder is None:
        return None
    taken_by = (holder.host, holder.pid, holder.process_start)
    return holder if any((w.host, w.pid, w.process_start) == taken_by for w in ctx.resumed_from) else None


def _answer_queries(params: dict[str, str]) -> AnswerQueries | None:
    """The answer check the step's ``queries`` / ``query_params`` name (None when empty)."""
    if not params.get("queries"):
        return None
    return AnswerQueries.from_files(Path(params["queries"]), Path(params["query_params"]) if params.get("query_params") else None)


def migrate(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Run the migration; in a resumed run, continue the one this run's dead runner claimed
    (``resume`` refuses if that process is alive after all). ``queries`` (and ``query_params``)
    name the answer check's files."""
    graph = params["graph"]
    try:
        queries = _answer_queries(params)
        own = _own_claim(ctx, graph)
        if own is not None:
            outcome: MigrationOutcome | UpToDate = resume_migration(graph, own.token, ctx.actor, ctx.progress, queries=queries)
        else:
            outcome = run_migration(graph, params["owner"], ctx.progress, queries=queries)
    except OmnigraphError as error:
        outputs = _claim_outputs(graph)
        if error.code == "validation_failed":
            next_command = f"omnigraph-migrate playbook run duplicate-repair {graph}"
        elif error.code == "answers_changed" and outputs:
            next_command = f"find what changed the rows, then omnigraph-migrate abort {graph} --token {outputs['token']}"
        elif error.code == "drift_detected" and outputs:
            next_command = f"stop every writer, then omnigraph-migrate abort {graph} --token {outputs['token']}, then rerun"
        elif outputs:
            next_command = f"omnigraph-migrate playbook run resume-crashed {graph}"
        else:
            next_command = f"omnigraph-migrate status {graph}"
        raise StepFailed(error.message, next_command, error.exit_code, error.details, outputs) from error
    if isinstance(outcome, UpToDate):
        return StepResult(outcome.message, outcome.to_json(), finished=True)
    outputs = {"token": outcome.token, "migration_id": outcome.migration_id, "migration_graph": graph}
    return StepResult(f"migrated {outcome.units} unit(s) over {outcome.images} image(s); stamp 5", outcome.to_json(), outputs)


def resume(ctx: StepContext, params: dict[str, str]) -> StepResult:
    graph, token = params["graph"], params["token"]
    try:
        outcome = resume_migration(graph, token, ctx.actor, ctx.progress)
    except OmnigraphError as error:
        raise StepFailed(
            error.message, f"omnigraph-migrate status {graph}", error.exit_code, error.details, _claim_outputs(graph)
        ) from error
    outputs = {"token": token, "migration_id": outcome.migration_id, "migration_graph": graph}
    return StepResult(f"migration {outcome.migration_id} completed: {outcome.units} unit(s); stamp 5", outcome.to_json(), outputs)


def verify(ctx: StepContext, params: dict[str, str]) -> StepResult:
    graph = params["graph"]
    try:
        document = inspection.verify(graph)
    except OmnigraphError as error:
        raise StepFailed(error.message, f"omnigraph-migrate status {graph}", error.exit_code, error.details) from error
    return StepResult(f"every live table on every branch is fenced (stamp {document['stamp']})", document)


def _first_row(graph: Graph, branch: str) -> bytes | None:
    """One exported node row of ``branch`` (as a JSONL line), or None if it has no node rows."""
    for table_key in graph.catalog.table_keys():
        if table_key.startswith("node:"):
            for line in export_lines(graph, branch, [table_key.split(":", 1)[1]]):
                return (line + "\n").encode()
    return None


def _smoke_on(graph: Graph, branch: str, line: bytes) -> dict[str, Any]:
    before = list(export_lines(graph, branch))
    written = load(graph, line, mode="merge", branch=branch, actor="playbook smoke test")
    try:
        load(graph, line, mode="append", branch=branch, actor="playbook smoke test")
    except KeyConflict:
        fenced = True
    else:
        fenced = False
    after = list(export_lines(graph, branch))
    if not fenced or after != before:
        raise StepFailed(
            f"smoke test on {branch}: the strict re-insert {'was refused' if fenced else 'was NOT refused'}, "
            f"rows {'unchanged' if after == before else 'CHANGED'}",
            f"omnigraph-migrate verify {graph.store.uri}",
        )
    return {"branch": branch, "commit": written.commits[0].commit_id, "rows": len(after)}


def smoke_test(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """A fenced upsert (same values) and a refused strict insert, then a read, on main and a branch."""
    graph = open_graph(params["graph"], FENCED_PROFILE, write=True)
    line = _first_row(graph, MAIN)
    if line is None:
        return StepResult("skipped: main has no node rows to write back", skipped=True)
    branch = f"smoke-{ctx.variables['run_id'].lower()}"
    results = [_smoke_on(graph, MAIN, line)]
    create_branch(graph, branch)
    try:
        results.append(_smoke_on(graph, branch, line))
    finally:
        delete_branch(graph, branch)
    return StepResult(
        "fenced write and read on main and on a temporary branch; a duplicate insert was refused on both",
        {"checks": results},
    )


def release(ctx: StepContext, params: dict[str, str]) -> StepResult:
    graph = params["graph"]
    store = open_store(graph)
    stamp, _ = Manifest(store).read_stamp()
    holder = inspect(store, CLAIM_PATH)
    pending = recovery.list_intents(store)
    if stamp != "5" or holder is not None or pending:
        raise StepFailed(
            f"not releasable: stamp {stamp}, claim {'held' if holder else 'free'}, {len(pending)} pending write(s)",
            f"omnigraph-migrate status {graph}",
        )
    return StepResult("stamp 5, no claim, nothing pending: restart writers with the format-5 omnigraph only")


def copy(ctx: StepContext, params: dict[str, str]) -> StepResult:
    source, destination = params["source"], params["destination"]
    try:
        copied = copy_root(open_store(source), open_store(destination))
    except OmnigraphError as error:
        raise StepFailed(error.message, f"choose an empty staging root: {ctx.rerun(staging='URI')}", error.exit_code) from error
    size = sum(s for _, s in copied)
    return StepResult(f"copied {len(copied)} objects ({size} bytes) to {destination}", {"objects": len(copied), "bytes": size})


def status(ctx: StepContext, params: dict[str, str]) -> StepResult:
    graph = params["graph"]
    document, replay = inspection.status(graph)
    if replay is not None:
        ctx.say(render_table(replay).rstrip())
    claim = document["claim"]
    if claim is None and _flag(params, "require_claim"):
        raise StepFailed(
            f"no migration holds a claim on {graph} (stamp {document['stamp']})",
            _repair_route(graph) if document["stamp"] == "4" else f"omnigraph-migrate status {graph}",
        )
    holder = f"claim held by {claim['owner']} on {claim['host']} pid {claim['pid']}" if claim else "no claim"
    summary = f"stamp {document['stamp']}, {holder}, units {document['units_by_state'] or 'none'}"
    return StepResult(summary, {k: document[k] for k in ("stamp", "claim", "migration_id", "units_by_state")}, _claim_outputs(graph))


def ledger_story(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """What the ledger says happened, in one paragraph."""
    document, replay = inspection.status(params["graph"])
    claim = document["claim"]
    if replay is None and claim is not None:
        story = (
            f"migration {claim['migration_id']} by {claim['owner']}: its process took the claim and wrote no "
            "ledger record; nothing else was done (stamp 5 not written)"
        )
        return StepResult(story, {"phase": None, "completed": 0, "units": 0})
    if replay is None:
        raise StepFailed("no migration ledger on this graph", f"omnigraph-migrate status {params['graph']}")
    state = replay.state
    last_seq, last = replay.records[-1]
    completed = sorted(u for u, s in state.units.items() if s.status == "completed")
    with_sidecar = set(layout.remaining(open_store(params["graph"]), state.migration_id))
    in_progress = sorted(
        f"{u} (after {s.last_step})" if s.status == "in_progress" else f"{u} (sidecar written)"
        for u, s in state.units.items()
        if s.status == "in_progress" or (s.status != "completed" and u in with_sidecar)
    )
    story = (
        f"migration {state.migration_id} by {state.owner}: phase {state.phase}; "
        f"{len(completed)}/{len(state.units)} unit(s) completed"
        + (f"; interrupted in {', '.join(in_progress)}" if in_progress else "")
        + f"; last record #{last_seq} {last.kind} at {last.at}"
        + ("; stamp 5 written" if state.stamp_written else "; stamp 5 not written")
    )
    return StepResult(story, {"phase": state.phase, "completed": len(completed), "units": len(state.units)})


def duplicates(ctx: StepContext, params: dict[str, str]) -> StepResult:
    document = inspection.duplicates(params["graph"], ctx.progress)
    entries = document["inventory"]
    for entry in entries:
        ctx.say(
            f"  {entry['entity_kind']} {entry['type_name']} {entry['entity_id']!r}: {entry['problem']}, {entry['rows']} rows, "
            f"branches {', '.join(entry['graph_branches'])}"
        )
    return StepResult(f"{len(entries)} duplicate or null id(s)", {"inventory": entries})


def repair_decisions(ctx: StepContext, params: dict[str, str]) -> StepResult:
    graph, token, path = params["graph"], params["token"], Path(params["decisions"])
    if not path.exists():
        decisions = repair.template(graph, token, ctx.progress)
        repair.write_decisions(path, decisions)
        raise StepFailed(
            f"wrote a decisions template with {len(decisions.decisions)} entr(ies) to {path}; nothing is "
            "repaired until every entry has an action",
            f"edit {path}, then: {ctx.rerun(decisions=str(path))}",
            EXIT_VALIDATION_FAILED,
        )
    try:
        decisions = repair.read_decisions(path)
    except OmnigraphError as error:
        raise StepFailed(error.message, f"fix {path}, then: {ctx.rerun(decisions=str(path))}", error.exit_code) from error
    undecided = [d for d in decisions.decisions if d.action is None]
    if undecided:
        raise StepFailed(
            f"{len(undecided)} entr(ies) of {path} have no action; nothing was applied",
            f"edit {path}, then: {ctx.rerun(decisions=str(path))}",
            EXIT_VALIDATION_FAILED,
        )
    return StepResult(f"{len(decisions.decisions)} decision(s) read from {path}")


def repair_apply(ctx: StepContext, params: dict[str, str]) -> StepResult:
    graph, token, path = params["graph"], params["token"], Path(params["decisions"])
    try:
        applied = repair.apply(graph, token, repair.read_decisions(path), ctx.actor)
    except OmnigraphError as error:
        raise StepFailed(error.message, f"fix {path}, then: {ctx.rerun(decisions=str(path))}", error.exit_code, error.details) from error
    return StepResult(f"{len(applied)} repair commit(s) recorded", {"commits": [json.loads(r.model_dump_json()) for r in applied]})


def validate(ctx: StepContext, params: dict[str, str]) -> StepResult:
    graph = params["graph"]
    document = inspection.duplicates(graph, ctx.progress)
    if document["inventory"]:
        raise StepFailed(
            f"{len(document['inventory'])} duplicate or null id(s) remain",
            f"omnigraph-migrate duplicates {graph}",
            EXIT_VALIDATION_FAILED,
            {"inventory": document["inventory"]},
        )
    return StepResult(f"no duplicate or null ids in {document['images']} image(s)")


ACTIONS: dict[str, Action] = {
    "confirm": confirm,
    "confirm-holder-dead": confirm_holder_dead,
    "copy": copy,
    "duplicates": duplicates,
    "ledger-story": ledger_story,
    "migrate": migrate,
    "preflight": preflight,
    "release": release,
    "repair-apply": repair_apply,
    "repair-decisions": repair_decisions,
    "resume": resume,
    "smoke-test": smoke_test,
    "status": status,
    "validate": validate,
    "verify": verify,
}
