"""The write cost gate and load throughput, against Lance alone (a benchmark, not a test).

Write cost: for each size N (rows in one keyed format-5 table) and each index layout (no index;
a BTREE on ``id`` added by hand), ``--runs`` times, each in its own process (``write_ops.py``):

* a fenced 32-row upsert (``omnigraph.engine.ops.load.load`` with ``mode="merge"``, 32 existing ids) on a fresh
  copy of the fixture graph;
* a fenced 32-row strict insert (``mode="append"``, 32 new ids) on another fresh copy;
* the floor: Lance alone streams the ``id`` column of the same pinned table version.

Load throughput (``--load-rows``, default 1M): ``omnigraph load --mode overwrite`` and
``omnigraph load --mode append --chunk-rows C`` of the same JSONL rows into a freshly initialised
graph, against ``lance.write_dataset`` of the same rows from an Arrow IPC file; for reference
(not gated), ``pyarrow.json`` reading the JSONL then ``lance.write_dataset``, the least a JSONL
load does.

Every process is timed with a wall clock around ``Popen`` ... ``os.wait4`` (peak RSS from its
rusage), medians of the runs, ratios taken within one invocation. Each child also reports
``op_s``, the seconds of the operation itself (without interpreter start, imports and opening),
shown next to the whole-process figure.

Usage: ``.venv/bin/python bench/write_bench.py --sizes 10k 100k 1M --runs 3 --workdir bench/out``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from bytecode import compile_project  # noqa: E402
from migrate_bench import MIB, BenchFailure, Measurement, human, measure, parse_size, say  # noqa: E402

OPS = BENCH_DIR / "write_ops.py"
OMNIGRAPH = Path(sys.executable).parent / "omnigraph"
WRITE_TARGET, RSS_TARGET_MIB, LOAD_TARGET = 1.3, 256, 0.5
LOAD_SCHEMA = "node Item {\n    name: String @key\n    n: I64\n}\n"


def ops(*args: str) -> list[str]:
    return [sys.executable, str(OPS), *args]


def ensure_fixture(workdir: Path, size: int, btree: bool) -> Path:
    directory = workdir / f"write-fixture-{size}-{'btree' if btree else 'plain'}"
    if (directory / "fixture.json").exists():
        return directory
    if directory.exists():
        shutil.rmtree(directory)
    say(f"N={human(size)}: building the format-5 fixture{' with a BTREE on id' if btree else ''} ...")
    measure("build", size, 0, ops("build", "--rows", str(size), "--out", str(directory), *(["--btree"] if btree else [])))
    return directory


def on_copy(fixture: Path, workdir: Path, kind: str, size: int, run: int) -> Measurement:
    copy = workdir / f"write-run-{size}-{kind}"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(fixture, copy)
    try:
        return measure(kind, size, run, ops(kind, str(copy / "graph")))
    finally:
        shutil.rmtree(copy)


def median(runs: list[Measurement], attribute: str) -> float:
    values = [getattr(r, attribute) if attribute != "op_s" else r.output["op_s"] for r in runs]
    return statistics.median(values)


def write_cost(workdir: Path, sizes: list[int], runs: int) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        for btree in (False, True):
            fixture = ensure_fixture(workdir, size, btree)
            measured: dict[str, list[Measurement]] = {"upsert": [], "insert": [], "scan": []}
            for run in range(runs):
                measured["upsert"].append(on_copy(fixture, workdir, "upsert", size, run))
                measured["insert"].append(on_copy(fixture, workdir, "insert", size, run))
                measured["scan"].append(measure("scan", size, run, ops("scan", str(fixture / "graph"))))
            row: dict[str, Any] = {"rows": size, "btree": btree, "loadavg": [m.loadavg_before for m in measured["scan"]]}
            for kind, items in measured.items():
                row[kind] = {
                    "wall_s": median(items, "wall_s"),
                    "op_s": median(items, "op_s"),
                    "maxrss_mib": round(median(items, "maxrss_kib") / MIB, 1),
                }
            for kind in ("upsert", "insert"):
                row[f"{kind}_x"] = round(row[kind]["wall_s"] / row["scan"]["wall_s"], 2)
                row[f"{kind}_op_x"] = round(row[kind]["op_s"] / row["scan"]["op_s"], 2)
            rows.append(row)
            say(f"N={human(size)} btree={btree}: upsert {row['upsert_x']}x, insert {row['insert_x']}x the id scan")
    return rows


def load_throughput(workdir: Path, rows: int, chunk_rows: int, runs: int) -> dict[str, Any]:
    data = workdir / f"load-data-{rows}"
    if not (data / "rows.arrow").exists():
        say(f"writing {human(rows)} load rows (JSONL and Arrow) ...")
        measure("load-data", rows, 0, ops("load-data", "--rows", str(rows), "--out", str(data)))
    schema = workdir / "load-schema.pg"
    schema.write_text(LOAD_SCHEMA, encoding="utf-8")
    measured: dict[str, list[Measurement]] = {"overwrite": [], "append": [], "lance": [], "json_lance": []}
    for run in range(runs):
        for kind in ("overwrite", "append"):
            graph = Path(tempfile.mkdtemp(dir=workdir, prefix="load-graph-")) / "g"
            measure("init", rows, run, [str(OMNIGRAPH), "init", "--schema", str(schema), str(graph), "--json"])
            extra = ["--chunk-rows", str(chunk_rows)] if kind == "append" else []
            result = measure(
                kind, rows, run, [str(OMNIGRAPH), "load", "--mode", kind, "--data", str(data / "rows.jsonl"), *extra, str(graph), "--json"]
            )
            measured[kind].append(result)
            shutil.rmtree(graph.parent)
        target = Path(tempfile.mkdtemp(dir=workdir, prefix="load-lance-")) / "t.lance"
        measured["lance"].append(measure("lance", rows, run, ops("lance-write", str(data / "rows.arrow"), str(target))))
        shutil.rmtree(target.parent)
        target = Path(tempfile.mkdtemp(dir=workdir, prefix="load-json-lance-")) / "t.lance"
        measured["json_lance"].append(measure("json_lance", rows, run, ops("json-lance", str(data / "rows.jsonl"), str(target))))
        shutil.rmtree(target.parent)
    summary: dict[str, Any] = {"rows": rows, "chunk_rows": chunk_rows}
    for kind, items in measured.items():
        wall = median(items, "wall_s")
        summary[kind] = {"wall_s": wall, "rows_per_s": round(rows / wall), "maxrss_mib": round(median(items, "maxrss_kib") / MIB, 1)}
    for kind in ("overwrite", "append", "json_lance"):
        summary[f"{kind}_x"] = round(summary[kind]["rows_per_s"] / summary["lance"]["rows_per_s"], 2)
    return summary


def render_cost(cost: list[dict[str, Any]], runs: int) -> str:
    lines = [
        f"fenced 32-row writes vs a Lance-only id scan of the same table; medians of {runs} run(s); whole process (op only in brackets)",
        "| N | BTREE on id | upsert s | insert s | id scan s | upsert x | insert x | upsert RSS MiB | insert RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in cost:
        lines.append(
            f"| {human(r['rows'])} | {'yes' if r['btree'] else 'no'} "
            f"| {r['upsert']['wall_s']:.2f} ({r['upsert']['op_s']:.2f}) | {r['insert']['wall_s']:.2f} ({r['insert']['op_s']:.2f}) "
            f"| {r['scan']['wall_s']:.2f} ({r['scan']['op_s']:.2f}) | {r['upsert_x']} ({r['upsert_op_x']}) "
            f"| {r['insert_x']} ({r['insert_op_x']}) | {r['upsert']['maxrss_mib']:.0f} | {r['insert']['maxrss_mib']:.0f} |"
        )
    largest = max((r["rows"] for r in cost), default=0)
    for r in (r for r in cost if r["rows"] == largest):
        worst = max(r["upsert_x"], r["insert_x"])
        rss = max(r["upsert"]["maxrss_mib"], r["insert"]["maxrss_mib"])
        verdict = "PASS" if worst <= WRITE_TARGET and rss <= RSS_TARGET_MIB else "FAIL"
        lines.append(
            f"write gate at N={human(largest)}, BTREE {'yes' if r['btree'] else 'no'}: {verdict}: "
            f"worst {worst}x the id scan (target <= {WRITE_TARGET}x), peak RSS {rss:.0f} MiB (target <= {RSS_TARGET_MIB})"
        )
    return "\n".join(lines)


def render_load(load: dict[str, Any], load_runs: int) -> str:
    lines = [f"load of {human(load['rows'])} rows; medians of {load_runs} run(s); whole process"]
    lines.append("| path | wall s | rows/s | peak RSS MiB | x lance.write_dataset rows/s |")
    lines.append("|---|---|---|---|---|")
    for kind, label in (
        ("overwrite", "omnigraph load --mode overwrite"),
        ("append", f"omnigraph load --mode append --chunk-rows {load['chunk_rows']}"),
        ("lance", "lance.write_dataset (Arrow IPC in)"),
        ("json_lance", "pyarrow.json + lance.write_dataset (JSONL in; reference, not gated)"),
    ):
        ratio = load.get(f"{kind}_x", 1.0)
        lines.append(f"| {label} | {load[kind]['wall_s']:.2f} | {load[kind]['rows_per_s']} | {load[kind]['maxrss_mib']:.0f} | {ratio} |")
    worst = min(load["overwrite_x"], load["append_x"])
    lines.append(f"load gate: {'PASS' if worst >= LOAD_TARGET else 'FAIL'}: worst {worst}x Lance's rows/s (target >= {LOAD_TARGET}x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=parse_size, default=[10_000, 100_000, 1_000_000], metavar="N")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "omnigraph-write-bench")
    parser.add_argument("--load-rows", type=parse_size, default=1_000_000, help="rows for the load comparison (0: skip it)")
    parser.add_argument(
        "--chunk-rows", type=int, default=8192, help="--chunk-rows of the append load (the engine refuses more than 8192 rows per commit)"
    )
    parser.add_argument("--load-runs", type=int, default=None, help="runs of the load comparison (default: --runs)")
    parser.add_argument("--load-only", action="store_true", help="skip the write cost gate (only the load comparison)")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args(argv)
    compile_project()
    args.workdir.mkdir(parents=True, exist_ok=True)
    load_runs = args.load_runs or args.runs
    try:
        cost = [] if args.load_only else write_cost(args.workdir, sorted(args.sizes), args.runs)
        if cost:
            print(render_cost(cost, args.runs), flush=True)
        if args.json:
            args.json.write_text(json.dumps({"write_cost": cost, "load": None}, indent=1) + "\n", encoding="utf-8")
        if not args.load_rows:
            return 0
        load = load_throughput(args.workdir, args.load_rows, args.chunk_rows, load_runs)
    except BenchFailure as failure:
        say(str(failure))
        return 3
    print()
    print(render_load(load, load_runs))
    if args.json:
        args.json.write_text(json.dumps({"write_cost": cost, "load": load}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
