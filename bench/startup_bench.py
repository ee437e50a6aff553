"""Benchmark the console scripts' start-up against ``python -c "import lance"`` (not a test).

Each command is a whole process, the console script next to ``sys.executable``, timed with a
wall clock around ``Popen`` ... ``os.wait4``; its peak RSS is ``ru_maxrss`` from that ``wait4``
(KiB on Linux, shown in MiB). ``--runs`` rounds (default 5) each run every command once, in
order, so the baseline and the commands share the machine's state; each figure is the median of
its runs, and the ratio is that median over the median of ``python -c "import lance"``.

Commands (issue 24's targets: ``--help`` and ``version`` at most 0.25x the baseline, the graph
commands at most 1.3x):

* ``omnigraph --help``, ``omnigraph version``, ``omnigraph-v4 --help``, ``omnigraph-migrate --help``;
* ``omnigraph snapshot G5`` and ``omnigraph load --mode merge --data ONE G5`` (one ``Person``
  row, upserted, so every run commits the same row again) on a format-5 example graph;
* ``omnigraph-migrate status G4`` and ``omnigraph-migrate preflight G4`` on a format-4 example
  graph (``omnigraph-v4 init`` and ``load``; both commands only read).

Floors, measured the same way in the same rounds: ``python -c pass``, ``python -c "import
click"`` and ``python -c "import pyarrow"``. The graphs are built before the first round (not
measured) in a temporary directory, removed at the end. The driver imports only the standard
library, so its own RSS does not inflate the children's ``ru_maxrss``. Every measured process
must exit 0.

``--baseline TREE`` runs every command with a target a second time in each round, as
``python -c "...; main()"`` with ``TREE`` (a checkout of the project, e.g. at the commit before a
change; its ``bench/bytecode.py`` is run first) first on ``sys.path``, so that its modules are
imported instead of the installed ones: its rows (``[baseline]``) are measured in the same rounds.

``--split`` then splits each graph command's time: ``--runs`` fresh interpreters, with the cyclic
collector held off as the console scripts hold it while they start, each time each import in
turn: click, Lance (with numpy and pyarrow), pydantic (with the modules it imports only when the
first model is defined), tenacity, the project's modules the command needs
(:data:`PROJECT_MODULES`, with what they import); then they call the script's ``main()``, as the
console script does, and time the command (the imports it still makes, and its work) up to the
first ``atexit`` handler of its exit. Each is also timed as a whole process, beside a ``python -c
pass`` (the interpreter's start); what the steps and the start leave of that wall time is the
process's exit: the ``atexit`` handlers and, unless the script skips it (:mod:`omnigraph.cli.console`),
the interpreter's teardown. Medians of the runs. To split another tree's commands, put it on
``PYTHONPATH`` and run from outside any project tree (``python -c`` puts the working directory
first on ``sys.path``).

Usage: ``.venv/bin/python bench/startup_bench.py [--runs 5] [--split] [--baseline TREE] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bytecode import compile_project

BENCH_DIR = Path(__file__).resolve().parent
PROJECT = BENCH_DIR.parent
SCHEMA = PROJECT / "examples" / "social.pg"
DATA = PROJECT / "examples" / "social.jsonl"
BIN = Path(sys.executable).parent
PYTHON = sys.executable
MIB = 1024.0
BASELINE = "import lance"
HELP_TARGET = 0.25
GRAPH_TARGET = 1.3
THIRD_PARTY = ("click", "lance", "pydantic", "tenacity")
# What each step of the split imports: pydantic imports its model machinery (pydantic.main, its
# fields and types) only when the first model is defined, which would count it as the project's.
THIRD_PARTY_IMPORTS = [
    ("pydantic", "pydantic.main", "pydantic.fields", "pydantic.types") if name == "pydantic" else (name,) for name in THIRD_PARTY
]
# The project's modules each graph command needs: its script's group, its command module, the API.
PROJECT_MODULES = {
    "omnigraph snapshot G5": ("omnigraph.cli.omnigraph", "omnigraph.cli.shared_commands", "omnigraph.graph"),
    "omnigraph load (1 row) G5": ("omnigraph.cli.omnigraph", "omnigraph.cli.shared_commands", "omnigraph.graph", "omnigraph.inputs"),
    "omnigraph-migrate status G4": ("omnigraph.cli.migrate", "omnigraph.cli.migrate_commands", "omnigraph.migrator.inspection", "ledger"),
    "omnigraph-migrate preflight G4": (
        "omnigraph.cli.migrate",
        "omnigraph.cli.migrate_commands",
        "omnigraph.migrator.inspection",
        "omnigraph.migrate",
    ),
}
SPLIT_PROBE = """
import atexit, gc, importlib, json, sys, time
gc.disable()  # as the console script holds the collector off while it starts (omnigraph.cli.console)
script_module, program, modules, *args = sys.argv[1:]
marks = [time.perf_counter()]
for step in [*THIRD_PARTY_IMPORTS, None]:
    for module in step or modules.split(","):
        importlib.import_module(module)
    marks.append(time.perf_counter())


def report():
    marks.append(time.perf_counter())
    print(json.dumps({"steps": [b - a for a, b in zip(marks, marks[1:])]}), file=sys.stderr)


atexit.register(report)  # the first handler of the exit: its mark ends the command's step
sys.argv = [program, *args]
importlib.import_module(script_module).main()
""".replace("THIRD_PARTY_IMPORTS", repr(THIRD_PARTY_IMPORTS))
SCRIPT_MODULES = {
    "omnigraph": "omnigraph.cli.omnigraph",
    "omnigraph-v4": "omnigraph.cli.omnigraph_v4",
    "omnigraph-migrate": "omnigraph.cli.migrate",
}
BASELINE_SUFFIX = " [baseline]"
# A console script's entry point, imported from the tree given first (argv: tree, module, program, args).
BASELINE_ENTRY = """
import sys
tree, module = sys.argv.pop(1), sys.argv.pop(1)
sys.path.insert(0, tree)
sys.argv[0] = sys.argv.pop(1)
from importlib import import_module
sys.exit(import_module(module).main())
"""


def measure(argv: list[str]) -> tuple[float, float]:
    """Run ``argv`` to completion (exit 0 or RuntimeError): wall seconds and peak RSS in MiB."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {process.returncode}: {stderr.decode(errors='replace')}")
    return wall, usage.ru_maxrss / MIB


def build_graphs(workdir: Path) -> tuple[str, str, str]:
    """A format-5 and a format-4 example graph, and a one-row JSONL file: (g5, g4, one_row)."""
    g5, g4, one = workdir / "g5", workdir / "g4", workdir / "one.jsonl"
    one.write_text(json.dumps({"type": "Person", "data": {"name": "Alice", "age": 35}}) + "\n", encoding="utf-8")
    for program, graph in (("omnigraph", g5), ("omnigraph-v4", g4)):
        for args in (["init", "--schema", str(SCHEMA), str(graph)], ["load", "--mode", "append", "--data", str(DATA), str(graph)]):
            subprocess.run([str(BIN / program), *args], check=True, stdout=subprocess.DEVNULL)
    return str(g5), str(g4), str(one)


def commands(g5: str, g4: str, one: str) -> list[tuple[str, list[str], float | None]]:
    """(label, argv, target ratio or None for a floor), the baseline first."""
    omnigraph, v4, migrate = str(BIN / "omnigraph"), str(BIN / "omnigraph-v4"), str(BIN / "omnigraph-migrate")
    return [
        (f'python -c "{BASELINE}"', [PYTHON, "-c", BASELINE], None),
        ('python -c "pass"', [PYTHON, "-c", "pass"], None),
        ('python -c "import click"', [PYTHON, "-c", "import click"], None),
        ('python -c "import pyarrow"', [PYTHON, "-c", "import pyarrow"], None),
        ("omnigraph --help", [omnigraph, "--help"], HELP_TARGET),
        ("omnigraph version", [omnigraph, "version"], HELP_TARGET),
        ("omnigraph-v4 --help", [v4, "--help"], HELP_TARGET),
        ("omnigraph-migrate --help", [migrate, "--help"], HELP_TARGET),
        ("omnigraph snapshot G5", [omnigraph, "snapshot", g5], GRAPH_TARGET),
        ("omnigraph load (1 row) G5", [omnigraph, "load", "--mode", "merge", "--data", one, g5], GRAPH_TARGET),
        ("omnigraph-migrate status G4", [migrate, "status", g4], GRAPH_TARGET),
        ("omnigraph-migrate preflight G4", [migrate, "preflight", g4], GRAPH_TARGET),
    ]


def with_baseline(listed: list[tuple[str, list[str], float | None]], tree: Path) -> list[tuple[str, list[str], float | None]]:
    """``listed``, each command with a target followed by the same command from ``tree``."""
    result = []
    for label, argv, target in listed:
        result.append((label, argv, target))
        if target is not None:
            program = Path(argv[0]).name
            result.append(
                (
                    f"{label}{BASELINE_SUFFIX}",
                    [PYTHON, "-c", BASELINE_ENTRY, str(tree), SCRIPT_MODULES[program], program, *argv[1:]],
                    target,
                )
            )
    return result


def run(runs: int, with_split: bool, baseline: Path | None = None) -> dict[str, object]:
    """Every command ``runs`` times, round-robin (each beside its ``baseline`` run, given a
    tree); the medians, ratios and verdicts (and the split of the graph commands with
    ``with_split``)."""
    workdir = Path(tempfile.mkdtemp(prefix="omnigraph-startup-"))
    try:
        listed = commands(*build_graphs(workdir))
        if baseline is not None:
            subprocess.run([PYTHON, str(baseline / "bench" / "bytecode.py")], check=True)
            listed = with_baseline(listed, baseline)
        samples: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in listed}
        for _ in range(runs):
            for label, argv, _ in listed:
                samples[label].append(measure(argv))
        parts = split(listed, runs) if with_split else []
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    baseline = statistics.median(wall for wall, _ in samples[listed[0][0]])
    rows = []
    for label, _, target in listed:
        wall = statistics.median(w for w, _ in samples[label])
        rss = statistics.median(r for _, r in samples[label])
        ratio = wall / baseline
        rows.append(
            {
                "command": label,
                "wall_s": wall,
                "rss_mib": rss,
                "ratio": ratio,
                "target": target,
                "met": None if target is None else ratio <= target,
                "walls": [w for w, _ in samples[label]],
            }
        )
    return {"runs": runs, "load_average": os.getloadavg(), "cpus": os.cpu_count(), "rows": rows, "split": parts}


def split(listed: list[tuple[str, list[str], float | None]], runs: int) -> list[dict[str, object]]:
    """For each graph command, ``runs`` rounds of ``python -c pass`` and of the command run in
    process by :data:`SPLIT_PROBE`, both whole processes: the median seconds of the interpreter's
    start (``pass``), of each import step and of the command in process, and of the rest of the
    probe's wall time (the process's exit), and the probe's median wall."""
    rows = []
    for label, argv, _ in listed:
        if label not in PROJECT_MODULES:
            continue
        program, args = Path(argv[0]).name, argv[1:]
        probe = [PYTHON, "-c", SPLIT_PROBE, SCRIPT_MODULES[program], program, ",".join(PROJECT_MODULES[label]), *args]
        starts, walls, steps = [], [], []
        for _ in range(runs):
            starts.append(measure([PYTHON, "-c", "pass"])[0])
            began = time.perf_counter()
            completed = subprocess.run(probe, capture_output=True, text=True, check=False)
            walls.append(time.perf_counter() - began)
            if completed.returncode != 0:
                raise RuntimeError(f"split of {label} exited {completed.returncode}: {completed.stderr}")
            steps.append(json.loads(completed.stderr.strip().splitlines()[-1])["steps"])
        parts = [statistics.median(run[i] for run in steps) for i in range(len(steps[0]))]
        start, wall = statistics.median(starts), statistics.median(walls)
        rows.append({"command": label, "start": start, "parts": parts, "rest": wall - start - sum(parts), "wall": wall})
    return rows


def render_split(rows: list[dict[str, object]]) -> str:
    """The split table, milliseconds."""
    names = ["python start", *THIRD_PARTY, "project modules", "command", "rest (exit)", "whole process"]
    lines = ["| command | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for row in rows:
        values = [row["start"], *row["parts"], row["rest"], row["wall"]]  # type: ignore[misc]
        lines.append(f"| `{row['command']}` | " + " | ".join(f"{1000 * v:.0f}" for v in values) + " |")
    return "\n".join(lines)


def render(result: dict[str, object]) -> str:
    """The table: command, median wall (ms), median peak RSS (MiB), ratio to the baseline, target."""
    lines = [
        "| command | wall ms | peak RSS MiB | x import lance | target |",
        "|---|---:|---:|---:|---|",
    ]
    for row in result["rows"]:  # type: ignore[attr-defined]
        target = "floor" if row["target"] is None else f"<= {row['target']}x {'met' if row['met'] else 'MISSED'}"
        lines.append(f"| `{row['command']}` | {1000 * row['wall_s']:.0f} | {row['rss_mib']:.0f} | {row['ratio']:.3f} | {target} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when every target is met, 1 when one is missed (the baseline's rows do not count)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds of every command (the median is reported)")
    parser.add_argument("--split", action="store_true", help="also split each graph command's time (imports, command, rest)")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="TREE",
        help="also run each command with a target from this source tree, in the same rounds",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write every run and the medians here")
    args = parser.parse_args(argv)
    compile_project()
    result = run(args.runs, args.split, args.baseline.resolve() if args.baseline else None)
    print(f"median of {args.runs} runs; load average {result['load_average'][0]:.2f}, {result['cpus']} CPUs")  # type: ignore[index]
    print(render(result))
    if args.split:
        print(f"\nsplit of the graph commands, ms (medians of {args.runs} runs):")
        print(render_split(result["split"]))  # type: ignore[arg-type]
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    rows = [row for row in result["rows"] if not row["command"].endswith(BASELINE_SUFFIX)]  # type: ignore[attr-defined]
    return 0 if all(row["met"] is not False for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
