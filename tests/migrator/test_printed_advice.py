"""Every command the tools advise, run exactly as printed, in a situation that prints it.

:func:`advised_commands` reads the source: every string literal (not a docstring) of the packages
that names a command of the three console scripts (``omnigraph recover ...``,
``omnigraph-migrate resume ...``), resolved against the real click groups. Each one must have a
scenario in :data:`SCENARIOS`: it builds the situation with real processes (a kill at a named
failpoint, a process held alive), runs the command that prints the advice, takes the advised
command from its output, runs it exactly as printed (a real process, stdin not a terminal), and
checks that it resolves the state: the original refusal does not come back. Advice that loops
back to the same error fails here.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import click
import lance
import pyarrow as pa
import pytest
import yaml

from omnigraph.cli.migrate import cli as migrate_cli
from omnigraph.cli.omnigraph import cli as omnigraph_cli
from omnigraph.cli.omnigraph_v4 import cli as v4_cli
from omnigraph.engine.failpoints import FAILPOINT_EXIT_STATUS
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.lance_io import open_dataset
from omnigraph.engine.storage.store import open_store
from tests.support.advice import commands_in, first_command, run_printed
from tests.support.check_helpers import assert_check_clean
from tests.support.graph_helpers import BIN, OMNIGRAPH, OMNIGRAPH_V4, SCHEMA_PATH, Cli, make_example_graph, person, run_cli
from tests.support.many_people import PEOPLE, ages, many_people
from tests.support.migration_cli import claim_token, migrate
from tests.support.migration_fixtures import build_duplicate, build_fixture
from tests.support.paused_process import pause_at
from tests.support.serve_helpers import start_fenced

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("omnigraph/cli", "migrator", "engine", "playbooks", "claims", "ledger", "omnigraph/server")
OWNED_ELSEWHERE = ("engine/gq", "engine/query")  # the read-query language: another work area, no advice
GROUPS: dict[str, click.Group] = {"omnigraph": omnigraph_cli, "omnigraph-migrate": migrate_cli, "omnigraph-v4": v4_cli}
MENTION = re.compile(r"\b(omnigraph-migrate|omnigraph-v4|omnigraph)((?: [a-z][a-z0-9-]*)+)")
# Program names that appear in refusals as the name of who refuses, not as a command to run.
NOT_ADVICE = {"omnigraph-migrate repair": "the duplicate-repair profile's program name in its open refusals"}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _literals(tree: ast.AST) -> list[str]:
    skip = _docstrings(tree)
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            texts.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            texts.append(node.value)
    return texts


def _resolve(program: str, words: list[str]) -> str | None:
    """The command path ``words`` names under ``program``'s click group (deepest group or
    command), or None if the first word is not a subcommand (prose, not a command)."""
    command: click.Command = GROUPS[program]
    path = [program]
    for word in words:
        found = command.get_command(click.Context(command), word) if isinstance(command, click.Group) else None
        if found is None:
            break
        command = found
        path.append(word)
    return " ".join(path) if len(path) > 1 else None


def advised_commands() -> dict[str, list[str]]:
    """Every command path advised somewhere in the source, with the files that advise it."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            if relative.startswith(OWNED_ELSEWHERE):
                continue
            for text in _literals(ast.parse(path.read_text(encoding="utf-8"))):
                for match in MENTION.finditer(text):
                    verb = _resolve(match.group(1), match.group(2).split())
                    if verb is not None and verb not in NOT_ADVICE:
                        found.setdefault(verb, set()).add(relative)
    return {verb: sorted(files) for verb, files in sorted(found.items())}


# -- situations ----------------------------------------------------------------------------------


def _fenced(tmp_path: Path) -> str:
    uri = str(tmp_path / "fenced")
    make_example_graph(uri)
    return uri


def _format4(tmp_path: Path) -> str:
    uri = str(tmp_path / "legacy")
    build_fixture(uri, compact=True)
    return uri


def _person_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.jsonl"
    path.write_text(person(name, 30) + "\n")
    return path


def _load(program: Path, uri: str, tmp_path: Path, name: str, *extra: str) -> Cli:
    return run_cli(program, "load", "--mode", "append", "--data", _person_file(tmp_path, name), *extra, "--json", uri)


def _error(result: Cli, code: str, exit_code: int) -> dict:
    assert result.returncode == exit_code, result.describe()
    error = result.json()["error"]
    assert error["code"] == code, error
    return dict(error)


def _next_line(result: Cli) -> str:
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip().startswith("next:")]
    assert lines, result.describe()
    return lines[-1]


def _stamp(uri: str) -> str | None:
    return Manifest(open_store(uri)).read_stamp()[0]


# -- one scenario per advised command --------------------------------------------------------------


def branch_list(tmp_path: Path) -> None:
    uri = _fenced(tmp_path)
    error = _error(_load(OMNIGRAPH, uri, tmp_path, "Nobody", "--branch", "nope"), "not_found", 1)
    listed = run_printed(first_command(error["message"])).ok()
    assert "main" in listed.stdout.split() and "nope" not in listed.stdout


def drift(tmp_path: Path) -> None:
    uri = _fenced(tmp_path)
    store = open_store(uri)
    entry = Manifest(store).snapshot("main").table("node:Person")
    dataset = open_dataset(store, entry.table_path)
    lance.write_dataset(pa.Table.from_pylist([{"id": "ghost", "name": "ghost"}], schema=dataset.schema), dataset, mode="append")
    error = _error(_load(OMNIGRAPH, uri, tmp_path, "Judy"), "table_drift", 5)
    show, adopt, revert = commands_in(error["message"])
    assert (show, adopt, revert) == tuple(error["details"]["commands"][verb] for verb in ("show", "adopt", "revert"))
    assert "node:Person" in run_printed(show).ok().stdout and ": drift" in run_printed(show).stdout
    run_printed(revert).ok()
    _load(OMNIGRAPH, uri, tmp_path, "Judy").ok()
    assert_check_clean(uri)


def recover(tmp_path: Path) -> None:
    uri = _format4(tmp_path)
    crashed = run_cli(
        OMNIGRAPH_V4,
        "load",
        "--mode",
        "append",
        "--data",
        _person_file(tmp_path, "Half"),
        uri,
        env={"OMNIGRAPH_FAILPOINTS": "write.after_effect"},
    )
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.describe()
    preflight = _error(migrate_cli_json("preflight", uri), "recovery_required", 5)
    checked = run_cli(OMNIGRAPH, "check", "--json", uri)
    [finding] = [f for f in checked.json()["error"]["details"]["findings"] if f["kind"] == "pending_intent"]
    command = first_command(finding["message"])
    assert command == first_command(preflight["message"]) == f"omnigraph recover {uri}"
    run_printed(command).ok()
    assert_check_clean(uri)
    migrate_cli_json("preflight", uri).ok()


def snapshot(tmp_path: Path) -> None:
    uri = _fenced(tmp_path)
    result = run_cli(OMNIGRAPH, "drift", "show", "--table", "node:Nope", "--json", uri)
    error = _error(result, "not_found", 1)
    shown = run_printed(first_command(error["message"])).ok()
    assert "node:Person" in shown.stdout


def schema_show(tmp_path: Path) -> None:
    """``blob get`` of a type the graph lacks names ``schema show``, which lists the types."""
    uri = _fenced(tmp_path)
    result = run_cli(OMNIGRAPH, "blob", "get", "--type", "Nope", "--id", "x", "--property", "p", uri)
    assert result.returncode == 1, result.describe()
    shown = run_printed(first_command(result.stderr)).ok()
    assert "Person" in shown.stdout


def commit_list(tmp_path: Path) -> None:
    """``query --at`` a commit the branch does not have names ``commit list``, which lists the ones it has."""
    uri = _fenced(tmp_path)
    query = tmp_path / "people.gq"
    query.write_text("query people() { match { $p: Person } return { $p.name } }\n")
    result = run_cli(OMNIGRAPH, "query", "--query", str(query), "--at", "01NOSUCHCOMMIT0000000000000", uri)
    assert result.returncode == 1 and "not_found" in result.stderr, result.describe()
    listed = run_printed(first_command(result.stderr)).ok()
    head = listed.stdout.split()[0]
    run_cli(OMNIGRAPH, "query", "--query", str(query), "--at", head, uri).ok()


def export(tmp_path: Path) -> None:
    """``blob get`` of a property that is not a Blob names ``export --type``, which prints its values."""
    uri = _fenced(tmp_path)
    result = run_cli(OMNIGRAPH, "blob", "get", "--type", "Person", "--id", "x", "--property", "name", uri)
    assert result.returncode == 1, result.describe()
    shown = run_printed(first_command(result.stderr)).ok()
    assert '"type": "Person"' in shown.stdout or '"type":"Person"' in shown.stdout, shown.stdout[:400]


def abort(tmp_path: Path) -> None:
    uri = _format4(tmp_path)
    assert migrate("run", uri, "--owner", "ci", failpoint="migrate.after_plan").returncode == FAILPOINT_EXIT_STATUS
    broken = migrate_cli_json("claim", "break", uri, "--token", claim_token(uri), "--reason", "its host rebooted").ok()
    run_printed(first_command(broken.json()["next"])).ok()
    assert _stamp(uri) == "4"
    _load(OMNIGRAPH_V4, uri, tmp_path, "Again").ok()
    assert_check_clean(uri)


def claim_show(tmp_path: Path) -> None:
    uri = _format4(tmp_path)
    assert migrate("run", uri, "--owner", "ci", failpoint="unit.after_sidecar").returncode == FAILPOINT_EXIT_STATUS
    token = claim_token(uri)
    resumer = pause_at("unit.after_pk", "omnigraph-migrate", "resume", uri, "--token", token)
    try:
        status = migrate_cli_json("status", uri).ok().json()
        command = first_command(status["next"])
        shown = run_printed(command).ok()
        assert "resume: " in shown.stdout and f"(pid {resumer.pid})" in shown.stdout and "acting for it: alive" in shown.stdout
    finally:
        returncode, _, _ = resumer.release("exit")
    assert returncode == FAILPOINT_EXIT_STATUS
    assert "acting for it: dead" in run_printed(command).ok().stdout
    resume = first_command(migrate_cli_json("status", uri).ok().json()["next"])
    run_printed(resume).ok()
    assert_check_clean(uri)


def duplicates(tmp_path: Path) -> None:
    uri = str(tmp_path / "dup")
    twin = build_duplicate(uri, tmp_path)
    error = _error(migrate_cli_json("preflight", "--validate", uri), "validation_failed", 4)
    listed = run_printed(first_command(error["message"]))
    assert listed.returncode == 4 and twin in listed.stdout, listed.describe()


def playbook_run(tmp_path: Path) -> None:
    uri = str(tmp_path / "dup")
    twin = build_duplicate(uri, tmp_path)
    stopped = _error(migrate_cli_json("run", uri, "--owner", "ci"), "validation_failed", 4)
    workdir = tmp_path / "operator"
    workdir.mkdir()
    templated = run_printed(first_command(stopped["message"]), cwd=workdir)
    assert templated.returncode == 4, templated.describe()
    next_line = _next_line(templated)
    decisions = workdir / "duplicate-decisions.yaml"
    document = yaml.safe_load(decisions.read_text())
    [entry] = document["decisions"]
    assert entry["entity_id"] == twin
    entry.update(action="keep", keep_row_id=entry["rows"][0]["row_id"])
    decisions.write_text(yaml.safe_dump(document))
    rerun = next_line.split("then: ", 1)[1]
    unanswered = run_printed(rerun, cwd=workdir)
    assert unanswered.returncode == 2, unanswered.describe()  # apply asks, and nobody can answer
    assert "--yes" in _next_line(unanswered)
    with_yes = _next_line(unanswered).split("next: ", 1)[1]
    assert with_yes.endswith(" --yes")
    run_printed(with_yes, cwd=workdir).ok()
    assert _stamp(uri) == "5"
    assert_check_clean(uri)


def playbook_resume(tmp_path: Path) -> None:
    uri = _format4(tmp_path)
    journals = tmp_path / "journals"
    killed = run_cli(
        BIN / "omnigraph-migrate",
        "playbook",
        "run",
        "upgrade",
        uri,
        "--yes",
        "--journal",
        journals,
        env={"OMNIGRAPH_FAILPOINTS": "unit.after_pk"},
    )
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.describe()
    [run] = migrate_cli_json("playbook", "list", "--journal", str(journals)).ok().json()["runs"]
    shown = run_printed(f"omnigraph-migrate playbook show {run['journal']}").ok()
    resume = first_command(_next_line(shown))
    assert resume.endswith(" --yes")  # the run was started with --yes: its resume confirms as it would have
    run_printed(resume).ok()
    assert _stamp(uri) == "5"
    assert_check_clean(uri)


def mutate_chunks(tmp_path: Path) -> None:
    """A large update is refused naming the chunked command; a chunked run killed between chunks
    names its --resume command; both are run as printed."""
    uri = str(tmp_path / "many")
    many_people(uri)
    query = tmp_path / "q.gq"
    query.write_text("query older() { update Person set { age: 31 } where age < 50 }\n")
    error = _error(run_cli(OMNIGRAPH, "mutate", "--query", query, "--json", uri), "resource_limit", 1)
    printed = shlex.split(first_command(error["message"]))
    # the printed command, killed after its first chunk (the situation that prints the next advice)
    killed = run_cli(OMNIGRAPH, *printed[1:], env={"OMNIGRAPH_FAILPOINTS": "mutate.after_chunk"})
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.describe()
    run_printed(first_command(killed.stderr)).ok()
    assert set(ages(uri).values()) == {31} and len(ages(uri)) == PEOPLE


def playbook_list(tmp_path: Path) -> None:
    uri = _format4(tmp_path)
    migrate_cli_json("playbook", "run", "upgrade", uri, "--yes").ok()
    missing = _error(migrate_cli_json("playbook", "show", str(tmp_path / "journals" / "01NOSUCHRUN")), "not_found", 1)
    listed = run_printed(first_command(missing["message"])).ok()
    assert "upgrade" in listed.stdout and uri in listed.stdout


def playbook_show(tmp_path: Path) -> None:
    uri = _format4(tmp_path)
    journals = tmp_path / "journals"
    ran = migrate_cli_json("playbook", "run", "upgrade", uri, "--yes", "--journal", str(journals)).ok()
    refused = _error(migrate_cli_json("playbook", "resume", ran.json()["journal"], "--yes"), "bad_request", 1)
    shown = run_printed(first_command(refused["message"])).ok()
    assert ": done" in shown.stdout and "release" in shown.stdout


def preflight(tmp_path: Path) -> None:
    uri = _format4(tmp_path)
    error = _error(_load(OMNIGRAPH, uri, tmp_path, "Early"), "format_refused", 6)
    command = first_command(error["message"])
    assert command == f"omnigraph-migrate preflight {uri}"
    assert "ready:" in run_printed(command).ok().stdout


def run(tmp_path: Path) -> None:
    uri = _format4(tmp_path)
    error = _error(_load(OMNIGRAPH, uri, tmp_path, "Early"), "format_refused", 6)
    _, command = commands_in(error["message"])
    assert command == f"omnigraph-migrate run {uri}"
    run_printed(command).ok()
    _load(OMNIGRAPH, uri, tmp_path, "Early").ok()


def refence(tmp_path: Path) -> None:
    uri = _format4(tmp_path)
    data = _person_file(tmp_path, "Late")
    old_writer = pause_at("open.after_stamp", "omnigraph-v4", "load", "--mode", "append", "--data", str(data), uri)
    try:
        assert migrate("run", uri, "--owner", "sre").returncode == 0
    finally:
        returncode, _, stderr = old_writer.release("continue")
    assert returncode == 0, stderr
    error = _error(_load(OMNIGRAPH, uri, tmp_path, "After"), "format_refused", 6)
    run_printed(first_command(error["message"])).ok()
    _load(OMNIGRAPH, uri, tmp_path, "After").ok()
    assert_check_clean(uri)


def resume(tmp_path: Path) -> None:
    uri = _format4(tmp_path)
    assert migrate("run", uri, "--owner", "ci", failpoint="unit.after_pk").returncode == FAILPOINT_EXIT_STATUS
    refused = _error(migrate_cli_json("run", uri, "--owner", "ci"), "claim_held", 3)
    run_printed(first_command(refused["message"])).ok()
    assert _stamp(uri) == "5"
    assert_check_clean(uri)


def status(tmp_path: Path) -> None:
    """Behind the barrier a write is ``format_refused`` naming ``status``, whose ``next`` resumes."""
    uri = _format4(tmp_path)
    assert migrate("run", uri, "--owner", "ci", failpoint="unit.after_pk").returncode == FAILPOINT_EXIT_STATUS
    error = _error(_load(OMNIGRAPH, uri, tmp_path, "Waiting"), "format_refused", 6)
    shown = run_printed(first_command(error["message"])).ok()
    run_printed(first_command(_next_line(shown))).ok()
    _load(OMNIGRAPH, uri, tmp_path, "Waiting").ok()
    assert_check_clean(uri)


def verify(tmp_path: Path) -> None:
    uri = _format4(tmp_path)
    migrated = run_printed(f"omnigraph-migrate run {uri}").ok()
    checked = run_printed(first_command(_next_line(migrated))).ok()
    assert "ok: every live table on every branch" in checked.stdout


def v4_init(tmp_path: Path) -> None:
    """Not found by the source scan (the program name is interpolated): a missing graph names the
    init of the program that was asked, with the schema file to fill in."""
    uri = str(tmp_path / "missing")
    for program in (OMNIGRAPH_V4, OMNIGRAPH):
        error = _error(run_cli(program, "snapshot", "--json", uri), "not_found", 1)
        command = first_command(error["message"])
        assert command == f"{program.name} init --schema FILE.pg {uri}"
        run_printed(command.replace("FILE.pg", str(SCHEMA_PATH))).ok()
        run_cli(program, "snapshot", uri).ok()
        uri = str(tmp_path / "missing-too")


def migrate_cli_json(*args: str) -> Cli:
    """``omnigraph-migrate ARGS --json`` as a real process."""
    result = migrate(*args, "--json")
    return Cli(("omnigraph-migrate", *args), result.returncode, result.stdout, result.stderr)


def _bulk(uri: str, tmp_path: Path, rows: int) -> None:
    """``rows`` new people on main through the format-4 writer, in one load."""
    data = tmp_path / "bulk.jsonl"
    data.write_text("".join(person(f"Bulk {i:05d}", 30) + "\n" for i in range(rows)))
    run_cli(OMNIGRAPH_V4, "load", "--mode", "append", "--data", data, uri).ok()


def prepare(tmp_path: Path) -> None:
    """A cutover over its bound because of rows changed since prepare names the catch-up; after it, the same bound holds."""
    uri = _format4(tmp_path)
    prepared = migrate_cli_json("prepare", uri, "--owner", "ci").ok().json()
    token, bound = prepared["token"], f"{prepared['cutover']['floor_seconds'] + 0.004:.3f}s"
    _bulk(uri, tmp_path, 6000)
    refused = _error(migrate_cli_json("cutover", uri, "--token", token, "--max-outage", bound), "cutover_deferred", 1)
    run_printed(first_command(refused["message"])).ok()
    migrate_cli_json("cutover", uri, "--token", token, "--max-outage", bound).ok()
    assert _stamp(uri) == "5"


def cutover(tmp_path: Path) -> None:
    """A prepare names the cutover, which finishes the migration; a writer's commit still armed
    after the bound lowers the barrier again, and the cutover it names then finishes."""
    uri = _format4(tmp_path)
    prepared = run_printed(f"omnigraph-migrate prepare {uri}").ok()
    writer = pause_at("write.after_arm", "omnigraph-v4", "load", "--mode", "append", "--data", str(_person_file(tmp_path, "Slow")), uri)
    try:
        command = first_command(_next_line(prepared))
        lowered = _error(migrate_cli_json(*command.split()[1:], "--max-outage", "2s", "--parallel", "8"), "cutover_deferred", 1)
        assert _stamp(uri) == "4"
    finally:
        returncode, _, _ = writer.release("continue")
    assert returncode == 0
    run_printed(first_command(lowered["message"])).ok()
    assert _stamp(uri) == "5"
    assert_check_clean(uri)


def token_create(tmp_path: Path) -> None:
    """``serve`` with no tokens file names ``token create``; its entry in a tokens file lets the
    server start and answer the token."""
    uri = _fenced(tmp_path)
    refused = run_cli(OMNIGRAPH, "serve", "--host", "127.0.0.1", "--port", "1", uri)
    assert refused.returncode == 2, refused.describe()
    command = first_command(refused.stderr)
    assert command == "omnigraph token create --actor NAME --grant read", command
    created = run_printed(command.replace("NAME", "oncall") + " --json").ok().json()
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(yaml.safe_dump({"tokens": [created["entry"]]}), encoding="utf-8")
    server = start_fenced(uri, tokens=tokens, token=created["token"])
    try:
        assert server.client.get("/branches").status_code == 200
    finally:
        server.stop()


def serve_allowed_host(tmp_path: Path) -> None:
    """A request naming a host the server does not answer to is 421 naming ``serve
    --allowed-host``; a server started with that option answers it."""
    uri = _fenced(tmp_path)
    server = start_fenced(uri)
    try:
        refused = server.client.get("/branches", headers={"Host": "graph.internal"})
        assert refused.status_code == 421, refused.text
        command = first_command(refused.json()["error"]["message"])
        assert command == "omnigraph serve --allowed-host NAME", command
    finally:
        server.stop()
    server = start_fenced(uri, "--allowed-host", "graph.internal")
    try:
        assert server.client.get("/branches", headers={"Host": "graph.internal"}).status_code == 200
    finally:
        server.stop()


SCENARIOS: dict[str, Callable[[Path], None]] = {
    "omnigraph branch list": branch_list,
    "omnigraph commit list": commit_list,
    "omnigraph drift": drift,
    "omnigraph export": export,
    "omnigraph mutate": mutate_chunks,
    "omnigraph recover": recover,
    "omnigraph schema show": schema_show,
    "omnigraph serve": serve_allowed_host,
    "omnigraph snapshot": snapshot,
    "omnigraph token create": token_create,
    "omnigraph-migrate abort": abort,
    "omnigraph-migrate claim show": claim_show,
    "omnigraph-migrate cutover": cutover,
    "omnigraph-migrate duplicates": duplicates,
    "omnigraph-migrate playbook list": playbook_list,
    "omnigraph-migrate playbook resume": playbook_resume,
    "omnigraph-migrate playbook run": playbook_run,
    "omnigraph-migrate playbook show": playbook_show,
    "omnigraph-migrate preflight": preflight,
    "omnigraph-migrate prepare": prepare,
    "omnigraph-migrate refence": refence,
    "omnigraph-migrate resume": resume,
    "omnigraph-migrate run": run,
    "omnigraph-migrate status": status,
    "omnigraph-migrate verify": verify,
    "omnigraph-v4 init": v4_init,
}


def test_every_advised_command_has_a_scenario() -> None:
    advised = advised_commands()
    assert len(advised) >= 12
    missing = sorted(set(advised) - set(SCENARIOS))
    assert missing == [], {verb: advised[verb] for verb in missing}


@pytest.mark.parametrize("verb", sorted(SCENARIOS))
def test_the_advised_command_resolves_the_situation_that_prints_it(verb: str, tmp_path: Path) -> None:
    SCENARIOS[verb](tmp_path)


def test_status_is_stable_and_tails(tmp_path: Path) -> None:
    """``status`` of a dead migration says the same twice (its time does not grow with the clock)
    and ``--tail N`` shows the last N records with the whole ledger's summary."""
    uri = _format4(tmp_path)
    assert migrate("run", uri, "--owner", "ci", failpoint="unit.after_pk").returncode == FAILPOINT_EXIT_STATUS
    first = migrate_cli_json("status", uri).ok().json()
    again = migrate_cli_json("status", uri, "--tail", "2").ok().json()
    assert again["elapsed_seconds"] == first["elapsed_seconds"]
    assert [r["seq"] for r in again["ledger"]["records"]] == [r["seq"] for r in first["ledger"]["records"]][-2:]
    assert again["ledger_records"] == first["ledger_records"] == len(first["ledger"]["records"])
    assert again["ledger"]["state"] == first["ledger"]["state"]
    human = migrate("status", uri, "--tail", "1")
    assert human.returncode == 0 and json.dumps(first["ledger_records"]) in human.stdout
    # the advice goes to stderr, as every command's does; stdout is the status itself
    assert "next:" not in human.stdout and f"next: {first['next']}" in human.stderr
