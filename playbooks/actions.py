"""What a playbook step can do: one function per action, registered in :data:`ACTIONS`.

An action gets the step's expanded parameters and the run's context, does its work through the
``omnigraph`` API, :mod:`omnigraph.migrate` (the one door into the migrator) and the engine
(never by shelling out), and returns a :class:`StepResult`. A failure is a :class:`StepFailed`
carrying the exact next command for the operator; errors of the toolkit that an action does not
translate are reported by the runner with a generic next command.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import omnigraph
from omnigraph import migrate
from omnigraph.claims.acting import refuse_if_acting
from omnigraph.claims.claim import inspect
from omnigraph.claims.document import ClaimDocument
from omnigraph.engine.errors import (
    EXIT_CLAIM_HELD,
    EXIT_ERROR,
    EXIT_USAGE,
    EXIT_VALIDATION_FAILED,
    BadRequest,
    ClaimHeld,
    KeyConflict,
    OmnigraphError,
)
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import MAIN
from omnigraph.engine.progress import Progress
from omnigraph.engine.reconcile import recovery
from omnigraph.engine.storage.names import CLAIM_PATH
from omnigraph.engine.storage.store import open_store
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


class StepFailed(OmnigraphError):
    """A playbook step that did not achieve its goal; ``next_command`` is what the operator runs next.

    ``exit_code`` is the run's exit status: that of the error that stopped the step, else 1.
    ``data`` (the error's details, or the step's own facts) goes to the run's report; ``outputs``
    are variables the failed step still established (a migration that stopped holding its claim),
    so that the run is recorded in that migration's ledger.
    """

    code = "step_failed"

    def __init__(
        self,
        summary: str,
        next_command: str,
        exit_code: int = EXIT_ERROR,
        data: dict[str, Any] | None = None,
        outputs: dict[str, str] | None = None,
    ) -> None:
        super().__init__(summary, {"next": next_command})
        self.summary = summary
        self.next_command = next_command
        self.exit_code = exit_code
        self.data = data or {}
        self.outputs = outputs or {}


class AnswerUnavailable(OmnigraphError):
    """A playbook step asked the operator a question nobody can answer; nothing was done.

    Nobody can answer when ``--yes`` is not given and stdin is not a terminal.
    """

    code = "answer_unavailable"
    http_status = 400
    exit_code = EXIT_USAGE

    def __init__(self, question: str) -> None:
        super().__init__(f"nobody can answer {question!r}: stdin is not a terminal and --yes was not given", {"question": question})
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
    artifacts: str = ""
    """The ``--report``/``--junit`` flags of this run (with a leading space), kept by :meth:`rerun`."""

    @property
    def actor(self) -> str:
        """The run's ``user`` variable: who the migration, the repairs and the commits name."""
        return self.variables["user"]

    def rerun(self, *flags: str, **extra: str) -> str:
        """The command that runs this playbook again, with ``flags``, its artifacts and ``extra`` --var settings.

        The run's ``--report``/``--junit`` flags are kept (:attr:`artifacts`).

        In a resumed run it is the command that resumes it again (its variables are the journalled
        ones, so ``extra`` is left out).
        """
        settings = "".join(f" {flag}" for flag in flags) + self.artifacts
        if self.resumed_from:
            return f"omnigraph-migrate playbook resume {self.journal}{settings}"
        settings += "".join(f" --var {name}={value}" for name, value in sorted(extra.items()))
        return f"omnigraph-migrate playbook run {self.playbook_path} {self.variables['graph']}{settings}"


Action = Callable[[StepContext, dict[str, str]], StepResult]

SMOKE_ACTOR = "playbook smoke test"
"""The actor the smoke test's commits record."""


def _flag(params: dict[str, str], name: str) -> bool:
    return params.get(name, "false").lower() in ("1", "true", "yes")


def _claim_outputs(uri: str) -> dict[str, str]:
    holder = inspect(open_store(uri), CLAIM_PATH)
    if holder is None:
        return {}
    return {"token": holder.token, "migration_id": holder.migration_id, "migration_graph": uri}


def _repair_route(uri: str) -> str:
    """Duplicates are repaired behind the barrier: a run stops at validation holding it."""
    return (
        f"`omnigraph-migrate run {uri}` (it stops at validation and keeps the barrier), then "
        f"`omnigraph-migrate playbook run duplicate-repair {uri}`"
    )


def preflight(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Check the graph is ready to migrate (``validate``: its ids too); a graph already fenced finishes the run."""
    uri = params["graph"]
    try:
        fenced = migrate.up_to_date(uri)
        if fenced is not None:
            return StepResult(fenced.message, fenced.to_dict(), finished=True)
        report = migrate.preflight(uri, validate=_flag(params, "validate"), progress=ctx.progress)
    except OmnigraphError as error:
        next_command = {
            "claim_held": f"omnigraph-migrate playbook run resume-crashed {uri}",
            "format_refused": f"omnigraph-migrate verify {uri}",
            "recovery_required": f"omnigraph recover {uri}",
            "validation_failed": _repair_route(uri),
        }.get(error.code, f"omnigraph-migrate status {uri}")
        raise StepFailed(f"not ready: {error.message}", next_command, error.exit_code, error.details) from error
    summary = f"format 4, {len(report.branches)} branch(es), {len(report.units)} unit(s), {report.images} image(s)" + (
        ", no duplicate or null ids" if report.inventory is not None else ""
    )
    return StepResult(summary, {"branches": len(report.branches), "units": len(report.units)})


def confirm(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Ask the operator ``question``; the step fails unless the answer is yes."""
    question = params["question"]
    if not ctx.ask(question):
        raise StepFailed(f"not confirmed: {question}", ctx.rerun())
    return StepResult(f"confirmed: {question}")


def confirm_holder_dead(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Ask whether the claim's holder is dead; refused outright while it is alive on this host.

    ``--yes`` alone never answers this question: it needs ``--holder-dead`` or an interactive yes.
    """
    uri, question = params["graph"], params["question"]
    holder = inspect(open_store(uri), CLAIM_PATH)
    if holder is None:
        raise StepFailed(f"no migration claim on {uri}: there is no holder", f"omnigraph-migrate status {uri}")
    try:
        refuse_if_acting(open_store(uri), CLAIM_PATH, holder, "go on")
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


def _own_claim(ctx: StepContext, uri: str) -> ClaimDocument | None:
    """The migration claim of ``uri`` if a process that ran this playbook run before took it, else None.

    That is a resumed run whose runner died mid-migration.
    """
    holder = inspect(open_store(uri), CLAIM_PATH)
    if holder is None:
        return None
    taken_by = (holder.host, holder.pid, holder.process_start)
    return holder if any((w.host, w.pid, w.process_start) == taken_by for w in ctx.resumed_from) else None


def _answer_queries(params: dict[str, str]) -> migrate.AnswerQueries | None:
    """The answer check the step's ``queries`` / ``query_params`` name (None when empty)."""
    if not params.get("queries"):
        return None
    return migrate.AnswerQueries.from_files(Path(params["queries"]), Path(params["query_params"]) if params.get("query_params") else None)


def prepare(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Validate every pinned image online and record receipts; writers go on. In a resumed run, catch up the migration this run claimed.

    Duplicates fail the step at stamp 4 (nothing is refused to writers); their repair works behind
    the barrier, which the cutover raises and keeps at them.
    """
    uri = params["graph"]
    try:
        own = _own_claim(ctx, uri)
        outcome = migrate.prepare(uri, token=own.token if own else None, owner=params["owner"], progress=ctx.progress)
    except OmnigraphError as error:
        outputs = _claim_outputs(uri)
        if error.code == "validation_failed" and outputs:
            next_command = (
                f"omnigraph-migrate cutover {uri} --token {outputs['token']} (it stops at the duplicates behind the "
                f"barrier), then omnigraph-migrate playbook run duplicate-repair {uri}"
            )
        else:
            next_command = f"omnigraph-migrate status {uri}"
        raise StepFailed(error.message, next_command, error.exit_code, error.details, outputs) from error
    outputs = {"token": outcome.token, "migration_id": outcome.migration_id, "migration_graph": uri}
    summary = (
        f"{outcome.images} image(s) have receipts ({outcome.validated} validated now); stamp 4, writers go on; "
        f"predicted cutover about {outcome.cutover['estimated_seconds']}s"
    )
    return StepResult(summary, outcome.to_dict(), outputs)


def migrate_step(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Finish the migration: the cutover of the prepared one (``token``), else continue this run's, else a whole run.

    With ``token`` (a prepare step's) it is ``cutover`` bounded by ``max_outage`` (which also
    continues a cutover this run's dead runner started); a graph fenced meanwhile (an outside
    ``resume``) finishes the run as up to date. Without it, a resumed run continues the
    migration its dead runner claimed with ``resume`` (which refuses if that process is alive
    after all), and a fresh one runs the whole migration. ``queries`` (and ``query_params``) name
    the answer check's files.
    """
    uri = params["graph"]
    try:
        max_outage = migrate.duration_seconds(params.get("max_outage") or "5s")
    except BadRequest as error:
        raise StepFailed(f"max_outage: {error.message}", ctx.rerun(), EXIT_USAGE) from error
    try:
        queries = _answer_queries(params)
        own = _own_claim(ctx, uri)
        fenced = migrate.up_to_date(uri) if params.get("token") else None  # finished meanwhile (an outside resume)
        outcome: migrate.Migrated | migrate.UpToDate
        if fenced is not None:
            outcome = fenced
        elif params.get("token"):
            outcome = migrate.cutover(
                uri, token=params["token"], owner=ctx.actor, max_outage=max_outage, progress=ctx.progress, queries=queries
            )
        elif own is not None:
            outcome = migrate.resume(uri, token=own.token, owner=ctx.actor, progress=ctx.progress, queries=queries)
        else:
            outcome = migrate.run(uri, owner=params.get("owner") or ctx.actor, progress=ctx.progress, queries=queries)
    except OmnigraphError as error:
        outputs = _claim_outputs(uri)
        if error.code == "validation_failed":
            next_command = f"omnigraph-migrate playbook run duplicate-repair {uri}"
        elif error.code == "cutover_deferred" and outputs:
            next_command = f"omnigraph-migrate status {uri}"
        elif error.code == "answers_changed" and outputs:
            next_command = f"find what changed the rows, then omnigraph-migrate abort {uri} --token {outputs['token']}"
        elif error.code == "drift_detected" and outputs:
            next_command = f"omnigraph-migrate status {uri}"  # the drift lowered the barrier (abort) or names what to stop
        elif error.code == "migration_refused" and "recorded_schema_id" in error.details:  # the schema changed under the receipts
            next_command = str(error.details["next"])  # prepare --token takes them again (abort --token behind the barrier)
        elif outputs:
            next_command = f"omnigraph-migrate playbook run resume-crashed {uri}"
        else:
            next_command = f"omnigraph-migrate status {uri}"
        raise StepFailed(error.message, next_command, error.exit_code, error.details, outputs) from error
    if isinstance(outcome, migrate.UpToDate):
        return StepResult(outcome.message, outcome.to_dict(), finished=True)
    outputs = {"token": outcome.token, "migration_id": outcome.migration_id, "migration_graph": uri}
    summary = f"migrated {outcome.units} unit(s) over {outcome.images} image(s); stamp 5; writers were held for {outcome.outage_seconds}s"
    return StepResult(summary, outcome.to_dict(), outputs)


def resume(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Continue the crashed migration whose claim carries ``token`` to stamp 5."""
    uri, token = params["graph"], params["token"]
    try:
        outcome = migrate.resume(uri, token=token, owner=ctx.actor, progress=ctx.progress)
    except OmnigraphError as error:
        raise StepFailed(error.message, f"omnigraph-migrate status {uri}", error.exit_code, error.details, _claim_outputs(uri)) from error
    outputs = {"token": token, "migration_id": outcome.migration_id, "migration_graph": uri}
    return StepResult(f"migration {outcome.migration_id} completed: {outcome.units} unit(s); stamp 5", outcome.to_dict(), outputs)


def verify(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Check every live table on every branch is fenced (``omnigraph-migrate verify``)."""
    uri = params["graph"]
    try:
        verified = migrate.verify(uri)
    except OmnigraphError as error:
        raise StepFailed(error.message, f"omnigraph-migrate status {uri}", error.exit_code, error.details) from error
    return StepResult(f"every live table on every branch is fenced (stamp {verified.stamp})", verified.to_dict())


def _first_row(graph: omnigraph.Graph, branch: str) -> bytes | None:
    """One exported node row of ``branch`` (as a JSONL line), or None if it has no node rows."""
    for table_key in graph.tables:
        if table_key.startswith("node:"):
            for line in graph.export_jsonl(branch, [table_key.split(":", 1)[1]]):
                return (line + "\n").encode()
    return None


def _smoke_on(graph: omnigraph.Graph, branch: str, line: bytes) -> dict[str, Any]:
    before = list(graph.export_jsonl(branch))
    written = graph.load(line, mode="merge", branch=branch, actor=SMOKE_ACTOR)
    try:
        graph.load(line, mode="append", branch=branch, actor=SMOKE_ACTOR)
    except KeyConflict:
        fenced = True
    else:
        fenced = False
    after = list(graph.export_jsonl(branch))
    if not fenced or after != before:
        raise StepFailed(
            f"smoke test on {branch}: the strict re-insert {'was refused' if fenced else 'was NOT refused'}, "
            f"rows {'unchanged' if after == before else 'CHANGED'}",
            f"omnigraph-migrate verify {graph.uri}",
        )
    return {"branch": branch, "commit": written.commits[0], "rows": len(after)}


def smoke_test(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """A fenced upsert (same values) and a refused strict insert, then a read, on main and a branch."""
    with omnigraph.open(params["graph"]) as graph:
        line = _first_row(graph, MAIN)
        if line is None:
            return StepResult("skipped: main has no node rows to write back", skipped=True)
        branch = f"smoke-{ctx.variables['run_id'].lower()}"
        results = [_smoke_on(graph, MAIN, line)]
        graph.create_branch(branch)
        try:
            results.append(_smoke_on(graph, branch, line))
        finally:
            graph.delete_branch(branch)
    return StepResult(
        "fenced write and read on main and on a temporary branch; a duplicate insert was refused on both",
        {"checks": results},
    )


def release(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Check the graph can go back to writers: stamp 5, no claim, no pending write."""
    uri = params["graph"]
    store = open_store(uri)
    stamp, _ = Manifest(store).read_stamp()
    holder = inspect(store, CLAIM_PATH)
    pending = recovery.list_intents(store)
    if stamp != "5" or holder is not None or pending:
        raise StepFailed(
            f"not releasable: stamp {stamp}, claim {'held' if holder else 'free'}, {len(pending)} pending write(s)",
            f"omnigraph-migrate status {uri}",
        )
    return StepResult("stamp 5, no claim, nothing pending: restart writers with the format-5 omnigraph only")


def copy(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Copy the graph root ``source`` to the empty ``destination`` (a staging rehearsal's graph)."""
    source, destination = params["source"], params["destination"]
    try:
        copied = migrate.copy(source, destination)
    except OmnigraphError as error:
        raise StepFailed(error.message, f"choose an empty staging root: {ctx.rerun(staging='URI')}", error.exit_code) from error
    return StepResult(
        f"copied {copied.objects} objects ({copied.bytes} bytes) to {destination}", {"objects": copied.objects, "bytes": copied.bytes}
    )


STATUS_TAIL = 20
"""How many ledger records the status step shows (its ``tail`` parameter changes it)."""


def status(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Show the stamp, the claim and the ledger's last records; fails without a claim when ``require_claim`` is set.

    The ledger shown is its last ``tail`` records (:data:`STATUS_TAIL`), with the count of all.
    """
    uri = params["graph"]
    tail = int(params.get("tail", STATUS_TAIL))
    shown = migrate.status(uri, tail=tail)
    document = shown.to_dict()
    if shown.ledger is not None:
        ctx.say(migrate.ledger_table(shown).rstrip())
        if shown.ledger_records > tail:
            ctx.say(f"(the last {tail} of {shown.ledger_records} ledger records; `omnigraph-migrate status {uri}` shows them all)")
    claim = document["claim"]
    if claim is None and _flag(params, "require_claim"):
        raise StepFailed(
            f"no migration holds a claim on {uri} (stamp {document['stamp']})",
            _repair_route(uri) if document["stamp"] == "4" else f"omnigraph-migrate status {uri}",
        )
    holder = f"claim held by {claim['owner']} on {claim['host']} pid {claim['pid']}" if claim else "no claim"
    summary = f"stamp {document['stamp']}, {holder}, units {document['units_by_state'] or 'none'}"
    return StepResult(summary, {k: document[k] for k in ("stamp", "claim", "migration_id", "units_by_state")}, _claim_outputs(uri))


def ledger_story(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """What the ledger says happened, in one paragraph."""
    document = migrate.status(params["graph"]).to_dict()
    claim, ledger = document["claim"], document["ledger"]
    if ledger is None and claim is not None:
        story = (
            f"migration {claim['migration_id']} by {claim['owner']}: its process took the claim and wrote no "
            "ledger record; nothing else was done (stamp 5 not written)"
        )
        return StepResult(story, {"phase": None, "completed": 0, "units": 0})
    if ledger is None:
        raise StepFailed("no migration ledger on this graph", f"omnigraph-migrate status {params['graph']}")
    state, last = ledger["state"], ledger["records"][-1]
    units = state["units"]
    completed = sorted(u for u, s in units.items() if s["status"] == "completed")
    with_sidecar = set(migrate.unit_sidecars(params["graph"], state["migration_id"]))
    in_progress = sorted(
        f"{u} (after {s['last_step']})" if s["status"] == "in_progress" else f"{u} (sidecar written)"
        for u, s in units.items()
        if s["status"] == "in_progress" or (s["status"] != "completed" and u in with_sidecar)
    )
    story = (
        f"migration {state['migration_id']} by {state['owner']}: phase {state['phase']}; "
        f"{len(completed)}/{len(units)} unit(s) completed"
        + (f"; interrupted in {', '.join(in_progress)}" if in_progress else "")
        + f"; last record #{last['seq']} {last['kind']} at {last['at']}"
        + ("; stamp 5 written" if state["stamp_written"] else "; stamp 5 not written")
    )
    return StepResult(story, {"phase": state["phase"], "completed": len(completed), "units": len(units)})


def duplicates(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """List every duplicate or null id of every pinned image (read-only)."""
    entries = migrate.duplicates(params["graph"], progress=ctx.progress).to_dict()["inventory"]
    for entry in entries:
        ctx.say(
            f"  {entry['entity_kind']} {entry['type_name']} {entry['entity_id']!r}: {entry['problem']}, {entry['rows']} rows, "
            f"branches {', '.join(entry['graph_branches'])}"
        )
    return StepResult(f"{len(entries)} duplicate or null id(s)", {"inventory": entries})


def repair_decisions(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Read the repair decisions file; without one, write its template and fail until every entry has an action."""
    uri, token, path = params["graph"], params["token"], Path(params["decisions"])
    if not path.exists():
        decisions = migrate.repair_template(uri, token=token, progress=ctx.progress)
        migrate.write_repair_decisions(path, decisions)
        raise StepFailed(
            f"wrote a decisions template with {len(decisions.decisions)} entr(ies) to {path}; nothing is "
            "repaired until every entry has an action",
            f"edit {path}, then: {ctx.rerun(decisions=str(path))}",
            EXIT_VALIDATION_FAILED,
        )
    try:
        decisions = migrate.read_repair_decisions(path)
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
    """Apply the repair decisions behind the barrier of the migration whose claim carries ``token``."""
    uri, token, path = params["graph"], params["token"], Path(params["decisions"])
    try:
        applied = migrate.repair(uri, token=token, decisions=migrate.read_repair_decisions(path), actor=ctx.actor)
    except OmnigraphError as error:
        raise StepFailed(error.message, f"fix {path}, then: {ctx.rerun(decisions=str(path))}", error.exit_code, error.details) from error
    return StepResult(f"{len(applied.commits)} repair commit(s) recorded", applied.to_dict())


def validate(ctx: StepContext, params: dict[str, str]) -> StepResult:
    """Check no duplicate or null id remains in any pinned image."""
    uri = params["graph"]
    document = migrate.duplicates(uri, progress=ctx.progress).to_dict()
    if document["inventory"]:
        raise StepFailed(
            f"{len(document['inventory'])} duplicate or null id(s) remain",
            f"omnigraph-migrate duplicates {uri}",
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
    "migrate": migrate_step,
    "preflight": preflight,
    "prepare": prepare,
    "release": release,
    "repair-apply": repair_apply,
    "repair-decisions": repair_decisions,
    "resume": resume,
    "smoke-test": smoke_test,
    "status": status,
    "validate": validate,
    "verify": verify,
}
