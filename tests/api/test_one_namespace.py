"""The distribution installs one import name, ``omnigraph``, so an application with packages of its
own called ``engine``, ``server``, ``cli``, ``ledger``, ``claims``, ``migrator`` or ``playbooks`` can
use the library.

* From inside such an application directory (its packages first on ``sys.path``), a script imports
  ``omnigraph`` and its own packages side by side, inits a graph, loads, queries, snapshots,
  migrates a format-4 graph, and finds that every module named like an application package is the
  application's own.
* Each console script runs with the application's packages first on ``PYTHONPATH``.
* The wheel the project builds holds only ``omnigraph/`` (and its ``dist-info``), whose
  ``top_level.txt`` names ``omnigraph`` alone, and so does the installed distribution's metadata.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from tests.support.graph_helpers import BIN

ROOT = Path(__file__).resolve().parents[2]
APPLICATION_PACKAGES = ("engine", "server", "cli", "ledger", "claims", "migrator", "playbooks")

# Run from the application directory: the application's packages come first on sys.path.
APPLICATION_SCRIPT = """
import json, sys
from pathlib import Path

import engine, server, cli, ledger, claims, migrator, playbooks  # the application's own packages
import omnigraph
import omnigraph.migrate

schema, work = Path(sys.argv[1]), Path(sys.argv[2])
with omnigraph.init(work / "g5", schema) as graph:
    loaded = graph.load([{"type": "Person", "data": {"name": "Ada", "age": 36}}], mode="append")
    answer = graph.query('query q() { match { $p: Person } return { $p.name } }')
    snapshot = graph.snapshot()
with omnigraph.init(work / "g4", schema, program=omnigraph.FORMAT_4_WRITER) as legacy:
    legacy.load([{"type": "Person", "data": {"name": "Grace", "age": 61}}], mode="append")
migrated = omnigraph.migrate.run(str(work / "g4"), owner="app")
ours = {
    name: getattr(module, "__file__", None)
    for name, module in sorted(sys.modules.items())
    if name.split(".")[0] in ("engine", "server", "cli", "ledger", "claims", "migrator", "playbooks")
}
print(json.dumps({
    "owners": sorted({engine.OWNER, server.OWNER, cli.OWNER, ledger.OWNER, claims.OWNER, migrator.OWNER, playbooks.OWNER}),
    "loaded": sum(loaded.rows.values()),
    "rows": [row["p.name"] for row in answer.to_pylist()],
    "pk": sorted({tuple(table.pk) for table in snapshot.tables}),
    "migrated": migrated.stamp,
    "modules": ours,
}))
"""


@pytest.fixture
def application(tmp_path: Path) -> Path:
    """An application directory with packages named like the project's folders (each knows it is
    the application's: ``OWNER``), and nothing more: any import of one of those names that expects
    the project's modules fails."""
    app = tmp_path / "app"
    for name in APPLICATION_PACKAGES:
        (app / name).mkdir(parents=True)
        (app / name / "__init__.py").write_text('OWNER = "application"\n', encoding="utf-8")
    return app


def _environment(app: Path) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("OMNIGRAPH_FAILPOINTS", "PYTHONPATH")}
    environment["PYTHONPATH"] = str(app)  # the application's packages first, for the console scripts too
    return environment


def test_an_application_with_packages_named_like_ours_uses_the_library(application: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", APPLICATION_SCRIPT, str(ROOT / "examples" / "social.pg"), str(work)],
        cwd=application,
        env=_environment(application),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["owners"] == ["application"]
    assert report["loaded"] == 1 and report["rows"] == ["Ada"] and report["pk"] == [["id"]]
    assert report["migrated"] == "5"
    assert report["modules"] and all(Path(path).is_relative_to(application) for path in report["modules"].values()), report["modules"]


@pytest.mark.parametrize(
    ("program", "args", "expected"),
    [
        ("omnigraph", ("version",), "omnigraph "),
        ("omnigraph", ("snapshot", "{graph}"), "branch main  manifest v2  format 5"),
        ("omnigraph", ("export", "{graph}"), '{"type": "Person"'),
        ("omnigraph-v4", ("--help",), "Usage: omnigraph-v4"),
        ("omnigraph-migrate", ("status", "{graph}"), "graph "),
        ("omnigraph-migrate", ("verify", "{graph}"), "ok: every live table"),
    ],
)
def test_every_console_script_runs_with_the_application_packages_first(
    application: Path, tmp_path: Path, program: str, args: tuple[str, ...], expected: str
) -> None:
    graph = tmp_path / "graph"
    schema = ROOT / "examples" / "social.pg"
    subprocess.run([BIN / "omnigraph", "init", "--schema", schema, graph], check=True, capture_output=True, timeout=120)
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"type": "Person", "data": {"name": "Ada", "age": 36}}) + "\n", encoding="utf-8")
    subprocess.run([BIN / "omnigraph", "load", "--mode", "append", "--data", data, graph], check=True, capture_output=True, timeout=120)
    done = subprocess.run(
        [BIN / program, *(arg.format(graph=graph) for arg in args)],
        cwd=application,
        env=_environment(application),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(expected), done.stdout


def test_the_installed_distribution_names_one_top_level_package() -> None:
    distribution = metadata.distribution("omnigraph-fence")
    top_level = distribution.read_text("top_level.txt")
    assert top_level is not None and top_level.split() == ["omnigraph"]
    scripts = {entry.name: entry.value for entry in distribution.entry_points if entry.group == "console_scripts"}
    assert sorted(scripts) == ["omnigraph", "omnigraph-migrate", "omnigraph-v4"]
    assert all(target.startswith("omnigraph.cli.") for target in scripts.values()), scripts


def test_the_wheel_holds_only_the_omnigraph_package(tmp_path: Path) -> None:
    """Built from a copy of the source tree (the build writes ``build/`` and ``*.egg-info`` there)."""
    source = tmp_path / "source"
    shutil.copytree(
        ROOT,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "build", "dist", "demo-out", ".pytest_cache"),
    )
    done = subprocess.run(
        [str(BIN / "uv"), "build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [wheel] = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        top_level = archive.read(next(n for n in names if n.endswith(".dist-info/top_level.txt"))).decode()
    assert sorted({name.split("/")[0] for name in names}) == ["omnigraph", "omnigraph_fence-0.1.0.dist-info"]
    assert top_level.split() == ["omnigraph"]
    for module in (
        "omnigraph/engine/storage/store.py",
        "omnigraph/migrator/run.py",
        "omnigraph/cli/omnigraph.py",
        "omnigraph/server/app.py",
    ):
        assert module in names, module
    assert "omnigraph/playbooks/upgrade.yaml" in names and "omnigraph/ledger/record-schema.json" in names
