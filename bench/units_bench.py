"""Benchmark a many-units migration on local disk and on S3 behind 20 ms of latency (not a test).

The graph (:mod:`units_fixture`): format 4, 32 graph branches x 4 small node tables = 128
units, most inherited. For each ``--parallel`` value, ``--runs`` times:

1. local: build a fresh fixture in a temporary directory (not measured), then time
   ``omnigraph-migrate run GRAPH --owner bench --json --parallel N`` as a subprocess (wall, peak
   RSS from ``os.wait4``); exit 0 and stamp 5 are required;
2. S3, twice: build a fresh fixture in a new bucket of the moto server (directly, not
   measured), then run the same command against a loopback proxy to it
   (``tests/support/s3_fault_proxy.py``) that holds every answer for ``--latency`` seconds (and
   once for 0 s: what the test server itself costs), and count the requests the migration made
   by kind: object-store writes (PUT/POST/DELETE) of the migration's own documents (under
   ``__migration/``), writes of Lance (its data, manifests and refs), and reads.

It prints one table of medians per N: local wall, S3 wall without and with the added latency,
the ratio of the latter to local (the target is <= 3x), requests per unit (the target is at most
3 migration-document writes per unit besides Lance's own commits), and the outage (barrier up to
claim released, ``outage_seconds`` of ``run --json``) locally and on S3 behind the latency (the
target is <= 10 s on S3 at the best ``--parallel``). A second table says whose
CPU time each run was: the migrator's (user+sys from its ``wait4``), the moto server's and the
proxy's (this driver's own, where the proxy's threads run), read from ``/proc`` (Linux) before and
after the migration, against the machine's capacity (wall x CPUs).

Usage: ``.venv/bin/python bench/units_bench.py [--runs 3] [--parallel 1 8] [--branches 32]
[--latency 0.02] [--json results.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import parse_qs

from bytecode import compile_project

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))

from tests.support.s3_fault_proxy import FaultProxy  # noqa: E402

BIN = Path(sys.executable).parent
MIGRATE = BIN / "omnigraph-migrate"
FIXTURE = BENCH_DIR / "units_fixture.py"
MOTO = ROOT / "tests" / "support" / "moto_s3.py"
OUTAGE_TARGET_S3 = 10.0
"""The outage (barrier up to claim released) on S3 behind the added latency must stay within this."""
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}


@dataclass(frozen=True)
class Run:
    """One measured migration."""

    backend: str
    parallel: int
    wall_s: float
    peak_rss_mib: float
    migrator_cpu_s: float
    server_cpu_s: float = 0.0
    proxy_cpu_s: float = 0.0
    migration_writes: int = 0
    lance_writes: int = 0
    reads: int = 0
    reads_by_place: dict[str, int] | None = None
    outage_s: float = 0.0
    """How long the barrier held writers off (``outage_seconds`` of ``run --json``)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def _build(uri: str, branches: int, env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, str(FIXTURE), "--uri", uri, "--branches", str(branches)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"fixture build failed: {done.stderr[-2000:]}")
    return int(json.loads(done.stdout)["units"])


def _cpu_seconds(pid: int) -> float:
    """User+sys CPU seconds process ``pid`` has used so far (``/proc/PID/stat``, Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _migrate(uri: str, parallel: int, env: dict[str, str]) -> tuple[float, float, float, float]:
    """Wall seconds, peak RSS (MiB) and user+sys CPU seconds (both from ``os.wait4``) of one
    ``omnigraph-migrate run``, and its outage (``outage_seconds``: barrier up to claim released)."""
    command = [str(MIGRATE), "run", uri, "--owner", "bench", "--json", "--parallel", str(parallel)]
    env = {key: value for key, value in env.items() if key != "OMNIGRAPH_FAILPOINTS"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if process.returncode != 0 or json.loads(stdout)["stamp"] != "5":
        raise RuntimeError(f"migration failed ({process.returncode}): {stderr[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, float(json.loads(stdout)["outage_seconds"])


def _kind(method: str, path: str) -> str:
    if method in ("PUT", "POST", "DELETE"):
        return "migration_writes" if "/__migration/" in path else "lance_writes"
    return "reads"


def _place(path: str) -> str:
    """Where a request went, for the read breakdown: the migration's documents, ``__manifest``,
    a table's Lance branch refs, versions and manifests, or its data and indexes; a listing
    (``?prefix=``) is placed by its prefix and marked as one."""
    key, _, query = path.partition("?")
    prefix = parse_qs(query).get("prefix")
    listing = " (listings)" if prefix else ""
    if prefix:
        key = f"{key.rstrip('/')}/{prefix[0]}"
    for marker, place in (
        ("/__migration/", "migration documents"),
        ("/__manifest", "__manifest"),
        ("/_refs/", "Lance branch refs of tables"),
        ("/_versions", "Lance versions and manifests"),
        ("/tree/", "Lance branch trees"),
        ("/_indices/", "Lance indexes"),
        ("/data/", "Lance data files"),
    ):
        if marker in key:
            return place + listing
    return "other (the stamp, the graph's documents)" + listing


def run_local(branches: int, parallel: int) -> Run:
    with tempfile.TemporaryDirectory(prefix="units-bench-") as directory:
        uri = str(Path(directory) / "graph")
        _build(uri, branches, dict(os.environ))
        wall, rss, cpu, outage = _migrate(uri, parallel, dict(os.environ))
    return Run("local", parallel, wall, rss, cpu, outage_s=outage)


def run_s3(endpoint: str, server_pid: int, branches: int, parallel: int, latency: float) -> Run:
    """One migration on S3 behind ``latency`` seconds per request (backend ``s3+<ms>ms``); the
    moto server's (``server_pid``) and the proxy's CPU time are counted over the migration alone."""
    import boto3

    bucket = f"bench-{uuid.uuid4().hex[:12]}"
    boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    ).create_bucket(Bucket=bucket)
    uri = f"s3://{bucket}/graph"
    _build(uri, branches, {**os.environ, **S3_ENV, "AWS_ENDPOINT_URL": endpoint})
    with FaultProxy(endpoint, seed=0, rate=1.0, faults=("slow",), slow_seconds=latency) as proxy:
        server_before, proxy_before = _cpu_seconds(server_pid), _cpu_seconds(os.getpid())
        wall, rss, cpu, outage = _migrate(uri, parallel, {**os.environ, **S3_ENV, "AWS_ENDPOINT_URL": proxy.endpoint})
        server_cpu, proxy_cpu = _cpu_seconds(server_pid) - server_before, _cpu_seconds(os.getpid()) - proxy_before
        kinds = Counter(_kind(method, path) for method, path in proxy.requests)
        places = Counter(_place(path) for method, path in proxy.requests if _kind(method, path) == "reads")
    backend = f"s3+{latency * 1000:.0f}ms"
    return Run(
        backend,
        parallel,
        wall,
        rss,
        cpu,
        server_cpu,
        proxy_cpu,
        kinds["migration_writes"],
        kinds["lance_writes"],
        kinds["reads"],
        dict(sorted(places.items())),
        outage,
    )


def _median(runs: list[Run], field: str) -> float:
    return statistics.median(getattr(run, field) for run in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parallel", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--branches", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds added to every S3 answer")
    parser.add_argument("--json", type=Path, help="write every run here")
    args = parser.parse_args(argv)
    compile_project()
    units = args.branches * 4
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, str(MOTO), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    runs: list[Run] = []
    try:
        _wait_for(port)
        endpoint = f"http://127.0.0.1:{port}"
        for parallel in args.parallel:
            for _ in range(args.runs):
                runs.append(run_local(args.branches, parallel))
                runs.append(run_s3(endpoint, server.pid, args.branches, parallel, 0.0))
                runs.append(run_s3(endpoint, server.pid, args.branches, parallel, args.latency))
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"{units} units ({args.branches} branches x 4 tables), S3 latency {args.latency * 1000:.0f} ms, medians of {args.runs}")
    slow = f"s3+{args.latency * 1000:.0f}ms"
    print(
        f"{'parallel':>8} {'local s':>8} {'S3 s':>8} {slow + ' s':>10} {'/local':>7} {'mig writes/unit':>16} "
        f"{'Lance writes/unit':>18} {'reads/unit':>11} {'RSS MiB':>8} {'outage s':>9} {slow + ' outage s':>17}"
    )
    for parallel in args.parallel:
        local = [r for r in runs if r.backend == "local" and r.parallel == parallel]
        fast = [r for r in runs if r.backend == "s3+0ms" and r.parallel == parallel]
        s3 = [r for r in runs if r.backend == slow and r.parallel == parallel]
        local_wall, s3_wall = _median(local, "wall_s"), _median(s3, "wall_s")
        print(
            f"{parallel:>8} {local_wall:>8.2f} {_median(fast, 'wall_s'):>8.2f} {s3_wall:>10.2f} {s3_wall / local_wall:>6.2f}x "
            f"{_median(s3, 'migration_writes') / units:>16.2f} {_median(s3, 'lance_writes') / units:>18.2f} "
            f"{_median(s3, 'reads') / units:>11.1f} {_median(s3, 'peak_rss_mib'):>8.0f} "
            f"{_median(local, 'outage_s'):>9.2f} {_median(s3, 'outage_s'):>17.2f}"
        )
    worst = max(_median([r for r in runs if r.backend == slow and r.parallel == p], "outage_s") for p in args.parallel)
    best = min(_median([r for r in runs if r.backend == slow and r.parallel == p], "outage_s") for p in args.parallel)
    verdict = "PASS" if best <= OUTAGE_TARGET_S3 else "FAIL"
    print(f"{verdict}: outage on {slow} at the best --parallel {best:.2f}s (target <= {OUTAGE_TARGET_S3:.0f}s; worst {worst:.2f}s)")
    for parallel in args.parallel:
        chosen = [r for r in runs if r.backend == slow and r.parallel == parallel and r.reads_by_place]
        if chosen:
            places = ", ".join(f"{place} {count / units:.1f}" for place, count in sorted(chosen[0].reads_by_place.items()))
            print(f"reads per unit by place (parallel {parallel}, first run): {places}")
    cpus = os.cpu_count() or 1
    print(f"\nwhose CPU time (s, medians), against the machine's {cpus} CPUs x wall:")
    print(f"{'parallel':>8} {'backend':>9} {'wall s':>7} {'migrator':>9} {'S3 server':>10} {'proxy':>6} {'CPU used / capacity':>20}")
    for parallel in args.parallel:
        for backend in ("local", "s3+0ms", slow):
            chosen = [r for r in runs if r.backend == backend and r.parallel == parallel]
            used = statistics.median(r.migrator_cpu_s + r.server_cpu_s + r.proxy_cpu_s for r in chosen)
            wall = _median(chosen, "wall_s")
            print(
                f"{parallel:>8} {backend:>9} {wall:>7.2f} {_median(chosen, 'migrator_cpu_s'):>9.2f} "
                f"{_median(chosen, 'server_cpu_s'):>10.2f} {_median(chosen, 'proxy_cpu_s'):>6.2f} {used / (wall * cpus):>19.0%}"
            )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
