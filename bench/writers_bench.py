"""Benchmark many writer processes on one graph: contention on one branch, scaling across branches, the lease's cost (not a test).

Scenarios, each run on a fresh local graph (``node Person { name: String @key tag: String? }``):

* ``one-branch N`` (N = 1, 4, 16): N writer processes upsert single rows into ``main`` for
  ``--seconds``; they contend for ``main``'s lease;
* ``own-branch N`` (N = 1 .. the core count): each of N writer processes upserts into a branch of
  its own (``b0`` .. ``bN-1``, created before the run); no lease is shared;
* ``no-lease 1``: one writer on ``main`` with the lease step replaced by nothing (the engine's
  ``omnigraph.engine.ops.write._branch_lease`` swapped for a null context inside that writer only):
  the single-process protocol without the lease, to set the lease's cost against.

A writer is this script in ``_writer`` mode: it opens the graph once with the Python API
(``omnigraph.open``), makes one warm-up write, waits for a common start time, then calls
``Graph.load([...], mode="merge")`` with one ``Person`` (its own 50 ids in turn) until the
window ends, timing each commit (``time.monotonic``). It writes its latencies and its typed
errors to a JSON file. The driver starts the writers, reaps each with ``os.wait4`` (peak RSS)
and reports per scenario: aggregate commits/s (all writers' commits in the window over its
length), p50 and p99 commit latency, the p50 time a commit holds the lease (``hold``: from taking
it to giving it back, timed by wrapping ``branch_lease.holding`` inside the writer), errors, and
the largest writer RSS. Each figure is the
median over ``--runs`` runs; the scenarios of one run are run side by side in the same loop.

Targets (PASS/FAIL): ``one-branch 16`` commits/s >= 0.8x ``one-branch 1`` (no collapse under
contention); ``own-branch N`` >= 0.7 N x ``own-branch 1`` for N up to the core count; the lease's
cost per commit, ``one-branch 1`` p50 latency over ``no-lease 1`` p50, <= 1.2x.

The driver never imports Lance, pyarrow or the engine.

Usage: ``.venv/bin/python bench/writers_bench.py [--runs 3] [--seconds 8] [--workdir DIR] [--json FILE]``.
Exit status: 0 every target passed, 1 a target failed, 3 a run failed.
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bytecode import compile_project

BIN = Path(sys.executable).parent
SCHEMA = "node Person { name: String @key tag: String? }\n"
START_DELAY = 4.0  # seconds between spawning the writers and the common start: every writer has opened the graph


def _writer(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="writers_bench.py _writer")
    parser.add_argument("--graph", required=True)
    parser.add_argument("--branch", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--start", type=float, required=True, help="time.time() to start at")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--no-lease", action="store_true")
    args = parser.parse_args(argv)
    import contextlib

    import omnigraph
    from omnigraph.engine.errors import OmnigraphError

    holds: list[float] = []
    if args.no_lease:
        from omnigraph.engine.ops import write

        write._branch_lease = lambda graph, branch: contextlib.nullcontext(None)  # type: ignore[assignment]
    else:
        from omnigraph.engine.reconcile import branch_lease

        taking = branch_lease.holding

        @contextlib.contextmanager
        def timed(*given: Any, **named: Any) -> Iterator[Any]:
            with taking(*given, **named) as lease:
                began = time.monotonic()
                try:
                    yield lease
                finally:
                    holds.append(time.monotonic() - began)

        branch_lease.holding = timed  # type: ignore[assignment]
    graph = omnigraph.open(args.graph, actor=args.prefix)

    def upsert(index: int) -> None:
        record = {"type": "Person", "data": {"name": f"{args.prefix}-{index % 50}", "tag": str(index)}}
        graph.load([record], mode="merge", branch=args.branch)

    upsert(0)
    time.sleep(max(0.0, args.start - time.time()))
    holds.clear()
    latencies: list[float] = []
    errors: dict[str, int] = {}
    deadline = time.monotonic() + args.seconds
    index = 1
    while time.monotonic() < deadline:
        began = time.monotonic()
        try:
            upsert(index)
        except OmnigraphError as error:
            errors[error.code] = errors.get(error.code, 0) + 1
        else:
            if time.monotonic() <= deadline:
                latencies.append(time.monotonic() - began)
        index += 1
    graph.close()
    Path(args.out).write_text(json.dumps({"latencies": latencies, "errors": errors, "holds": holds}))
    return 0


def _cli(*args: str) -> None:
    done = subprocess.run([str(BIN / "omnigraph"), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"omnigraph {' '.join(args)}: {done.stderr}")


def _scenario(workdir: Path, kind: str, writers: int, seconds: float) -> dict[str, Any]:
    """Run one scenario on a fresh graph; its aggregate figures."""
    root = Path(tempfile.mkdtemp(prefix=f"{kind}-{writers}-", dir=workdir))
    schema = root / "schema.pg"
    schema.write_text(SCHEMA)
    graph = str(root / "graph")
    _cli("init", "--schema", str(schema), graph)
    branches = [f"b{i}" for i in range(writers)] if kind == "own-branch" else ["main"] * writers
    for name in sorted(set(branches) - {"main"}):
        _cli("branch", "create", name, graph)
    start = time.time() + START_DELAY + 0.1 * writers
    processes = []
    for index, branch in enumerate(branches):
        out = root / f"writer-{index}.json"
        argv = [sys.executable, __file__, "_writer", "--graph", graph, "--branch", branch, "--prefix", f"w{index}"]
        argv += ["--start", str(start), "--seconds", str(seconds), "--out", str(out)]
        if kind == "no-lease":
            argv.append("--no-lease")
        processes.append((subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), out))
    latencies: list[float] = []
    holds: list[float] = []
    errors: dict[str, int] = {}
    peak_kib = 0
    for process, out in processes:
        _, status, usage = os.wait4(process.pid, 0)
        stderr = process.stderr.read().decode() if process.stderr else ""
        if status != 0:
            raise RuntimeError(f"a writer of {kind} {writers} failed (wait status {status}): {stderr[-2000:]}")
        peak_kib = max(peak_kib, usage.ru_maxrss)
        document = json.loads(out.read_text())
        latencies += document["latencies"]
        holds += document["holds"]
        for code, count in document["errors"].items():
            errors[code] = errors.get(code, 0) + count
    shutil.rmtree(root)
    latencies.sort()
    return {
        "commits_per_s": len(latencies) / seconds,
        "p50_ms": 1000 * statistics.median(latencies) if latencies else None,
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else None,
        "errors": errors,
        "hold_p50_ms": 1000 * statistics.median(holds) if holds else 0.0,
        "peak_rss_mib": peak_kib / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["_writer"]:
        return _writer(arguments[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "omnigraph-bench" / "writers")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(arguments)
    compile_project()
    args.workdir.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    scenarios = [("no-lease", 1), ("one-branch", 1), ("one-branch", 4), ("one-branch", 16)]
    scenarios += [("own-branch", n) for n in range(1, cores + 1)]
    results: dict[str, list[dict[str, Any]]] = {f"{kind} {n}": [] for kind, n in scenarios}
    try:
        for run in range(args.runs):
            for kind, writers in scenarios:
                figures = _scenario(args.workdir, kind, writers, args.seconds)
                results[f"{kind} {writers}"].append(figures)
                print(f"run {run + 1}: {kind} {writers}: {figures['commits_per_s']:.1f} commits/s", flush=True)
    except RuntimeError as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 3
    medians = {name: _median(runs) for name, runs in results.items()}
    print(f"\n{'scenario':<14} {'commits/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'hold ms':>8} {'RSS MiB':>8}  errors (all runs)")
    for name, figures in medians.items():
        errors: dict[str, int] = {}
        for one in results[name]:
            for code, count in one["errors"].items():
                errors[code] = errors.get(code, 0) + count
        print(
            f"{name:<14} {figures['commits_per_s']:>10.1f} {figures['p50_ms']:>8.1f} {figures['p99_ms']:>8.1f} "
            f"{figures['hold_p50_ms']:>8.1f} "
            f"{figures['peak_rss_mib']:>8.0f}  {json.dumps(errors, sort_keys=True)}"
        )
    verdicts = _targets(medians, cores)
    for verdict, line in verdicts:
        print(f"{verdict}: {line}")
    if args.json:
        args.json.write_text(json.dumps({"runs": results, "medians": medians, "targets": verdicts}, indent=2, sort_keys=True))
    return 0 if all(verdict == "PASS" for verdict, _ in verdicts) else 1


def _median(runs: list[dict[str, Any]]) -> dict[str, float]:
    keys = ("commits_per_s", "p50_ms", "p99_ms", "hold_p50_ms", "peak_rss_mib")
    return {key: statistics.median(run[key] for run in runs) for key in keys}


def _targets(medians: dict[str, dict[str, float]], cores: int) -> list[tuple[str, str]]:
    verdicts = []
    one, sixteen = medians["one-branch 1"]["commits_per_s"], medians["one-branch 16"]["commits_per_s"]
    verdicts.append(
        ("PASS" if sixteen >= 0.8 * one else "FAIL", f"one branch, 16 writers: {sixteen / one:.2f}x one writer (target >= 0.8x)")
    )
    alone = medians["own-branch 1"]["commits_per_s"]
    for n in range(2, cores + 1):
        ratio = medians[f"own-branch {n}"]["commits_per_s"] / alone
        verdicts.append(
            ("PASS" if ratio >= 0.7 * n else "FAIL", f"{n} writers on {n} branches: {ratio:.2f}x one (target >= {0.7 * n:.1f}x)")
        )
    cost = medians["one-branch 1"]["p50_ms"] / medians["no-lease 1"]["p50_ms"]
    verdicts.append(
        ("PASS" if cost <= 1.2 else "FAIL", f"the lease's cost per commit: p50 {cost:.2f}x the protocol without it (target <= 1.2x)")
    )
    return verdicts


if __name__ == "__main__":
    sys.exit(main())
