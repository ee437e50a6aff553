"""Benchmark ``omnigraph mutate`` against a full export of the same table (not a test).

For each size N: build (once) a format-5 graph whose ``node:Person`` holds N rows (``age`` =
i mod 100) and ``edge:Knows`` N-1 edges (a chain). Then ``--runs`` times, on a fresh copy:

1. three ``omnigraph mutate --json`` subprocesses, each measured alone (wall time around it,
   peak RSS from ``os.wait4`` -> ``ru_maxrss``), each required to exit 0 with a commit:
   ``insert`` (one keyed node and one edge to it), ``update`` (``where age = 7``: N/100 rows)
   and ``delete`` (one node, whose two edges the delete cascades to);
2. the baseline, ``omnigraph export --type Person GRAPH`` (one full read of the table, output
   discarded), measured the same way.

Prints the medians per size and each mutation's ratio to the baseline. The driver imports
neither Lance nor the engine (a child's ``ru_maxrss`` includes its spawner's high-water RSS).

Usage: ``.venv/bin/python bench/mutate_bench.py --sizes 10000 100000 --runs 3 --workdir DIR``.
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
SCHEMA = "node Person { name: String @key  age: I32?  note: String? }\nedge Knows: Person -> Person\n"
QUERIES = """
query insert() {
  insert Person { name: "newcomer", age: 1 }
  insert Knows { from: "newcomer", to: "p00000000" }
}
query update() { update Person set { note: "seven" } where age = 7 }
query delete() { delete Person where name = "p00000050" }
"""
MUTATIONS = ("insert", "update", "delete")


def _measure(argv: list[str], discard: bool = False) -> tuple[float, float, int, bytes]:
    """Run ``argv`` and reap it with ``os.wait4`` to read its peak RSS (MiB)."""
    started = time.perf_counter()
    sink = open(os.devnull, "wb") if discard else None  # noqa: SIM115 - the child writes to it; closed after the wait
    process = subprocess.Popen(argv, stdout=sink or subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = b"" if discard else process.stdout.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if sink:
        sink.close()
    return wall, usage.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status), out


def _build(root: Path, size: int) -> Path:
    graph = root / f"graph-{size}"
    if (root / f"graph-{size}.ready").exists():
        return graph
    shutil.rmtree(graph, ignore_errors=True)
    scratch = root / f"scratch-{size}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    (scratch / "schema.pg").write_text(SCHEMA, encoding="utf-8")
    with (scratch / "all.jsonl").open("w", encoding="utf-8") as handle:
        for i in range(size):
            handle.write(json.dumps({"type": "Person", "data": {"name": f"p{i:08d}", "age": i % 100}}) + "\n")
        for i in range(size - 1):
            handle.write(json.dumps({"edge": "Knows", "from": f"p{i:08d}", "to": f"p{i + 1:08d}", "data": {"id": f"k{i:08d}"}}) + "\n")
    for step in (
        ["init", "--schema", str(scratch / "schema.pg"), str(graph)],
        ["load", "--mode", "overwrite", "--data", str(scratch / "all.jsonl"), str(graph)],
    ):
        subprocess.run([OMNIGRAPH, *step], check=True, capture_output=True)
    (root / f"graph-{size}.ready").touch()
    shutil.rmtree(scratch)
    return graph


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args(argv)
    compile_project()
    args.workdir.mkdir(parents=True, exist_ok=True)
    query = args.workdir / "bench.gq"
    query.write_text(QUERIES, encoding="utf-8")
    header = "".join(f" {name + ' s':>9} {name + ' MiB':>11}" for name in (*MUTATIONS, "export"))
    print(f"{'rows':>9}{header} {'update time x':>14} {'update rss x':>13}")
    for size in args.sizes:
        fixture = _build(args.workdir, size)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in (*MUTATIONS, "export")}
        for run in range(args.runs):
            copy = args.workdir / f"run-{size}-{run}"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(fixture, copy)
            for name in MUTATIONS:
                wall, rss, code, out = _measure([OMNIGRAPH, "mutate", "--query", str(query), "--name", name, "--json", str(copy)])
                if code != 0 or json.loads(out)["commit"] is None:
                    print(f"mutate {name} failed at {size} rows (exit {code}): {out[:500]!r}", file=sys.stderr)
                    return 3
                samples[name].append((wall, rss))
            wall, rss, code, _ = _measure([OMNIGRAPH, "export", "--type", "Person", str(copy)], discard=True)
            if code != 0:
                print(f"export failed at {size} rows (exit {code})", file=sys.stderr)
                return 3
            samples["export"].append((wall, rss))
            shutil.rmtree(copy)
        medians = {name: (statistics.median(w for w, _ in s), statistics.median(r for _, r in s)) for name, s in samples.items()}
        cells = "".join(f" {medians[name][0]:>9.2f} {medians[name][1]:>11.1f}" for name in (*MUTATIONS, "export"))
        ratio_time = medians["update"][0] / medians["export"][0]
        ratio_rss = medians["update"][1] / medians["export"][1]
        print(f"{size:>9}{cells} {ratio_time:>14.2f} {ratio_rss:>13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
