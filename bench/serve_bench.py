"""Benchmark a small fenced upsert over HTTP against the same upsert through the Python API (not a test).

Each run builds two fresh example-schema graphs (``omnigraph init``, not measured) and then, side by
side in the same run:

1. **http**: starts ``omnigraph serve GRAPH --port P --unauthenticated`` (one worker), waits for ``/healthz``, and
   sends ``--requests`` sequential ``POST /branches/main/load?mode=merge`` requests of one
   ``Person`` row each (ids cycle over ``--distinct`` names, so both the insert and the update
   path of the upsert are taken) from this driver with httpx, after ``--warmup`` unmeasured
   requests. Latency is measured per request at the client; the server process is then stopped
   with SIGTERM and its peak RSS read from ``os.wait4`` (``ru_maxrss``, KiB on Linux).
2. **api**: runs this script as a subprocess in ``--api-worker`` mode, which opens the graph with
   ``open_graph(..., write=True)`` and calls ``omnigraph.engine.ops.load.load(..., mode="merge")`` with the same
   one-row bodies, measuring each call the same way and printing the latencies as JSON; its peak
   RSS comes from ``os.wait4``.

Reported per mode: requests/s (requests / summed latency), p50 and p99 latency (ms), peak RSS
(MiB), each the median over ``--runs``; then the http/api ratios. The driver never imports Lance
or the engine, so its own RSS does not inflate the children's ``ru_maxrss``.

With ``--export-rows N`` it measures an export instead: one graph of N ``Person`` rows (loaded
with ``omnigraph load --chunk-rows 8192``, not measured), exported per run by ``omnigraph export``
(the whole process, output to a file) and by ``GET /branches/main/export`` from a one-worker
server (the whole streamed body, read by httpx in this driver); reported: lines, seconds and
lines/s of each (medians of ``--runs``) and the http/cli time ratio.

Usage: ``.venv/bin/python bench/serve_bench.py [--requests 300] [--runs 3] [--workdir DIR] [--json F]``,
or ``.venv/bin/python bench/serve_bench.py --export-rows 40000 [--runs 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bytecode import compile_project

from omnigraph.engine.storage.store import open_store

BENCH_DIR = Path(__file__).resolve().parent
PROJECT = BENCH_DIR.parent
SCHEMA = PROJECT / "examples" / "social.pg"
BIN = Path(sys.executable).parent
OMNIGRAPH = BIN / "omnigraph"
MIB = 1024.0


def body(index: int, distinct: int) -> bytes:
    """One Person row, upserted by its key; ``distinct`` names in rotation."""
    return (json.dumps({"type": "Person", "data": {"name": f"bench-{index % distinct}", "age": index % 100}}) + "\n").encode()


def summarise(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "requests_per_s": len(ordered) / sum(ordered),
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _init(graph: Path) -> None:
    subprocess.run([str(OMNIGRAPH), "init", "--schema", str(SCHEMA), str(graph)], check=True, capture_output=True)


def _serve(graph: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A one-worker unauthenticated server on ``graph`` answering ``/healthz``, and its base URL."""
    import httpx

    port = _free_port()
    server = subprocess.Popen(
        [str(OMNIGRAPH), "serve", "--host", "127.0.0.1", "--port", str(port), "--unauthenticated", str(graph)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/healthz").status_code == 200:
                return server, base
        except httpx.TransportError:
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.05)


def run_http(graph: Path, requests: int, warmup: int, distinct: int) -> dict[str, float]:
    import httpx

    server, base = _serve(graph)
    latencies: list[float] = []
    try:
        with httpx.Client(base_url=base, timeout=60, headers={"content-type": "application/x-ndjson"}) as client:
            for index in range(warmup + requests):
                started = time.perf_counter()
                response = client.post("/branches/main/load", params={"mode": "merge"}, content=body(index, distinct))
                elapsed = time.perf_counter() - started
                if response.status_code != 200:
                    raise RuntimeError(f"upsert {index} answered {response.status_code}: {response.text}")
                if index >= warmup:
                    latencies.append(elapsed)
    finally:
        server.send_signal(signal.SIGTERM)
        _, _, usage = os.wait4(server.pid, 0)
    return {**summarise(latencies), "peak_rss_mib": usage.ru_maxrss / MIB}


def run_api(graph: Path, requests: int, warmup: int, distinct: int) -> dict[str, float]:
    worker = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--api-worker",
            str(graph),
            "--requests",
            str(requests),
            "--warmup",
            str(warmup),
            "--distinct",
            str(distinct),
        ],
        stdout=subprocess.PIPE,
        cwd=PROJECT,
    )
    assert worker.stdout is not None
    output = worker.stdout.read()
    _, status, usage = os.wait4(worker.pid, 0)
    if status != 0:
        raise RuntimeError(f"api worker exited with status {status}")
    return {**summarise(json.loads(output)), "peak_rss_mib": usage.ru_maxrss / MIB}


def api_worker(graph: str, requests: int, warmup: int, distinct: int) -> None:
    """The Python API side: same upserts, in this process; prints the latencies as JSON."""
    sys.path.insert(0, str(PROJECT))
    from omnigraph.engine.door.table_store import FENCED_PROFILE
    from omnigraph.engine.graph import open_graph
    from omnigraph.engine.ops.load import load

    opened = open_graph(open_store(graph), FENCED_PROFILE, write=True)
    latencies = []
    for index in range(warmup + requests):
        started = time.perf_counter()
        load(opened, body(index, distinct), mode="merge", branch="main", actor="bench")
        elapsed = time.perf_counter() - started
        if index >= warmup:
            latencies.append(elapsed)
    print(json.dumps(latencies))


def export_bench(workdir: Path, rows: int, runs: int) -> dict[str, object]:
    """HTTP export against ``omnigraph export`` of a graph of ``rows`` Person rows (module docstring)."""
    import httpx

    graph = workdir / "export-graph"
    _init(graph)
    data = workdir / "people.jsonl"
    data.write_bytes(b"".join(body(index, rows) for index in range(rows)))
    load = [str(OMNIGRAPH), "load", "--mode", "append", "--chunk-rows", "8192", "--data", str(data), str(graph)]
    subprocess.run(load, check=True, capture_output=True)
    timings: dict[str, list[float]] = {"cli": [], "http": []}
    lines: dict[str, int] = {}
    for run in range(runs):
        started = time.perf_counter()
        with (workdir / "export.jsonl").open("wb") as out:
            subprocess.run([str(OMNIGRAPH), "export", str(graph)], check=True, stdout=out)
        timings["cli"].append(time.perf_counter() - started)
        lines["cli"] = sum(1 for _ in (workdir / "export.jsonl").open("rb"))
        server, base = _serve(graph)
        try:
            started = time.perf_counter()
            count = 0
            with httpx.stream("GET", f"{base}/branches/main/export", timeout=600) as response:
                for chunk in response.iter_bytes():
                    count += chunk.count(b"\n")
            timings["http"].append(time.perf_counter() - started)
            lines["http"] = count
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait()
        print(f"run {run + 1}/{runs}: cli {timings['cli'][-1]:.2f} s, http {timings['http'][-1]:.2f} s", file=sys.stderr)
    medians = {mode: statistics.median(values) for mode, values in timings.items()}
    print(f"{'':<6}{'lines':>10}{'s':>10}{'lines/s':>12}   (medians of {runs} runs)")
    for mode in ("cli", "http"):
        print(f"{mode:<6}{lines[mode]:>10}{medians[mode]:>10.2f}{lines[mode] / medians[mode]:>12.0f}")
    print(f"{'ratio':<6}{'':>10}{medians['http'] / medians['cli']:>10.2f}   (http / cli time)")
    return {"rows": rows, "lines": lines, "runs": timings, "medians": medians}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--distinct", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", dest="json_path", type=Path, default=None)
    parser.add_argument("--export-rows", type=int, default=None, help="Measure an export of this many rows instead.")
    parser.add_argument("--api-worker", dest="api_graph", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.api_graph:
        api_worker(args.api_graph, args.requests, args.warmup, args.distinct)
        return 0
    compile_project()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="omnigraph-serve-bench-"))
    if args.export_rows is not None:
        exported = export_bench(workdir, args.export_rows, args.runs)
        if args.workdir is None:
            shutil.rmtree(workdir)
        if args.json_path:
            args.json_path.write_text(json.dumps(exported, indent=2, sort_keys=True))
        return 0
    results: dict[str, list[dict[str, float]]] = {"http": [], "api": []}
    for run in range(args.runs):
        for mode, runner in (("http", run_http), ("api", run_api)):
            graph = workdir / f"run{run}-{mode}"
            _init(graph)
            results[mode].append(runner(graph, args.requests, args.warmup, args.distinct))
            print(f"run {run + 1}/{args.runs} {mode}: " + ", ".join(f"{k}={v:.1f}" for k, v in results[mode][-1].items()), file=sys.stderr)
    medians = {mode: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for mode, runs in results.items()}
    ratios = {key: medians["http"][key] / medians["api"][key] for key in medians["http"]}
    print(f"{'':<6}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'peak MiB':>10}   (medians of {args.runs} runs x {args.requests} upserts)")
    for mode in ("http", "api"):
        m = medians[mode]
        print(f"{mode:<6}{m['requests_per_s']:>10.1f}{m['p50_ms']:>10.1f}{m['p99_ms']:>10.1f}{m['peak_rss_mib']:>10.1f}")
    print(
        f"{'ratio':<6}{ratios['requests_per_s']:>10.2f}{ratios['p50_ms']:>10.2f}{ratios['p99_ms']:>10.2f}"
        f"{ratios['peak_rss_mib']:>10.2f}   (http / api)"
    )
    if args.workdir is None:
        shutil.rmtree(workdir)
    if args.json_path:
        args.json_path.write_text(
            json.dumps(
                {"runs": results, "medians": medians, "ratios": ratios, "requests": args.requests, "warmup": args.warmup},
                indent=2,
                sort_keys=True,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
