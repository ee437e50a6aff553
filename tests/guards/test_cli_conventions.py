"""Operator CLI conventions: an idempotent upgrade, results on stdout, one CLI layer.

* ``omnigraph-migrate run`` (and the upgrade playbook) on a graph already at format 5 exits 0 with
  ``up_to_date`` and writes nothing; at stamp 5 with the claim still held it exits 3 with a command
  that really releases it.
* The result a command was asked for is on stdout (human or ``--json``); stderr holds no result
  line and stdout never holds a progress bar.
* No module under ``engine/``, ``claims/``, ``ledger/``, ``migrator/`` or ``playbooks/`` imports
  ``cli`` or ``click``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from omnigraph.claims.claim import inspect
from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.store import copy_root, open_store
from omnigraph.migrator.layout import CLAIM_PATH
from tests.conftest import new_root
from tests.support.migration_fixtures import BIN, build_fixture

PROJECT = Path(__file__).resolve().parents[2]
LOWER_LAYERS = ("engine", "claims", "ledger", "migrator", "playbooks", "omnigraph/server")
MIGRATE = str(BIN / "omnigraph-migrate")
OMNIGRAPH = str(BIN / "omnigraph")
PROGRESS_BAR = re.compile(r"\[[#-]{4,}\]")


def cli(program: str, *args: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != FAILPOINT_ENV}
    if failpoint:
        env[FAILPOINT_ENV] = failpoint
    return subprocess.run([program, *args], env=env, capture_output=True, text=True, timeout=300, check=False)


def file_digests(uri: str) -> dict[str, str]:
    """Every object under the graph root with the SHA-256 of its bytes."""
    store = open_store(uri)
    prefix = store.root.rstrip("/") + "/"
    return {path.removeprefix(prefix): hashlib.sha256(store.fs.cat_file(path)).hexdigest() for path in sorted(store.fs.find(store.root))}


@pytest.fixture(scope="module")
def migrated_sources() -> dict[str, str]:
    """One migrated graph per backend, built on first use and shared by tests that only read it."""
    return {}


@pytest.fixture
def migrated(backend: str, tmp_path: Path, migrated_sources: dict[str, str]) -> str:
    """A compact format-4 fixture graph, migrated to format 5; shared, so tests must not write it."""
    if backend not in migrated_sources:
        uri = new_root(backend, tmp_path, "migrated")
        build_fixture(uri, compact=True)
        done = cli(MIGRATE, "run", uri, "--owner", "ci")
        assert done.returncode == 0, done.stderr
        migrated_sources[backend] = uri
    return migrated_sources[backend]


@pytest.fixture
def migrated_copy(migrated: str, backend: str, tmp_path: Path) -> str:
    """A private copy of the migrated graph, for a test that changes it."""
    copy = new_root(backend, tmp_path, "copy")
    copy_root(open_store(migrated), open_store(copy))
    return copy


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_run_twice_second_is_up_to_date_and_writes_nothing(migrated: str, tmp_path: Path) -> None:
    before = file_digests(migrated)
    again = cli(MIGRATE, "run", migrated, "--owner", "ci", "--json")
    assert again.returncode == 0, again.stderr
    document = json.loads(again.stdout)
    assert document["status"] == "up_to_date" and document["stamp"] == "5", document
    assert document["verify"]["ok"] is True
    human = cli(MIGRATE, "run", migrated, "--owner", "ci")
    assert human.returncode == 0, human.stderr
    assert human.stdout.strip() == f"{open_store(migrated).uri} is already at format 5, nothing to do"
    report = tmp_path / "report.json"
    playbook = cli(MIGRATE, "playbook", "run", "upgrade", migrated, "--yes", "--report", str(report))
    assert playbook.returncode == 0, playbook.stdout + playbook.stderr
    assert "up to date, nothing to do" in playbook.stdout
    summary = json.loads(report.read_text())
    assert summary["status"] == "up_to_date" and [s["id"] for s in summary["steps"]] == ["preflight"]
    assert file_digests(migrated) == before


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_run_at_stamp_5_with_claim_held_exits_3_naming_a_command_that_releases_it(backend: str, tmp_path: Path) -> None:
    uri = new_root(backend, tmp_path)
    build_fixture(uri, compact=True)
    crashed = cli(MIGRATE, "run", uri, "--owner", "ci", failpoint="migrate.after_stamp")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    assert Manifest(open_store(uri)).read_stamp()[0] == "5"
    refused = cli(MIGRATE, "run", uri, "--owner", "ci", "--json")
    assert refused.returncode == 3, refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "claim_held"
    command = error["message"].split("`")[1]
    assert command.startswith("omnigraph-migrate resume ")
    resumed = cli(str(BIN / command.split()[0]), *command.split()[1:])
    assert resumed.returncode == 0, resumed.stderr
    assert inspect(open_store(uri), CLAIM_PATH) is None
    assert json.loads(cli(MIGRATE, "run", uri, "--owner", "ci", "--json").stdout)["status"] == "up_to_date"


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_run_on_a_graph_that_fails_verify_is_not_up_to_date(migrated_copy: str) -> None:
    """Stamp 5 alone is not enough: rows deleted behind the engine's back fail verify, so run says so."""
    from omnigraph.engine.storage.lance_io import open_dataset

    store = open_store(migrated_copy)
    entry = Manifest(store).snapshot("main").table("node:Person")
    open_dataset(store, entry.table_path, entry.table_branch).delete("id IS NOT NULL")
    refused = cli(MIGRATE, "run", migrated_copy, "--owner", "ci", "--json")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert json.loads(refused.stdout)["error"]["code"] == "drift_detected"


def _result_commands(uri: str) -> list[tuple[str, list[str]]]:
    return [
        (MIGRATE, ["plan", uri]),
        (MIGRATE, ["status", uri]),
        (MIGRATE, ["verify", uri]),
        (MIGRATE, ["duplicates", uri]),
        (OMNIGRAPH, ["snapshot", uri]),
        (OMNIGRAPH, ["branch", "list", uri]),
        (OMNIGRAPH, ["commit", "list", uri]),
    ]


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_results_go_to_stdout_and_stderr_holds_no_result_line(migrated: str) -> None:
    for program, args in _result_commands(migrated):
        human = cli(program, *args)
        document = cli(program, *args, "--json")
        name = " ".join([Path(program).name, args[0]])
        assert human.returncode == 0, (name, human.stdout, human.stderr)
        assert document.returncode == 0, (name, document.stdout, document.stderr)
        assert human.stdout.strip(), f"{name}: no result on stdout"
        json.loads(document.stdout)  # exactly one JSON document on stdout
        result_lines = {line.strip() for line in human.stdout.splitlines() if line.strip()}
        leaked = [line for line in human.stderr.splitlines() if line.strip() in result_lines]
        assert not leaked, f"{name}: result lines on stderr: {leaked}"
        for out in (human.stdout, document.stdout):
            assert "validating ids" not in out and not PROGRESS_BAR.search(out), f"{name}: progress on stdout"
        assert document.stderr == "", f"{name}: stderr of --json: {document.stderr!r}"


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_progress_bar_never_reaches_stdout(migrated: str) -> None:
    done = cli(MIGRATE, "duplicates", migrated)
    assert done.returncode == 0, done.stderr
    assert "validating ids" in done.stderr
    assert done.stdout.strip().splitlines()[-1].endswith("image(s)")
    assert "validating" not in done.stdout and not PROGRESS_BAR.search(done.stdout)


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _is_cli(module: str) -> bool:
    return module == "click" or module.startswith(("click.", "omnigraph.cli.")) or module == "omnigraph.cli"


def test_lower_layers_never_import_the_cli_or_click() -> None:
    offenders = []
    for package in LOWER_LAYERS:
        for path in sorted((PROJECT / package).rglob("*.py")):
            for module in _imported_modules(path):
                if _is_cli(module):
                    offenders.append(f"{path.relative_to(PROJECT)} imports {module}")
    assert offenders == []


def test_the_import_guard_sees_a_violation(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import os\nfrom click import echo\nimport omnigraph.cli.support as s\n")
    assert [m for m in _imported_modules(sample) if _is_cli(m)] == ["click", "omnigraph.cli.support"]


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_reader_that_goes_away_ends_the_command_quietly(migrated: str) -> None:
    """`plan GRAPH | head` style: stdout closed before the result is written; no traceback."""
    for program, args in [(MIGRATE, ["plan", migrated]), (OMNIGRAPH, ["commit", "list", migrated]), (OMNIGRAPH, ["export", migrated])]:
        process = subprocess.Popen([program, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        stderr = process.stderr.read()
        assert process.wait(timeout=120) == 0, stderr
        assert "Traceback" not in stderr and "error" not in stderr.lower(), stderr


def test_usage_errors_exit_2_and_unusable_files_exit_1(tmp_path: Path) -> None:
    """The one rule of ``docs/errors.md`` ("Usage or bad request"): the command line itself (an option
    missing, unknown, of the wrong form, or combined with one it excludes) is a usage error, exit 2,
    refused before anything is read; a file an option names that cannot be read, is not UTF-8 or
    does not parse is ``bad_request``, exit 1, whichever command reads it."""
    from tests.support.graph_helpers import OMNIGRAPH as ENGINE
    from tests.support.graph_helpers import invoke

    graph, missing = str(tmp_path / "g"), str(tmp_path / "missing")
    latin1 = tmp_path / "latin1.gq"
    latin1.write_bytes("query q() { match { $p: Person } return { $p.name } } # caf\xe9".encode("latin-1"))
    usage = [
        ("load", "--mode", "upsert", "--data", missing, graph),
        ("load", "--mode", "append", graph),
        ("query", "--query", missing, "--params", "[", graph),
        ("query", "--query", missing, "--json", "--format", "csv", graph),
        ("mutate", "--query", missing, "--params", "1", graph),
        ("optimize", "--cleanup-older-than", "soon", graph),
    ]
    for args in usage:
        result = invoke(ENGINE, *args)
        assert result.returncode == 2 and result.stdout == "", result.describe()
    unusable = [
        ("init", "--schema", missing, graph),
        ("load", "--mode", "append", "--data", missing, graph),
        ("query", "--query", missing, graph),
        ("query", "--query", str(latin1), graph),
        ("mutate", "--query", missing, graph),
        ("mutate", "--query", str(latin1), graph),
    ]
    for args in unusable:
        result = invoke(ENGINE, *args, "--json")
        assert result.returncode == 1 and result.json()["error"]["code"] == "bad_request", result.describe()
    assert not Path(graph).exists()


def test_the_readme_command_table_names_every_registered_command() -> None:
    """The README's table of console scripts lists exactly the commands each one registers."""
    import click

    from omnigraph.cli.migrate import cli as migrate_cli
    from omnigraph.cli.omnigraph import cli as engine_cli
    from omnigraph.cli.omnigraph_v4 import cli as v4_cli

    groups = {"omnigraph": engine_cli, "omnigraph-migrate": migrate_cli, "omnigraph-v4": v4_cli}
    table = (PROJECT / "README.md").read_text(encoding="utf-8").split("| binary | what it is |", 1)[1].split("\n\n", 1)[0]
    rows = [re.match(r"\| `([a-z0-9-]+)` \| (.*) \|$", row) for row in table.splitlines() if row.startswith("| `")]
    assert sorted(row.group(1) for row in rows if row) == sorted(groups)
    for program, text in (row.groups() for row in rows if row):
        group = groups[program]
        registered = set(group.list_commands(click.Context(group)))
        named = {word.split()[0].split("/")[0] for word in re.findall(r"`([a-z][a-z-]*(?: [a-z/ -]+)?)`", text)}
        assert registered <= named, (program, sorted(registered - named))
