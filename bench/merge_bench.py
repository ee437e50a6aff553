"""Benchmark ``omnigraph branch merge`` against a full export of the same table (not a test).

For each size N: build (once) a format-5 graph whose ``node:Person`` holds N rows (``load --mode
overwrite``), a branch ``feature`` that updates 5 rows and inserts 5 (with ``--all-changed``:
that overwrites every row with a new age, so the merge brings N updates as a chain of N/8,192
fenced commits), and 10 other rows upserted on ``main`` afterwards (new ones with ``--all-changed``), so the merge is a true
three-way merge that reads the base, source and target images of that table. Then ``--runs`` times, on a fresh copy of that graph:

1. ``omnigraph branch merge feature --json GRAPH`` as a subprocess: wall time around it, peak
   RSS from ``os.wait4`` -> ``ru_maxrss``; it must exit 0 with outcome ``merged``;
2. the baseline, ``omnigraph export --branch main --type Person GRAPH`` (one full read of the
   table, output discarded), measured the same way.

The copies still read the fixture's files for the branch's inherited data (Lance branches refer
to their parent by path, see "What a copy still reads from its source" in docs/operations.md);
the merge writes only into the copy. Prints the medians per size and the merge/baseline ratios. The driver imports neither Lance nor
the engine (a child's ``ru_maxrss`` includes its spawner's high-water RSS).

Usage: ``.venv/bin/python bench/merge_bench.py --sizes 10000 100000 --runs 3 --workdir DIR [--all-changed]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bytecode import compile_project

BIN = Path(sys.executable).parent
OMNIGRAPH = str(BIN / "omnigraph")
SCHEMA = "node Person { name: String @key  age: I32?  note: String? }\n"


def _measure(argv: list[str], discard: bool = False) -> tuple[float, float, int, bytes]:
    """Run ``argv`` and reap it with ``os.wait4`` to read its peak RSS."""
    started = time.perf_counter()
    sink = open(os.devnull, "wb") if discard else None  # noqa: SIM115 - the child writes to it; closed after the wait
    process = subprocess.Popen(argv, stdout=sink or subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = b"" if discard else process.stdout.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if sink:
        sink.close()
    return wall, usage.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status), out


def _people(path: Path, names: list[str], age: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for name in names:
            handle.write(json.dumps({"type": "Person", "data": {"name": name, "age": age, "note": f"n-{name}"}}) + "\n")


def _build(root: Path, size: int, all_changed: bool) -> Path:
    name = f"graph-{size}{'-all' if all_changed else ''}"
    graph = root / name
    if (root / f"{name}.ready").exists():
        return graph
    shutil.rmtree(graph, ignore_errors=True)
    scratch = root / f"scratch-{size}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    (scratch / "schema.pg").write_text(SCHEMA, encoding="utf-8")
    _people(scratch / "all.jsonl", [f"p{i:08d}" for i in range(size)], 1)
    if all_changed:
        _people(scratch / "feature.jsonl", [f"p{i:08d}" for i in range(size)], 2)
    else:
        _people(scratch / "feature.jsonl", [f"p{i:08d}" for i in range(5)] + [f"new{i}" for i in range(5)], 2)
    # main's own rows: 10 updates, or 10 inserts when the branch changes every row (no conflict)
    _people(scratch / "main.jsonl", [f"p{i:08d}" for i in (range(size, size + 10) if all_changed else range(100, 110))], 3)
    building = graph  # built in place: Lance branches refer to their parent dataset by path
    steps = [
        ["init", "--schema", str(scratch / "schema.pg"), str(building)],
        ["load", "--mode", "overwrite", "--data", str(scratch / "all.jsonl"), str(building)],
        ["branch", "create", "feature", str(building)],
        [
            "load",
            "--mode",
            "overwrite" if all_changed else "merge",
            "--data",
            str(scratch / "feature.jsonl"),
            "--branch",
            "feature",
            str(building),
        ],
        ["load", "--mode", "merge", "--data", str(scratch / "main.jsonl"), str(building)],
    ]
    for step in steps:
        subprocess.run([OMNIGRAPH, *step], check=True, capture_output=True)
    (root / f"{name}.ready").touch()
    shutil.rmtree(scratch)
    return graph


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--all-changed", action="store_true", help="the branch changes every row (see the docstring)")
    args = parser.parse_args(argv)
    compile_project()
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(f"{'rows':>9} {'merge s':>8} {'merge MiB':>10} {'export s':>9} {'export MiB':>11} {'time x':>7} {'rss x':>6}")
    for size in args.sizes:
        fixture = _build(args.workdir, size, args.all_changed)
        merges, exports = [], []
        for run in range(args.runs):
            copy = args.workdir / f"run-{size}-{run}"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(fixture, copy)
            wall, rss, code, out = _measure([OMNIGRAPH, "branch", "merge", "feature", "--json", str(copy)])
            if code != 0 or json.loads(out)["outcome"] != "merged":
                print(f"merge failed at {size} rows (exit {code}): {out[:500]!r}", file=sys.stderr)
                return 3
            merges.append((wall, rss))
            wall, rss, code, _ = _measure([OMNIGRAPH, "export", "--branch", "main", "--type", "Person", str(copy)], discard=True)
            if code != 0:
                print(f"export failed at {size} rows (exit {code})", file=sys.stderr)
                return 3
            exports.append((wall, rss))
            shutil.rmtree(copy)
        m_wall, m_rss = statistics.median(w for w, _ in merges), statistics.median(r for _, r in merges)
        e_wall, e_rss = statistics.median(w for w, _ in exports), statistics.median(r for _, r in exports)
        print(f"{size:>9} {m_wall:>8.2f} {m_rss:>10.1f} {e_wall:>9.2f} {e_rss:>11.1f} {m_wall / e_wall:>7.2f} {m_rss / e_rss:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
