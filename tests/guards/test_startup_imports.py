"""Start-up cost of the console scripts: what ``--help`` and ``version`` import, and that the lazy
command tables tell the truth.

* ``--help`` of each console script and ``omnigraph version`` run in a fresh interpreter (the
  script's click group, called as its entry point calls it) and load none of Lance, Arrow,
  DuckDB or FastAPI; the other two scripts have no ``version`` command.
* Invoking a lazy subcommand imports its module, and the group's ``--help`` does not.
* ``omnigraph snapshot`` and ``load`` (one commit) on a small format-5 graph, ``omnigraph-migrate
  status`` and ``preflight`` on a format-4 one, load none of the engine's capabilities they do not
  use (:data:`NOT_NEEDED`): the query language, the other writes, the check, the migration,
  DuckDB, FastAPI, and fsspec (a local root is read with plain file calls). Each entry is a module a module-level import used to bring in.
* Each script's ``--help`` listing, printed from the table without importing a command, is the
  listing click prints with every command loaded, at narrow and wide terminals; every table
  entry builds a command of its own name from a module under ``cli``.

``bench/startup_bench.py`` measures the same commands' wall time and memory.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

import omnigraph
from omnigraph.cli.lazy import LazyGroup

HEAVY = ("lance", "pyarrow", "duckdb", "fastapi")
SCRIPTS = {
    "omnigraph": "omnigraph.cli.omnigraph",
    "omnigraph-v4": "omnigraph.cli.omnigraph_v4",
    "omnigraph-migrate": "omnigraph.cli.migrate",
}
PROJECT = Path(__file__).resolve().parents[2]
TABLES = ("omnigraph.cli.shared_commands",)  # holds the table entries of the commands both engine CLIs share
# The script's own group, run as its console entry point runs it; then every loaded module's name.
PROBE = """
import json, sys
from importlib import import_module
group = import_module(sys.argv[1]).cli
code = group.main(sys.argv[3:], prog_name=sys.argv[2], standalone_mode=False)
sys.stdout.flush()
print(json.dumps({"exit": code or 0, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _run(program: str, *args: str | Path) -> tuple[str, set[str]]:
    """``program args`` in a fresh interpreter: its stdout and the modules loaded when it ended."""
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, SCRIPTS[program], program, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stderr.strip().splitlines()[-1])
    assert report["exit"] == 0, completed.stderr
    return completed.stdout, set(report["modules"])


def _loaded(names: tuple[str, ...], modules: set[str]) -> list[str]:
    """The ``names`` among ``modules``: each a module or a package any of whose modules is loaded."""
    return sorted(name for name in names if name in modules or any(m.startswith(name + ".") for m in modules))


def _heavy(modules: set[str]) -> list[str]:
    return _loaded(HEAVY, modules)


@pytest.mark.parametrize(
    ("program", "args", "expected"),
    [
        ("omnigraph", ("--help",), "Usage: omnigraph [OPTIONS] COMMAND [ARGS]..."),
        ("omnigraph", ("version",), "omnigraph "),
        ("omnigraph-v4", ("--help",), "Usage: omnigraph-v4 [OPTIONS] COMMAND [ARGS]..."),
        ("omnigraph-migrate", ("--help",), "Usage: omnigraph-migrate [OPTIONS] COMMAND [ARGS]..."),
    ],
)
def test_help_and_version_load_no_lance_arrow_duckdb_or_fastapi(program: str, args: tuple[str, ...], expected: str) -> None:
    out, modules = _run(program, *args)
    assert out.startswith(expected), out
    assert _heavy(modules) == []
    assert sorted(m for m in modules if m.startswith("omnigraph.cli.") and m not in TABLES) == sorted(
        {SCRIPTS[program], "omnigraph.cli.console", "omnigraph.cli.lazy"}
        | ({"omnigraph.cli.support"} if program != "omnigraph-migrate" else set())
    )


@pytest.mark.parametrize("command", ["run", "resume", "refence", "verify"])
def test_the_help_of_a_migrator_command_loads_no_lance_arrow_duckdb_or_fastapi(command: str) -> None:
    """Its --executor and --queries options name their choices without the validator's imports."""
    out, modules = _run("omnigraph-migrate", command, "--help")
    assert out.startswith(f"Usage: omnigraph-migrate {command} [OPTIONS] GRAPH"), out
    assert _heavy(modules) == []


def test_a_lazy_command_is_imported_when_invoked_and_not_before() -> None:
    listed, before = _run("omnigraph", "--help")
    assert "serve" in listed and "omnigraph.cli.serve_commands" not in before
    shown, after = _run("omnigraph", "serve", "--help")
    assert shown.startswith("Usage: omnigraph serve [OPTIONS] GRAPH")
    assert {"omnigraph.cli.serve_commands", "omnigraph.server.settings", "pydantic"} <= after
    assert "omnigraph.cli.token_commands" not in after and _heavy(after) == []


# Not imported by a one-shot command on the example graph; all were, at module level, until the
# engine's capabilities were imported where they are used (``bench/README.md``, "Start-up").
NOT_NEEDED_ANYWHERE = (
    "duckdb",
    "fastapi",
    "fsspec",
    "omnigraph.engine.gq",
    "omnigraph.engine.query",
    "omnigraph.engine.maintenance.check",
    "omnigraph.engine.ops.merge",
    "omnigraph.engine.ops.mutate",
    "omnigraph.migrator.verify",
    "omnigraph.migrator.verify",
    "omnigraph.migrator.run",
)
NOT_NEEDED = {
    "snapshot": (
        *NOT_NEEDED_ANYWHERE,
        "omnigraph.engine.ops.load",
        "omnigraph.engine.ops.write",
        "omnigraph.engine.ops.export",
        "omnigraph.engine.records",
        "omnigraph.engine.reconcile",
        "omnigraph.engine.access.fleet",
        "omnigraph.engine.access.writer_audit",
        "omnigraph.inputs",
        "pydantic",
    ),
    "load": (*NOT_NEEDED_ANYWHERE, "omnigraph.engine.ops.export", "omnigraph.engine.ops.branches", "omnigraph.engine.access.fleet"),
    "status": (
        *NOT_NEEDED_ANYWHERE,
        "omnigraph.engine.ops",
        "omnigraph.engine.graph",
        "omnigraph.engine.reconcile.drift",
        "omnigraph.engine.access.fleet",
        # it reaches the migrator through the door, omnigraph.migrate, which imports what a command drives when it runs
        "omnigraph.migrator.inspection",
        "omnigraph.migrator.plan",
        "omnigraph.migrator.executors",
    ),
    # (intents and their resolution are one module, omnigraph.engine.reconcile.recovery: preflight lists intents)
    "preflight": (*NOT_NEEDED_ANYWHERE, "omnigraph.engine.ops", "omnigraph.migrator.claim"),
}


@pytest.fixture(scope="module")
def example_graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The example graph at format 5 (``g5``) and at format 4 (``g4``), and a one-row JSONL file."""
    root = tmp_path_factory.mktemp("startup")
    for name, program in (("g5", omnigraph.ENGINE), ("g4", omnigraph.FORMAT_4_WRITER)):
        with omnigraph.init(root / name, PROJECT / "examples" / "social.pg", program=program) as graph:
            graph.load(PROJECT / "examples" / "social.jsonl", mode="append")
    one = root / "one.jsonl"
    one.write_text(json.dumps({"type": "Person", "data": {"name": "Alice", "age": 35}}) + "\n", encoding="utf-8")
    return {"g5": root / "g5", "g4": root / "g4", "one": one}


@pytest.mark.parametrize(
    ("command", "program", "args", "expected"),
    [
        ("snapshot", "omnigraph", ("snapshot", "g5"), "branch main  manifest v2  format 5"),
        ("load", "omnigraph", ("load", "--mode", "merge", "--data", "one", "g5"), "loaded 1 rows into main in 1 commit(s)"),
        ("status", "omnigraph-migrate", ("status", "g4"), "graph "),
        ("preflight", "omnigraph-migrate", ("preflight", "g4"), "ready: "),
    ],
)
def test_a_graph_command_loads_only_what_it_uses(
    command: str, program: str, args: tuple[str, ...], expected: str, example_graphs: dict[str, Path]
) -> None:
    out, modules = _run(program, *(example_graphs.get(arg, arg) for arg in args))
    assert out.startswith(expected), out
    assert _loaded(NOT_NEEDED[command], modules) == []
    assert {"lance", "omnigraph.engine.storage"} <= modules  # it did open the graph


def _group(program: str) -> LazyGroup:
    group = importlib.import_module(SCRIPTS[program]).cli
    assert isinstance(group, LazyGroup)
    return group


def _help(group: click.Group, program: str, width: int) -> str:
    return group.get_help(click.Context(group, info_name=program, terminal_width=width))


@pytest.mark.parametrize("program", sorted(SCRIPTS))
def test_the_listing_from_the_table_is_the_listing_of_the_loaded_commands(program: str) -> None:
    group = _group(program)
    eager = {name: command for name, command in group.commands.items() if name not in group.lazy_commands}
    unloaded = LazyGroup(name=group.name, help=group.help, commands=dict(eager), lazy_commands=group.lazy_commands)
    loaded = click.Group(
        name=group.name, help=group.help, commands={**eager, **{name: lazy.load() for name, lazy in group.lazy_commands.items()}}
    )
    for width in (50, 80, 120, 200):
        assert _help(unloaded, program, width) == _help(loaded, program, width)
    assert set(unloaded.commands) == set(eager)  # printing the listing loaded nothing


@pytest.mark.parametrize("program", sorted(SCRIPTS))
def test_every_table_entry_builds_its_command_from_the_cli_package(program: str) -> None:
    group = _group(program)
    for name, lazy in group.lazy_commands.items():
        assert lazy.target.startswith("omnigraph.cli."), lazy.target
        command = lazy.load()
        assert command.name == name and not command.hidden
        for limit in (20, 45, 80, 1000):
            assert click.Command(name, help=lazy.short_help).get_short_help_str(limit) == command.get_short_help_str(limit), name
