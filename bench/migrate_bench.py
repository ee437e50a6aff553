"""Benchmark ``omnigraph-migrate run`` against a Lance-only read of the same ids (not a test).

For each size N: build (once) a format-4 graph of 3 branches x 4 node tables x N rows
(:mod:`fixture`, in its own process), then ``--runs`` times:

1. copy the fixture graph to a fresh directory (``shutil.copytree``; not measured);
2. run ``omnigraph-migrate run GRAPH --owner bench --json`` (the console script next to
   ``sys.executable``) as a subprocess; wall time around it, peak RSS from ``os.wait4`` ->
   ``ru_maxrss`` (KiB on Linux); the exit code must be 0 and the document must say stamp 5;
3. ``omnigraph-migrate verify`` the migrated copy (not measured), then delete the copy;
4. run the baseline (:mod:`baseline_read`: Lance alone reads the ``id`` column of the same 12
   pinned images of the pristine fixture), measured the same way.

It prints one table with the medians per size, the migrator/baseline ratios and the acceptance
gate: the migrator's peak RSS at 1M rows per table must be within 1.5x of its peak RSS at 100K.
Exit status: 0 (gate PASS, or not evaluated because a size is missing), 1 (gate FAIL), 2 (usage),
3 (a migration or baseline run failed).

The driver never imports Lance, pyarrow or the engine: on Linux a child's ``ru_maxrss`` is at
least the high-water RSS of the process that spawned it, so the driver stays small (its own peak
is recorded in the JSON and checked).

Usage: ``.venv/bin/python bench/migrate_bench.py --sizes 10000 100000 1000000 --runs 3
--workdir /tmp/bench [--json results.json]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from bytecode import compile_project  # noqa: E402
from layout import FIXTURE_FILE, FIXTURE_VERSION, GRAPH_DIR  # noqa: E402

BIN = Path(sys.executable).parent
MIGRATE = BIN / "omnigraph-migrate"
FIXTURE_SCRIPT = BENCH_DIR / "fixture.py"
BASELINE_SCRIPT = BENCH_DIR / "baseline_read.py"
DEFAULT_SIZES = [10_000, 100_000, 1_000_000]
GATE_SMALL, GATE_LARGE, GATE_FACTOR = 100_000, 1_000_000, 1.5
WALL_TARGET = 1.5  # migrate wall <= 1.5x the id-read baseline at GATE_LARGE
HUGE, HUGE_FACTOR = 10_000_000, 2.0  # peak RSS at 10M <= 2x its value at GATE_SMALL
REBUILD_TARGET = 20.0  # rebuild wall >= 20x the in-place wall at GATE_LARGE
TABLES = 12  # 3 branches x 4 tables
MIB = 1024.0  # ru_maxrss is in KiB on Linux


@dataclass
class Measurement:
    """One measured subprocess."""

    kind: str  # "migrate" | "baseline"
    size: int
    run: int
    wall_s: float
    maxrss_kib: int
    user_s: float
    sys_s: float
    returncode: int
    output: Any = None
    loadavg_before: float | None = None  # 1-minute load average when it started (noise indicator)
    extra: dict[str, Any] = field(default_factory=dict)


def parse_size(text: str) -> int:
    """``10000``, ``10k``, ``1M`` or ``1_000_000``."""
    cleaned = text.strip().lower().replace("_", "")
    factor = {"k": 1_000, "m": 1_000_000}.get(cleaned[-1:], 1)
    number = cleaned[:-1] if factor != 1 else cleaned
    try:
        value = int(float(number) * factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a row count: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a size must be at least 1, got {text!r}")
    return value


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OMNIGRAPH_FAILPOINTS", None)  # never crash a measured run on purpose
    return env


class BenchFailure(Exception):
    """A measured command failed or produced an unexpected result."""


def measure(kind: str, size: int, run: int, command: list[str]) -> Measurement:
    """Run ``command``; wall time around it, rusage (peak RSS, CPU) from ``os.wait4``."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=child_env())
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    try:
        output: Any = json.loads(stdout) if stdout.strip() else None
    except json.JSONDecodeError:
        output = {"stdout": stdout[-4000:]}
    result = Measurement(
        kind=kind,
        size=size,
        run=run,
        wall_s=round(wall, 4),
        maxrss_kib=int(usage.ru_maxrss),
        user_s=round(usage.ru_utime, 3),
        sys_s=round(usage.ru_stime, 3),
        returncode=process.returncode,
        output=output,
        loadavg_before=round(load, 2) if load is not None else None,
    )
    if process.returncode != 0:
        raise BenchFailure(
            f"{kind} (N={size}, run {run}) exited {process.returncode}: {' '.join(command)}\n"
            f"stdout: {stdout[-2000:]}\nstderr: {stderr[-4000:]}"
        )
    return result


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- fixture -------------------------------------------------------------------------------------


def fixture_document(directory: Path, size: int) -> dict[str, Any] | None:
    path = directory / FIXTURE_FILE
    if not path.exists():
        return None
    document = json.loads(path.read_text(encoding="utf-8"))
    if document.get("fixture_version") != FIXTURE_VERSION or document.get("rows_per_table") != size:
        return None
    return document


def ensure_fixture(workdir: Path, size: int, rebuild: bool) -> tuple[Path, dict[str, Any]]:
    """The fixture directory for ``size``, built (in a subprocess) unless a complete one exists."""
    directory = workdir / f"fixture-{size}"
    document = None if rebuild else fixture_document(directory, size)
    if document is not None:
        say(f"N={size}: reusing the fixture in {directory} (built in {document['build_seconds']}s)")
        return directory, document
    if directory.exists():
        shutil.rmtree(directory)
    say(f"N={size}: building the fixture (3 branches x 4 tables x {size} rows) in {directory} ...")
    built = measure("fixture", size, 0, [sys.executable, str(FIXTURE_SCRIPT), "--rows", str(size), "--out", str(directory)])
    document = fixture_document(directory, size)
    if document is None:
        raise BenchFailure(f"the fixture build for N={size} did not leave a complete {FIXTURE_FILE}")
    document["build_wall_s"] = built.wall_s
    document["build_maxrss_kib"] = built.maxrss_kib
    say(f"N={size}: fixture built in {built.wall_s:.1f}s (peak RSS {built.maxrss_kib / MIB:.0f} MiB)")
    return directory, document


# -- one run -------------------------------------------------------------------------------------


def migrate_run(fixture: Path, workdir: Path, size: int, run: int, verify: bool, keep: bool) -> Measurement:
    run_dir = workdir / f"run-{size}-{run}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    started = time.perf_counter()
    shutil.copytree(fixture / GRAPH_DIR, run_dir / GRAPH_DIR)
    # Write the copy back now: otherwise the migrator's first fsync (claim, ledger) waits for the
    # journal to flush hundreds of MiB of the copy, and that writeback is charged to the migrator.
    os.sync()
    copy_s = time.perf_counter() - started
    graph = run_dir / GRAPH_DIR
    result = measure("migrate", size, run, [str(MIGRATE), "run", str(graph), "--owner", "bench", "--json"])
    outcome = result.output or {}
    if outcome.get("stamp") != "5" or outcome.get("units") != TABLES or outcome.get("images") != TABLES:
        raise BenchFailure(f"unexpected migration outcome for N={size}, run {run}: {outcome}")
    result.extra["copy_s"] = round(copy_s, 3)
    if verify:
        started = time.perf_counter()
        verified = subprocess.run([str(MIGRATE), "verify", str(graph), "--json"], capture_output=True, text=True, env=child_env())
        if verified.returncode != 0:
            raise BenchFailure(
                f"verify after the migration (N={size}, run {run}) exited {verified.returncode}: "
                f"{verified.stdout[-2000:]} {verified.stderr[-2000:]}"
            )
        result.extra["verify_s"] = round(time.perf_counter() - started, 3)
    if not keep:
        shutil.rmtree(run_dir)
    return result


def baseline_run(fixture: Path, size: int, run: int) -> Measurement:
    result = measure("baseline", size, run, [sys.executable, str(BASELINE_SCRIPT), str(fixture / GRAPH_DIR), str(fixture / FIXTURE_FILE)])
    rows = (result.output or {}).get("rows")
    if rows != TABLES * size:
        raise BenchFailure(f"the baseline read {rows} ids for N={size}, expected {TABLES * size}")
    return result


def rebuild_run(fixture: Path, workdir: Path, size: int, run: int) -> Measurement:
    """``omnigraph-migrate rebuild`` of the pristine fixture into a fresh directory (the other path to format 5)."""
    target = workdir / f"rebuilt-{size}-{run}"
    if target.exists():
        shutil.rmtree(target)
    result = measure("rebuild", size, run, [str(MIGRATE), "rebuild", str(fixture / GRAPH_DIR), "--to", str(target), "--json"])
    branches = (result.output or {}).get("branches") or []
    if (result.output or {}).get("stamp") != "5" or sum(sum(b["rows"].values()) for b in branches) != TABLES * size:
        raise BenchFailure(f"unexpected rebuild outcome for N={size}, run {run}: {result.output}")
    shutil.rmtree(target)
    return result


def floor_runs(runs: int) -> list[Measurement]:
    """Start-up floors: the migrator binary's imports (``--help``) and ``import lance`` alone."""
    measured = []
    for run in range(1, runs + 1):
        measured.append(measure("floor_migrate_help", 0, run, [str(MIGRATE), "--help"]))
        measured.append(measure("floor_import_lance", 0, run, [sys.executable, "-c", "import lance"]))
    return measured


# -- summary -------------------------------------------------------------------------------------


def summarize(size: int, runs: list[Measurement]) -> dict[str, Any]:
    def median(kind: str, attribute: str) -> float:
        return statistics.median(getattr(m, attribute) for m in runs if m.kind == kind)

    def median_cpu(kind: str) -> float:
        return statistics.median(m.user_s + m.sys_s for m in runs if m.kind == kind)

    summary = {
        "size": size,
        "runs": sum(1 for m in runs if m.kind == "migrate"),
        "migrate_wall_s": median("migrate", "wall_s"),
        "migrate_maxrss_mib": median("migrate", "maxrss_kib") / MIB,
        "migrate_cpu_s": median_cpu("migrate"),
        "baseline_wall_s": median("baseline", "wall_s"),
        "baseline_maxrss_mib": median("baseline", "maxrss_kib") / MIB,
        "baseline_cpu_s": median_cpu("baseline"),
    }
    summary["wall_ratio"] = summary["migrate_wall_s"] / summary["baseline_wall_s"]
    summary["rss_ratio"] = summary["migrate_maxrss_mib"] / summary["baseline_maxrss_mib"]
    summary["migrate_rows_per_s"] = TABLES * size / summary["migrate_wall_s"]
    if any(m.kind == "rebuild" for m in runs):
        summary["rebuild_wall_s"] = median("rebuild", "wall_s")
        summary["rebuild_maxrss_mib"] = median("rebuild", "maxrss_kib") / MIB
        summary["rebuild_over_migrate"] = summary["rebuild_wall_s"] / summary["migrate_wall_s"]
    return {key: round(value, 4) if isinstance(value, float) else value for key, value in summary.items()}


def gate(summaries: dict[int, dict[str, Any]]) -> dict[str, Any]:
    if GATE_SMALL not in summaries or GATE_LARGE not in summaries:
        return {"result": "NOT EVALUATED", "reason": f"needs sizes {GATE_SMALL} and {GATE_LARGE}"}
    small = summaries[GATE_SMALL]["migrate_maxrss_mib"]
    large = summaries[GATE_LARGE]["migrate_maxrss_mib"]
    ratio = large / small
    return {
        "result": "PASS" if ratio <= GATE_FACTOR else "FAIL",
        "rss_small_mib": small,
        "rss_large_mib": large,
        "ratio": round(ratio, 3),
        "limit": GATE_FACTOR,
        "rule": f"migrator peak RSS at N={GATE_LARGE} <= {GATE_FACTOR} x its peak RSS at N={GATE_SMALL}",
    }


def targets(summaries: dict[int, dict[str, Any]]) -> list[tuple[str, str, str]]:
    """Every issue target this run can judge: (target, measured, verdict), unmeasured ones said so."""
    rows: list[tuple[str, str, str]] = []
    large, small, huge = summaries.get(GATE_LARGE), summaries.get(GATE_SMALL), summaries.get(HUGE)

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    if large:
        rows.append(
            (
                f"migrate wall <= {WALL_TARGET}x the id read at {human(GATE_LARGE)}",
                f"{large['wall_ratio']:.2f}x",
                verdict(large["wall_ratio"] <= WALL_TARGET),
            )
        )
    else:
        rows.append((f"migrate wall <= {WALL_TARGET}x the id read at {human(GATE_LARGE)}", "not measured", "-"))
    for size, factor, summary in ((GATE_LARGE, GATE_FACTOR, large), (HUGE, HUGE_FACTOR, huge)):
        target = f"peak RSS at {human(size)} <= {factor}x at {human(GATE_SMALL)}"
        if summary and small:
            ratio = summary["migrate_maxrss_mib"] / small["migrate_maxrss_mib"]
            rows.append((target, f"{ratio:.2f}x", verdict(ratio <= factor)))
        else:
            rows.append((target, "not measured", "-"))
    target = f"in-place >= {REBUILD_TARGET:g}x faster than rebuild at {human(GATE_LARGE)}"
    if large and "rebuild_over_migrate" in large:
        rows.append((target, f"{large['rebuild_over_migrate']:.1f}x", verdict(large["rebuild_over_migrate"] >= REBUILD_TARGET)))
    else:
        measured = [f"{s['rebuild_over_migrate']:.1f}x at {human(n)}" for n, s in sorted(summaries.items()) if "rebuild_over_migrate" in s]
        rows.append((target, "not measured" + (f" ({', '.join(measured)})" if measured else ""), "-"))
    return rows


def render_targets(rows: list[tuple[str, str, str]]) -> str:
    lines = ["| target | measured | verdict |", "|---|---|---|"]
    lines.extend(f"| {target} | {measured} | {verdict} |" for target, measured, verdict in rows)
    return "\n".join(lines)


def human(size: int) -> str:
    """1000 -> 1K, 1200000 -> 1.2M, 1234 -> 1234."""
    for factor, suffix in ((1_000_000, "M"), (1_000, "K")):
        if size >= factor and (size * 10) % factor == 0:
            return f"{size / factor:g}{suffix}"
    return str(size)


def render_table(summaries: dict[int, dict[str, Any]]) -> str:
    reference = summaries.get(GATE_SMALL)
    headers = [
        "N/table",
        "rows",
        "migrate wall s",
        "migrate RSS MiB",
        "migrate CPU s",
        "baseline wall s",
        "baseline RSS MiB",
        "baseline CPU s",
        "wall x",
        "RSS x",
        f"migrate RSS / RSS@{human(GATE_SMALL)}",
    ]
    lines = []
    for size in sorted(summaries):
        s = summaries[size]
        versus = f"{s['migrate_maxrss_mib'] / reference['migrate_maxrss_mib']:.2f}" if reference else "-"
        lines.append(
            [
                human(size),
                human(TABLES * size),
                f"{s['migrate_wall_s']:.2f}",
                f"{s['migrate_maxrss_mib']:.0f}",
                f"{s['migrate_cpu_s']:.2f}",
                f"{s['baseline_wall_s']:.2f}",
                f"{s['baseline_maxrss_mib']:.0f}",
                f"{s['baseline_cpu_s']:.2f}",
                f"{s['wall_ratio']:.1f}",
                f"{s['rss_ratio']:.1f}",
                versus,
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in lines)) for i, h in enumerate(headers)]
    out = ["| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"]
    out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    out.extend("| " + " | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in lines)
    return "\n".join(out)


def render_rebuild(summaries: dict[int, dict[str, Any]]) -> str:
    """In-place migration vs rebuild (export, init, load) of the same fixture, where measured."""
    lines = [
        "| N/table | in-place wall s | in-place RSS MiB | rebuild wall s | rebuild RSS MiB | rebuild / in-place |",
        "|---|---|---|---|---|---|",
    ]
    for size in sorted(summaries):
        s = summaries[size]
        if "rebuild_wall_s" in s:
            lines.append(
                f"| {human(size)} | {s['migrate_wall_s']:.2f} | {s['migrate_maxrss_mib']:.0f} | {s['rebuild_wall_s']:.2f} "
                f"| {s['rebuild_maxrss_mib']:.0f} | {s['rebuild_over_migrate']:.1f} |"
            )
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pylance": version("pylance"),
        "pyarrow": version("pyarrow"),
        "omnigraph-fence": version("omnigraph-fence"),
    }
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["mem_total_mib"] = int(line.split()[1]) // 1024
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return info


# -- main ----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark omnigraph-migrate run (wall time, peak RSS) against a Lance-only id read.",
    )
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=parse_size,
        default=DEFAULT_SIZES,
        metavar="N",
        help="rows per table (10000, 100k, 1M, ...); default: 10K 100K 1M",
    )
    parser.add_argument("--runs", type=int, default=3, help="measured runs per size (medians are reported); default 3")
    parser.add_argument(
        "--runs-above-1m",
        type=int,
        default=None,
        metavar="R",
        help="measured runs for sizes above 1M (a 10M fixture is about 4.5 GB); default: --runs",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "omnigraph-bench",
        help="local directory for fixtures and run copies; fixtures are reused across invocations",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every raw run and the summary to FILE")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the fixtures even if complete ones exist")
    parser.add_argument("--keep-runs", action="store_true", help="keep the migrated copies (default: delete each)")
    parser.add_argument("--no-verify", action="store_true", help="skip `omnigraph-migrate verify` after each run")
    parser.add_argument(
        "--compare-rebuild",
        nargs="*",
        type=parse_size,
        metavar="N",
        default=None,
        help="also time `omnigraph-migrate rebuild` of the same fixture at these sizes (no N: every size)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or (args.runs_above_1m is not None and args.runs_above_1m < 1):
        parser.error("--runs and --runs-above-1m must be at least 1")
    if "://" in str(args.workdir):
        parser.error("--workdir must be a local directory")
    args.sizes = sorted(set(args.sizes))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    compile_project()
    if not MIGRATE.exists():
        say(f"{MIGRATE} not found: run this with the project's virtualenv python (.venv/bin/python)")
        return 2
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "command": [Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])],
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "sizes": args.sizes,
        "runs_per_size": args.runs,
        "fixtures": {},
        "runs": [],
        "summary": [],
    }
    summaries: dict[int, dict[str, Any]] = {}
    floors: dict[str, dict[str, float]] = {}

    def write_report() -> None:
        report["driver_maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        report["gate"] = gate(summaries)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")

    try:
        measured_floors = floor_runs(args.runs)
        report["runs"].extend(asdict(m) for m in measured_floors)
        for kind in ("floor_migrate_help", "floor_import_lance"):
            ofkind = [m for m in measured_floors if m.kind == kind]
            floors[kind] = {
                "wall_s": round(statistics.median(m.wall_s for m in ofkind), 4),
                "maxrss_mib": round(statistics.median(m.maxrss_kib for m in ofkind) / MIB, 1),
            }
        report["floors"] = floors
        for size in args.sizes:
            fixture, document = ensure_fixture(workdir, size, args.rebuild)
            report["fixtures"][str(size)] = {k: v for k, v in document.items() if k != "images"}
            runs: list[Measurement] = []
            size_runs = args.runs if size <= 1_000_000 or args.runs_above_1m is None else args.runs_above_1m
            for run in range(1, size_runs + 1):
                migrated = migrate_run(fixture, workdir, size, run, not args.no_verify, args.keep_runs)
                baseline = baseline_run(fixture, size, run)
                runs += [migrated, baseline]
                if args.compare_rebuild is not None and (not args.compare_rebuild or size in args.compare_rebuild):
                    rebuilt = rebuild_run(fixture, workdir, size, run)
                    runs.append(rebuilt)
                    say(f"N={size} run {run}/{size_runs}: rebuild {rebuilt.wall_s:.2f}s {rebuilt.maxrss_kib / MIB:.0f} MiB")
                say(
                    f"N={size} run {run}/{size_runs}: migrate {migrated.wall_s:.2f}s {migrated.maxrss_kib / MIB:.0f} MiB"
                    f" | baseline {baseline.wall_s:.2f}s {baseline.maxrss_kib / MIB:.0f} MiB"
                )
            report["runs"].extend(asdict(m) for m in runs)
            summaries[size] = summarize(size, runs)
            report["summary"] = [summaries[s] for s in sorted(summaries)]
            write_report()
    except BenchFailure as failure:
        write_report()
        say(f"FAILED: {failure}")
        return 3
    report["finished_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    report["targets"] = [{"target": t, "measured": m, "verdict": v} for t, m, v in targets(summaries)]
    write_report()

    info = report["machine"]
    above = "" if args.runs_above_1m is None else f" ({args.runs_above_1m} above 1M)"
    print(f"omnigraph-migrate run vs Lance-only id read; 3 branches x 4 tables; medians of {args.runs} run(s){above}")
    print(
        f"machine: {info.get('cpus')} CPUs, {info.get('mem_total_mib')} MiB RAM, Python {info['python']}, "
        f"pylance {info['pylance']}, pyarrow {info['pyarrow']}"
    )
    print(render_table(summaries))
    if any("rebuild_wall_s" in s for s in summaries.values()):
        print("in-place migration vs rebuild (export, init at format 5, load) of the same fixture; medians")
        print(render_rebuild(summaries))
    migrate_floor, lance_floor = floors["floor_migrate_help"], floors["floor_import_lance"]
    print(
        f"start-up floors: `omnigraph-migrate --help` {migrate_floor['wall_s']:.2f}s {migrate_floor['maxrss_mib']:.0f} MiB; "
        f"`python -c 'import lance'` {lance_floor['wall_s']:.2f}s {lance_floor['maxrss_mib']:.0f} MiB"
    )
    loads = [m["loadavg_before"] for m in report["runs"] if m["loadavg_before"] is not None]
    cpus = info.get("cpus_usable") or info.get("cpus") or 1
    if loads and max(loads) > cpus:
        print(
            f"NOTE: the 1-minute load average reached {max(loads):.1f} on {cpus} CPU(s) during the runs: "
            "other work shared the machine, wall times are inflated (CPU s is less affected)"
        )
    smallest_child = min(m["maxrss_kib"] for m in report["runs"])
    if report["driver_maxrss_kib"] >= smallest_child:
        print(
            f"WARNING: the driver's own peak RSS ({report['driver_maxrss_kib'] / MIB:.0f} MiB) is not below the "
            "children's: their ru_maxrss may be the driver's, not theirs"
        )
    print("issue targets:")
    print(render_targets(targets(summaries)))
    result = report["gate"]
    if result["result"] == "NOT EVALUATED":
        print(f"gate: NOT EVALUATED ({result['reason']})")
        return 0
    print(
        f"gate: {result['result']}: migrator peak RSS {result['rss_large_mib']:.0f} MiB at N={human(GATE_LARGE)} is "
        f"{result['ratio']:.2f}x its {result['rss_small_mib']:.0f} MiB at N={human(GATE_SMALL)} (limit {GATE_FACTOR}x)"
    )
    return 0 if result["result"] == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
