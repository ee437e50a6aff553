"""Benchmark the write outage of an online upgrade, ``omnigraph-migrate run``, under a live writer (not a test).

What it measures, per size N (rows per table; default 100K and 10M):

* the **outage**: how long the upgrade keeps writers out. Taken from the migration's ledger as
  the time from its ``barrier_set`` record to its ``claim_released`` record (each record's ``at``
  UTC timestamp, ``GRAPH/__migration/<migration_id>/ledger/<seq>.json``); when the ``run --json``
  document carries ``outage_seconds``, that figure is reported too and preferred;
* the **longest writer gap**: the longest time between two successful writes of a writer that
  appends one row every 200 ms for the whole upgrade, switching from the format-4 writer to the
  format-5 engine once the graph reaches stamp 5, as an operator would;
* the whole ``run`` process: wall time, peak RSS (``os.wait4`` -> ``ru_maxrss``), user+sys CPU;
* the writes acknowledged and refused while ``run`` was running;
* the migration's id validation, from its ``image_validated`` records, split at ``barrier_set``:
  ``online`` (before the barrier) and ``barrier`` (under it), each as rows over the time from the
  record before the first of them (the plan) to the last of them; the online rate (the barrier's
  when nothing is validated online) is set against the Lance-only id-read floor
  (:mod:`baseline_read`: Lance alone reads the ``id`` column of the same pinned images).

How, per size: build (once, in a child process, kept in the work directory and reused) a
format-4 graph of 4 keyed node tables x 3 graph branches through the real format-4 write path
(:mod:`fixture`'s overwrite commit): ``main`` and ``b1`` each own their 4 tables (N rows each),
``b2`` is created from ``main`` and never written, so it inherits ``main``'s images (12 units, 8
distinct images; the writer's first writes move ``main``'s ``Account``, so the migration then
pins 9: ``b2`` keeps the older ``Account`` version, which its unit forks). Then ``--runs`` times:

1. copy the fixture graph to a fresh directory, then ``os.sync()`` (not measured);
2. start the WRITER, a child process of this script (``_writer`` mode) that opens the graph once
   with the format-4 writer (``omnigraph.open(..., program="omnigraph-v4")``: a long-running
   writer that re-reads the stamp and the claim before each write, like a server) and, on a
   200 ms tick, strictly inserts one ``Account`` row with a new id on ``main``
   (``Graph.load(..., mode="append")``). A write refused with ``format_barrier``,
   ``format_refused`` or ``claim_held`` is counted as refused and retried with the same id at
   the next tick; once a refusal says the stamp is ``5``, the writer closes the format-4 graph,
   opens the format-5 engine (``omnigraph.open(...)``, the default profile, lazily) and goes on.
   Any other error is logged, and its id never reused (it may have landed). Every attempt is one
   JSON line with a ``time.monotonic()`` timestamp (the same clock as the driver's);
3. once the writer has acknowledged 3 writes, run ``omnigraph-migrate run GRAPH --owner bench
   --json`` (the console script next to ``sys.executable``); wall time around it, rusage from
   ``os.wait4``; it must exit 0 with stamp 5 and 12 units. A ``run`` refused with
   ``recovery_required`` before it took its claim (the writer's commit was in flight when it
   looked for pending intents: nothing written) is run again, at most 5 times, and counted;
4. wait for the writer's first 2 acknowledged writes after ``run`` exited (``--settle`` seconds
   at most), stop it (a stop file; it finishes its write and closes the graph) and reap it (its
   peak RSS, and the median time of one write at each format, are reported too);
5. read the ledger, run ``omnigraph-migrate verify`` on the copy, and check in a child process
   (``_check`` mode) that every id the writer acknowledged is on ``main``'s pinned ``Account``
   image and that the table holds N plus the acknowledged rows (an acknowledged write that is
   missing fails the bench, exit 3); then delete the copy;
6. run the baseline (:mod:`baseline_read`) on the pristine fixture's 8 distinct images.

The longest gap is taken over the acknowledged writes from the last one before ``run`` started
to the first one after it exited. Each reported number is the median of the runs.

Targets (PASS/FAIL lines): the outage at the largest size <= 1.5x the outage at the smallest
size, and <= 2 s; the longest writer gap <= 3 s at every size. Exit status: 0 every target
evaluated passed (or none could be), 1 a target failed, 2 usage, 3 a run failed (a migration,
verify, the writer, no write acknowledged within ``--settle`` seconds after the upgrade, the
baseline, or an acknowledged write missing afterwards; the failed copy is kept).

The driver never imports Lance, pyarrow or the engine (a child's ``ru_maxrss`` on Linux is at
least the high-water RSS of the process that spawned it); the fixture builder, the writer and
the checker are this script run in a child mode.

Usage: ``.venv/bin/python bench/outage_bench.py --sizes 100k 10M --runs 3 [--workdir DIR]
[--json results.json] [--rebuild]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from bytecode import compile_project  # noqa: E402
from layout import FIXTURE_FILE, FIXTURE_VERSION, GRAPH_DIR  # noqa: E402
from migrate_bench import BenchFailure, child_env, human, machine, parse_size, say  # noqa: E402

BIN = Path(sys.executable).parent
MIGRATE = BIN / "omnigraph-migrate"
THIS_SCRIPT = Path(__file__).resolve()
BASELINE_SCRIPT = BENCH_DIR / "baseline_read.py"

DEFAULT_SIZES = [100_000, 10_000_000]
OUTAGE_FIXTURE_VERSION = 1  # bump when this script's fixture layout changes (fixture.py's own version counts too)
BRANCHES = ("main", "b1", "b2")  # main and b1 own their tables; b2 is lazy (inherits main's images)
OWNING_BRANCHES = ("main", "b1")
LAZY_BRANCH = "b2"
UNITS = 12  # 3 branches x 4 tables
DISTINCT_IMAGES = 8  # main's 4 and b1's 4 (b2 pins main's)
WRITER_TYPE = "Account"
WRITER_TABLE = "node:Account"
WARMUP_WRITES = 3  # acknowledged writes before `run` starts
AFTER_WRITES = 2  # acknowledged writes after `run` exited before the writer is stopped
REFUSALS = ("format_barrier", "format_refused", "claim_held")
TARGET_GROWTH = 1.5  # outage at the largest size <= 1.5x the outage at the smallest
TARGET_OUTAGE_S = 2.0  # outage at the largest size <= 2 s
TARGET_GAP_S = 3.0  # longest writer gap <= 3 s at every size
MIB = 1024.0  # ru_maxrss is in KiB on Linux
RUN_RETRIES = 5  # `run` refused before its claim because a write was in flight: run again (counted)
CHILD_MODES = ("_fixture", "_writer", "_check")


# -- measured processes ----------------------------------------------------------------------------


@dataclass
class Process:
    """One finished child: monotonic start and end (the writer's clock), rusage, output."""

    started: float
    ended: float
    returncode: int
    maxrss_kib: int
    user_s: float
    sys_s: float
    stdout: str
    stderr: str

    @property
    def wall_s(self) -> float:
        return self.ended - self.started

    def document(self) -> Any:
        try:
            return json.loads(self.stdout) if self.stdout.strip() else None
        except json.JSONDecodeError:
            return {"stdout": self.stdout[-4000:]}

    def failure(self, what: str) -> str:
        return f"{what} exited {self.returncode}\nstdout: {self.stdout[-3000:]}\nstderr: {self.stderr[-4000:]}"


def run_measured(command: list[str]) -> Process:
    """Run ``command`` to its end; ``time.monotonic()`` around it, rusage from ``os.wait4``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=child_env())
        _, status, usage = os.wait4(process.pid, 0)
        ended = time.monotonic()
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Process(
            started,
            ended,
            process.returncode,
            int(usage.ru_maxrss),
            usage.ru_utime,
            usage.ru_stime,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
        )


@dataclass
class Run:
    """One measured upgrade under the writer."""

    size: int
    run: int
    wall_s: float
    maxrss_kib: int
    cpu_s: float
    migration_id: str
    outage_ledger_s: float | None
    outage_reported_s: float | None  # the run document's outage_seconds, when it has one
    longest_gap_s: float
    gap_from_s: float  # where the longest gap starts, seconds after `run` started
    writes_ok: int  # acknowledged while `run` ran
    writes_refused: int
    writes_errors: int
    writer_ok_total: int
    writer_refused_total: int
    writer_refusal_codes: dict[str, int]
    writer_errors: list[dict[str, Any]]
    writer_first_refused_s: float | None  # after `run` started
    writer_switch_s: float | None  # the writer opened the format-5 engine, after `run` started
    writer_first_ok_after_s: float | None  # its first acknowledged write after `run` exited
    writer_maxrss_kib: int
    writer_write_ms: dict[str, float]  # median time of one acknowledged write, by the format it was written at
    writer_refusal_messages: dict[str, Any]  # one refusal message per code and stamp
    phases: dict[str, list[float]]  # ledger record kind -> [first, last] seconds after barrier_set
    validation: dict[str, dict[str, float]]  # "online" / "barrier": rows, seconds, images of image_validated records
    check: dict[str, Any]
    loadavg_before: float | None
    copy_s: float
    verify_s: float
    run_document: Any = None
    refused_attempts: list[dict[str, Any]] = field(default_factory=list)  # `run` refused before its claim, run again
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def outage_s(self) -> float | None:
        return self.outage_reported_s if self.outage_reported_s is not None else self.outage_ledger_s


# -- fixture ---------------------------------------------------------------------------------------


def fixture_document(directory: Path, size: int) -> dict[str, Any] | None:
    path = directory / FIXTURE_FILE
    if not path.exists():
        return None
    document = json.loads(path.read_text(encoding="utf-8"))
    if (
        document.get("outage_fixture_version") != OUTAGE_FIXTURE_VERSION
        or document.get("fixture_version") != FIXTURE_VERSION
        or document.get("rows_per_table") != size
    ):
        return None
    return document


def ensure_fixture(workdir: Path, size: int, rebuild: bool) -> tuple[Path, dict[str, Any]]:
    """The fixture directory for ``size``, built (in a child process) unless a complete one exists."""
    directory = workdir / f"outage-fixture-{size}"
    document = None if rebuild else fixture_document(directory, size)
    if document is not None:
        say(f"N={human(size)}: reusing the fixture in {directory} (built in {document['build_seconds']}s)")
        return directory, document
    if directory.exists():
        shutil.rmtree(directory)
    say(f"N={human(size)}: building the fixture (main and b1 own 4 tables x {size} rows, b2 lazy) in {directory} ...")
    built = run_measured([sys.executable, str(THIS_SCRIPT), "_fixture", "--rows", str(size), "--out", str(directory)])
    if built.returncode != 0:
        raise BenchFailure(built.failure(f"the fixture build for N={size}"))
    document = fixture_document(directory, size)
    if document is None:
        raise BenchFailure(f"the fixture build for N={size} did not leave a complete {FIXTURE_FILE}")
    document["build_wall_s"] = round(built.wall_s, 3)
    document["build_maxrss_kib"] = built.maxrss_kib
    (directory / FIXTURE_FILE).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    say(f"N={human(size)}: fixture built in {built.wall_s:.1f}s (peak RSS {built.maxrss_kib / MIB:.0f} MiB)")
    return directory, document


def build_fixture_main(argv: list[str]) -> int:
    """``_fixture --rows N --out DIR``: the format-4 graph with a lazy branch (run as a child)."""
    parser = argparse.ArgumentParser(prog="outage_bench.py _fixture")
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    from fixture import ACTOR, SCHEMA, _overwrite_all, pinned_images

    from omnigraph.engine.door.legacy import LEGACY_PROFILE
    from omnigraph.engine.graph import init_graph
    from omnigraph.engine.manifest.rows import MAIN
    from omnigraph.engine.ops.branches import create_branch
    from omnigraph.engine.storage.store import open_store

    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    graph = init_graph(open_store(str(args.out / GRAPH_DIR)), SCHEMA, LEGACY_PROFILE, actor=ACTOR)
    _overwrite_all(graph, MAIN, args.rows)
    for branch in OWNING_BRANCHES[1:]:
        create_branch(graph, branch, MAIN)
        _overwrite_all(graph, branch, args.rows)
    create_branch(graph, LAZY_BRANCH, MAIN)  # never written: it pins main's images
    pins = pinned_images(graph)
    images: dict[tuple[str, str | None, int], dict[str, Any]] = {}
    for pin in pins:
        images.setdefault((pin["table_path"], pin["table_branch"], pin["table_version"]), pin)
    lazy = [p for p in pins if p["graph_branch"] == LAZY_BRANCH]
    main_pins = {p["table_key"]: p for p in pins if p["graph_branch"] == MAIN}
    if (
        len(pins) != UNITS
        or len(images) != DISTINCT_IMAGES
        or any(p["rows"] != args.rows for p in pins)
        or any(
            (p["table_branch"], p["table_version"])
            != (main_pins[p["table_key"]]["table_branch"], main_pins[p["table_key"]]["table_version"])
            for p in lazy
        )
    ):
        raise RuntimeError(f"unexpected fixture layout: {json.dumps(pins, indent=1)}")
    document = {
        "outage_fixture_version": OUTAGE_FIXTURE_VERSION,
        "fixture_version": FIXTURE_VERSION,
        "rows_per_table": args.rows,
        "graph": GRAPH_DIR,
        "build_seconds": round(time.perf_counter() - started, 3),
        "pins": pins,
        "images": list(images.values()),  # the distinct images: what baseline_read.py reads
    }
    (args.out / FIXTURE_FILE).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({"rows_per_table": args.rows, "build_seconds": document["build_seconds"]}))
    return 0


# -- the writer (a child process) ------------------------------------------------------------------


def writer_main(argv: list[str]) -> int:
    """``_writer --graph G --log F --stop S --prefix P``: one strict insert per tick until S exists."""
    parser = argparse.ArgumentParser(prog="outage_bench.py _writer")
    parser.add_argument("--graph", required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--stop", type=Path, required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--interval", type=float, default=0.2)
    args = parser.parse_args(argv)

    import omnigraph
    from omnigraph.errors import OmnigraphError

    log = args.log.open("a", encoding="utf-8", buffering=1)

    def emit(event: str, **fields: Any) -> None:
        log.write(json.dumps({"event": event, "t": time.monotonic(), "wall": time.time(), **fields}) + "\n")

    emit("start", pid=os.getpid())
    graph = omnigraph.open(args.graph, program=omnigraph.FORMAT_4_WRITER, actor="bench-writer")
    program = "4"
    emit("opened", format=program)
    seq = 0
    tick = time.monotonic()
    while not args.stop.exists():
        now = time.monotonic()
        if tick > now:
            time.sleep(tick - now)
        row_id = f"{args.prefix}-{seq:07d}"
        began = time.monotonic()
        try:
            graph.load([{"type": WRITER_TYPE, "data": {"name": row_id, "n": seq}}], mode="append")
        except OmnigraphError as error:
            took = round(time.monotonic() - began, 4)
            if error.code in REFUSALS:
                stamp = (error.details or {}).get("stamp")
                emit("refused", format=program, code=error.code, stamp=stamp, took=took, message=str(error)[:400])
                if program == "4" and stamp == "5":
                    # The format-4 writer can no longer write: switch to the format-5 engine, as
                    # an operator does once the upgrade is stamped (lazily: the claim may still
                    # be held for a moment, and the first write opens the graph read-write).
                    graph.close()
                    graph = omnigraph.open(args.graph, actor="bench-writer", lazy=True)
                    program = "5"
                    emit("switch", format=program)
            else:
                emit("error", format=program, id=row_id, code=error.code, message=str(error)[:800], took=took)
                seq += 1  # it may have landed: never reuse the id
        except Exception as error:
            emit("error", format=program, id=row_id, code=type(error).__name__, message=str(error)[:800])
            seq += 1
        else:
            emit("ok", format=program, id=row_id, began=began, took=round(time.monotonic() - began, 4))
            seq += 1
        tick += args.interval
        while tick <= time.monotonic():  # a write that overran a tick waits for the next one
            tick += args.interval
    graph.close()
    emit("stop")
    return 0


def read_log(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.endswith("}"):  # a line cut by a killed writer is skipped
            events.append(json.loads(line))
    return events


# -- the check after a run (a child process) -------------------------------------------------------


def check_main(argv: list[str]) -> int:
    """``_check --graph G --log F --rows N``: every acknowledged id on main, and the row count."""
    parser = argparse.ArgumentParser(prog="outage_bench.py _check")
    parser.add_argument("--graph", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--rows", type=int, required=True)
    args = parser.parse_args(argv)

    import lance
    import pyarrow.compute as pc

    import omnigraph

    events = read_log(args.log)
    acknowledged = [e["id"] for e in events if e["event"] == "ok"]
    uncertain = [e["id"] for e in events if e["event"] == "error" and "id" in e]
    with omnigraph.open(args.graph, read_only=True) as graph:
        snapshot = graph.snapshot("main")
    table = next(t for t in snapshot.tables if t.table_key == WRITER_TABLE)
    dataset = lance.dataset(str(args.graph / table.path)).checkout_version((table.table_branch or "main", table.version))
    wanted = acknowledged + uncertain
    present: list[str] = []
    if wanted:
        found = dataset.to_table(columns=["id"], filter=pc.field("id").isin(wanted))
        present = found.column("id").to_pylist()
    present_set = set(present)
    missing = [i for i in acknowledged if i not in present_set]
    print(
        json.dumps(
            {
                "stamp": snapshot.format,
                "table": WRITER_TABLE,
                "table_branch": table.table_branch,
                "table_version": table.version,
                "pk": list(table.pk),
                "rows": table.rows,
                "rows_scanned": dataset.count_rows(),
                "expected_rows": args.rows + len(acknowledged),
                "acknowledged": len(acknowledged),
                "acknowledged_present": len(acknowledged) - len(missing),
                "missing": missing[:50],
                "missing_count": len(missing),
                "duplicated": len(present) - len(present_set),
                "uncertain": len(uncertain),
                "uncertain_present": sum(1 for i in uncertain if i in present_set),
            }
        )
    )
    return 0


# -- one run ---------------------------------------------------------------------------------------


def wait_for(predicate: Any, timeout: float, what: str, writer_pid: int) -> None:
    """Poll ``predicate`` every 50 ms; fail after ``timeout`` or if the writer died."""
    deadline = time.monotonic() + timeout
    while not predicate():
        pid, status, _ = os.wait4(writer_pid, os.WNOHANG)
        if pid:
            raise BenchFailure(f"the writer exited ({os.waitstatus_to_exitcode(status)}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise BenchFailure(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def stop_writer(process: subprocess.Popen[bytes], stop_file: Path, timeout: float = 60.0) -> int:
    """Ask the writer to stop (it finishes its write, closes the graph); its peak RSS (KiB)."""
    stop_file.touch()
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            process.kill()
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            raise BenchFailure(f"the writer did not stop within {timeout:.0f}s; killed")
        time.sleep(0.05)
    if process.returncode != 0:
        raise BenchFailure(f"the writer exited {process.returncode}")
    return int(usage.ru_maxrss)


def parse_at(text: str) -> float:
    """A ledger ``at`` (``2024-01-02T03:04:05.123456Z``) as POSIX seconds."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def refused_before_claim(outcome: Any, graph: Path) -> bool:
    """``run`` refused with ``recovery_required`` and left no migration behind (nothing written)."""
    error = outcome.get("error") if isinstance(outcome, dict) else None
    return isinstance(error, dict) and error.get("code") == "recovery_required" and not (graph / "__migration").exists()


def ledger_records(graph: Path, migration_id: str) -> list[dict[str, Any]]:
    """The ledger's records in sequence order, read as the JSON files they are (ledger/layout.py)."""
    directory = graph / "__migration" / migration_id / "ledger"
    names = sorted(p.name for p in directory.iterdir() if p.name.endswith(".json") and p.name[:-5].isdigit())
    return [json.loads((directory / name).read_text(encoding="utf-8")) for name in names]


def ledger_phases(records: list[dict[str, Any]]) -> tuple[dict[str, list[float]], float | None, dict[str, dict[str, float]]]:
    """The ledger read back: each record kind's first and last ``at``, in seconds after ``barrier_set``
    (after the first record if there is none), in order of first appearance; the outage
    (``barrier_set`` to ``claim_released``); and the id validation on each side of the barrier.

    The validation is the ``image_validated`` records, ``online`` (before ``barrier_set``) and
    ``barrier`` (after it): for each side, their rows and the time from the record before the
    first of them (normally the plan) to the last of them, summed over runs of consecutive ones.
    """
    at = [(r["kind"], parse_at(r["at"]), r) for r in records]
    barrier = next((t for kind, t, _ in at if kind == "barrier_set"), None)
    origin = barrier if barrier is not None else at[0][1]
    phases: dict[str, list[float]] = {}
    for kind, t, _ in at:
        offset = round(t - origin, 4)
        phases.setdefault(kind, [offset, offset])[1] = offset
    released = next((t for kind, t, _ in reversed(at) if kind == "claim_released"), None)
    outage = released - barrier if barrier is not None and released is not None else None
    validation: dict[str, dict[str, float]] = {}
    previous: float | None = None
    group_start: float | None = None
    for index, (kind, t, record) in enumerate(at):
        if kind != "image_validated":
            previous, group_start = t, None
            continue
        side = validation.setdefault(
            "online" if barrier is not None and t < barrier else "barrier", {"rows": 0, "seconds": 0.0, "images": 0}
        )
        if group_start is None:
            group_start = previous if previous is not None else t
        side["rows"] += int(record["rows"])
        side["images"] += 1
        if index + 1 == len(at) or at[index + 1][0] != "image_validated":  # barrier_set ends a run too
            side["seconds"] += t - group_start
            group_start = None
    for side in validation.values():
        side["seconds"] = round(side["seconds"], 4)
    return phases, outage, validation


def reported_outage(document: Any) -> float | None:
    """``outage_seconds`` of the ``run --json`` document (top level, or one level down), if it has one."""
    if not isinstance(document, dict):
        return None
    candidates = [document, *(v for v in document.values() if isinstance(v, dict))]
    for candidate in candidates:
        value = candidate.get("outage_seconds")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def render_phases(phases: dict[str, list[float]]) -> str:
    """``barrier_set +0.00, plan_recorded +0.02, image_validated +0.03..+1.20, ...``."""
    parts = []
    for kind, (first, last) in phases.items():
        parts.append(f"{kind} {first:+.2f}" + (f"..{last:+.2f}" if last != first else ""))
    return ", ".join(parts)


def longest_gap(ok_times: list[float], start: float, end: float) -> tuple[float, float]:
    """The longest time between consecutive acknowledged writes from the last one at or before
    ``start`` to the first one at or after ``end`` (and where it starts, relative to ``start``)."""
    before = [t for t in ok_times if t <= start]
    after = [t for t in ok_times if t >= end]
    lo = before[-1] if before else start
    hi = after[0] if after else end
    window = [lo, *(t for t in ok_times if lo < t < hi), hi]
    gaps = [(b - a, a) for a, b in itertools.pairwise(window)]
    gap, at = max(gaps) if gaps else (0.0, lo)
    return gap, at - start


def one_run(fixture: Path, workdir: Path, size: int, run: int, args: argparse.Namespace) -> Run:
    run_dir = workdir / f"outage-run-{size}-{run}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    started = time.perf_counter()
    shutil.copytree(fixture / GRAPH_DIR, run_dir / GRAPH_DIR)
    os.sync()  # the copy's writeback is not charged to the migrator's first fsync
    copy_s = time.perf_counter() - started
    graph = run_dir / GRAPH_DIR
    log_path, stop_file = run_dir / "writer.jsonl", run_dir / "writer.stop"
    writer_out = (run_dir / "writer.out").open("wb")
    writer = subprocess.Popen(
        [
            sys.executable,
            str(THIS_SCRIPT),
            "_writer",
            "--graph",
            str(graph),
            "--log",
            str(log_path),
            "--stop",
            str(stop_file),
            "--prefix",
            f"writer-r{run}",
            "--interval",
            str(args.interval),
        ],
        stdout=writer_out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=child_env(),
    )
    writer_maxrss = 0
    try:

        def acknowledged(after: float | None = None, count: int = 1) -> bool:
            if not log_path.exists():
                return False
            oks = [e for e in read_log(log_path) if e["event"] == "ok" and (after is None or e["t"] >= after)]
            return len(oks) >= count

        wait_for(lambda: acknowledged(count=WARMUP_WRITES), 180, f"{WARMUP_WRITES} acknowledged writes before the upgrade", writer.pid)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        refused_attempts: list[dict[str, Any]] = []
        while True:
            migrated = run_measured([str(MIGRATE), "run", str(graph), "--owner", "bench", "--json"])
            outcome = migrated.document() or {}
            if migrated.returncode == 0 or not refused_before_claim(outcome, graph) or len(refused_attempts) >= RUN_RETRIES:
                break
            # The writer's commit was in flight when `run` looked for pending intents: refused
            # before the claim, nothing written. An operator runs it again; so does the bench.
            refused_attempts.append({"wall_s": round(migrated.wall_s, 4), "error": outcome.get("error", {}).get("message")})
            say(f"N={human(size)} run {run}: `run` refused with recovery_required before the claim (a write in flight); running it again")
        if migrated.returncode != 0:
            raise BenchFailure(migrated.failure(f"omnigraph-migrate run (N={size}, run {run}, copy kept in {run_dir})"))
        if outcome.get("stamp") != "5" or outcome.get("units") != UNITS:
            raise BenchFailure(f"unexpected migration outcome for N={size}, run {run}: {outcome}")
        wait_for(
            lambda: acknowledged(after=migrated.ended, count=AFTER_WRITES),
            args.settle,
            f"the writer's first {AFTER_WRITES} writes after the upgrade",
            writer.pid,
        )
        writer_maxrss = stop_writer(writer, stop_file)
    finally:
        if writer.returncode is None:
            writer.kill()
            os.wait4(writer.pid, 0)
            writer.returncode = -9
        writer_out.close()

    events = read_log(log_path)
    t0, t1 = migrated.started, migrated.ended
    oks = [e for e in events if e["event"] == "ok"]
    refused = [e for e in events if e["event"] == "refused"]
    errors = [e for e in events if e["event"] == "error"]
    gap, gap_at = longest_gap([e["t"] for e in oks], t0, t1)
    codes: dict[str, int] = {}
    for e in refused:
        key = f"{e['code']} (format {e['format']}, stamp {e.get('stamp')})"
        codes[key] = codes.get(key, 0) + 1
    switch = next((e["t"] - t0 for e in events if e["event"] == "switch"), None)

    migration_id = outcome.get("migration_id") or ""
    phases, outage_ledger, validation = ledger_phases(ledger_records(graph, migration_id))
    reported = reported_outage(outcome)

    started = time.perf_counter()
    verified = subprocess.run([str(MIGRATE), "verify", str(graph), "--json"], capture_output=True, text=True, env=child_env())
    if verified.returncode != 0:
        raise BenchFailure(
            f"verify after the upgrade (N={size}, run {run}, copy kept in {run_dir}) exited {verified.returncode}: "
            f"{verified.stdout[-2000:]} {verified.stderr[-2000:]}"
        )
    verify_s = time.perf_counter() - started
    checked = run_measured([sys.executable, str(THIS_SCRIPT), "_check", "--graph", str(graph), "--log", str(log_path), "--rows", str(size)])
    check = checked.document() or {}
    if checked.returncode != 0:
        raise BenchFailure(checked.failure(f"the row check (N={size}, run {run})"))
    if check.get("missing_count"):
        raise BenchFailure(
            f"LOST WRITES: {check['missing_count']} write(s) the writer saw acknowledged are not on main's "
            f"{WRITER_TABLE} after the upgrade (N={size}, run {run}; copy kept in {run_dir}): {check['missing'][:10]}"
        )
    if check.get("rows") != check.get("expected_rows") + check.get("uncertain_present", 0) or check.get("duplicated"):
        raise BenchFailure(
            f"unexpected rows on main's {WRITER_TABLE} after the upgrade (N={size}, run {run}; copy kept in {run_dir}): {check}"
        )
    if not args.keep_runs:
        shutil.rmtree(run_dir)
    return Run(
        size=size,
        run=run,
        wall_s=round(migrated.wall_s, 4),
        maxrss_kib=migrated.maxrss_kib,
        cpu_s=round(migrated.user_s + migrated.sys_s, 3),
        migration_id=migration_id,
        outage_ledger_s=round(outage_ledger, 4) if outage_ledger is not None else None,
        outage_reported_s=reported,
        longest_gap_s=round(gap, 4),
        gap_from_s=round(gap_at, 4),
        writes_ok=sum(1 for e in oks if t0 <= e["t"] <= t1),
        writes_refused=sum(1 for e in refused if t0 <= e["t"] <= t1),
        writes_errors=sum(1 for e in errors if t0 <= e["t"] <= t1),
        writer_ok_total=len(oks),
        writer_refused_total=len(refused),
        writer_refusal_codes=codes,
        writer_errors=errors[:20],
        writer_first_refused_s=round(refused[0]["t"] - t0, 4) if refused else None,
        writer_switch_s=round(switch, 4) if switch is not None else None,
        writer_first_ok_after_s=round(next(e["t"] for e in oks if e["t"] >= t1) - t1, 4),
        writer_write_ms={
            f"format {program}": round(1000 * statistics.median(e["took"] for e in oks if e["format"] == program), 1)
            for program in sorted({e["format"] for e in oks})
        },
        writer_refusal_messages={f"{e['code']} (stamp {e.get('stamp')})": e.get("message") for e in refused},
        writer_maxrss_kib=writer_maxrss,
        phases=phases,
        validation=validation,
        check=check,
        loadavg_before=round(load, 2) if load is not None else None,
        copy_s=round(copy_s, 3),
        verify_s=round(verify_s, 3),
        run_document=outcome,
        refused_attempts=refused_attempts,
    )


def baseline_run(fixture: Path, size: int) -> dict[str, Any]:
    """Lance alone reads the ids of the fixture's distinct images (baseline_read.py)."""
    measured = run_measured([sys.executable, str(BASELINE_SCRIPT), str(fixture / GRAPH_DIR), str(fixture / FIXTURE_FILE)])
    if measured.returncode != 0:
        raise BenchFailure(measured.failure(f"the baseline read (N={size})"))
    document = measured.document() or {}
    if document.get("rows") != DISTINCT_IMAGES * size:
        raise BenchFailure(f"the baseline read {document.get('rows')} ids for N={size}, expected {DISTINCT_IMAGES * size}")
    return {
        "wall_s": round(measured.wall_s, 4),
        "maxrss_kib": measured.maxrss_kib,
        "rows": document["rows"],
        "read_s": round(sum(document["seconds_per_image"]), 4),
    }


# -- summary ---------------------------------------------------------------------------------------


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 4) if present else None


def summarize(size: int, runs: list[Run], baselines: list[dict[str, Any]]) -> dict[str, Any]:
    read_s = median([b["read_s"] for b in baselines])
    validation = {}
    for side in ("online", "barrier"):
        rows = median([r.validation[side]["rows"] for r in runs if side in r.validation])
        seconds = median([r.validation[side]["seconds"] for r in runs if side in r.validation])
        if rows is not None and seconds is not None:
            validation[side] = {"rows": rows, "seconds": seconds, "rows_per_s": round(rows / seconds) if seconds else None}
    # The id-read rate compared with the floor: the online phase's when there is one, else the barrier's.
    main_side = "online" if "online" in validation else "barrier" if "barrier" in validation else None
    by_outage = sorted(runs, key=lambda r: r.outage_s if r.outage_s is not None else float("inf"))
    return {
        "size": size,
        "runs": len(runs),
        "outage_s": median([r.outage_s for r in runs]),
        "outage_ledger_s": median([r.outage_ledger_s for r in runs]),
        "outage_reported_s": median([r.outage_reported_s for r in runs]),
        "longest_gap_s": median([r.longest_gap_s for r in runs]),
        "longest_gap_max_s": max(r.longest_gap_s for r in runs),
        "wall_s": median([r.wall_s for r in runs]),
        "maxrss_mib": round(max(r.maxrss_kib for r in runs) / MIB, 1),
        "maxrss_median_mib": round(statistics.median(r.maxrss_kib for r in runs) / MIB, 1),
        "cpu_s": median([r.cpu_s for r in runs]),
        "writes_ok": median([float(r.writes_ok) for r in runs]),
        "writes_refused": median([float(r.writes_refused) for r in runs]),
        "writes_errors": sum(r.writes_errors for r in runs),
        "run_refused_attempts": sum(len(r.refused_attempts) for r in runs),
        "writer_switch_s": median([r.writer_switch_s for r in runs]),
        "writer_first_ok_after_s": median([r.writer_first_ok_after_s for r in runs]),
        "writer_maxrss_mib": round(max(r.writer_maxrss_kib for r in runs) / MIB, 1),
        "writer_write_ms": {
            key: median([r.writer_write_ms.get(key) for r in runs]) for key in sorted({k for r in runs for k in r.writer_write_ms})
        },
        "validation": validation,
        "validation_side": main_side,
        "validation_rows_per_s": validation[main_side]["rows_per_s"] if main_side else None,
        "baseline_wall_s": median([b["wall_s"] for b in baselines]),
        "baseline_read_s": read_s,
        "baseline_rows_per_s": round(baselines[0]["rows"] / read_s) if baselines and read_s else None,
        "median_run": by_outage[(len(by_outage) - 1) // 2].run,
        "median_run_phases": by_outage[(len(by_outage) - 1) // 2].phases,
    }


def targets(summaries: dict[int, dict[str, Any]]) -> list[tuple[str, str, str]]:
    """Every target this run can judge: (target, measured, PASS/FAIL or '-')."""
    rows: list[tuple[str, str, str]] = []
    sizes = sorted(summaries)
    small, large = summaries[sizes[0]], summaries[sizes[-1]]

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    growth = (
        f"outage at {human(large['size'])} <= {TARGET_GROWTH}x the outage at {human(small['size'])}"
        if len(sizes) > 1
        else f"outage at the largest size <= {TARGET_GROWTH}x the outage at the smallest"
    )
    if len(sizes) > 1 and small["outage_s"] and large["outage_s"] is not None:
        ratio = large["outage_s"] / small["outage_s"]
        rows.append((growth, f"{ratio:.2f}x ({large['outage_s']:.2f}s / {small['outage_s']:.2f}s)", verdict(ratio <= TARGET_GROWTH)))
    else:
        rows.append((growth, "not measured (needs two sizes)", "-"))
    absolute = f"outage at {human(large['size'])} <= {TARGET_OUTAGE_S:g}s"
    if large["outage_s"] is not None:
        rows.append((absolute, f"{large['outage_s']:.2f}s", verdict(large["outage_s"] <= TARGET_OUTAGE_S)))
    else:
        rows.append((absolute, "not measured (no barrier_set/claim_released records)", "-"))
    for size in sizes:
        gap = summaries[size]["longest_gap_s"]
        rows.append((f"longest writer gap at {human(size)} <= {TARGET_GAP_S:g}s", f"{gap:.2f}s", verdict(gap <= TARGET_GAP_S)))
    return rows


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render_table(summaries: dict[int, dict[str, Any]]) -> str:
    smallest = summaries[min(summaries)]
    headers = [
        "N/table",
        "outage s",
        "outage / smallest",
        "longest gap s",
        "run wall s",
        "run RSS MiB",
        "run CPU s",
        "writes ok / refused",
        "ids validated/s",
        "Lance id read/s",
        "Lance / validate rate",
    ]
    lines = []
    for size in sorted(summaries):
        s = summaries[size]
        growth = s["outage_s"] / smallest["outage_s"] if s["outage_s"] is not None and smallest["outage_s"] else None
        floor = s["baseline_rows_per_s"] / s["validation_rows_per_s"] if s["validation_rows_per_s"] and s["baseline_rows_per_s"] else None
        lines.append(
            [
                human(size),
                fmt(s["outage_s"]),
                fmt(growth),
                fmt(s["longest_gap_s"]),
                fmt(s["wall_s"]),
                f"{s['maxrss_mib']:.0f}",
                fmt(s["cpu_s"]),
                f"{s['writes_ok']:g} / {s['writes_refused']:g}",
                f"{s['validation_rows_per_s'] / 1e6:.1f}M ({s['validation_side']})" if s["validation_rows_per_s"] else "-",
                f"{s['baseline_rows_per_s'] / 1e6:.1f}M" if s["baseline_rows_per_s"] else "-",
                fmt(floor, 1),
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in lines)) for i, h in enumerate(headers)]
    out = ["| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"]
    out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    out.extend("| " + " | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in lines)
    return "\n".join(out)


# -- main ------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Benchmark the write outage of omnigraph-migrate run under a live writer.")
    parser.add_argument(
        "--sizes", nargs="+", type=parse_size, default=DEFAULT_SIZES, metavar="N", help="rows per table (100k, 10M, ...); default: 100K 10M"
    )
    parser.add_argument("--runs", type=int, default=3, help="measured runs per size (medians are reported); default 3")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "omnigraph-bench",
        help="local directory for fixtures and run copies; fixtures are reused across invocations",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every raw run and the summary to FILE")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the fixtures even if complete ones exist")
    parser.add_argument("--keep-runs", action="store_true", help="keep the migrated copies and the writer logs")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between the writer's writes; default 0.2")
    parser.add_argument(
        "--settle", type=float, default=120.0, help="seconds to wait for the writer's first write after the upgrade; default 120"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.interval <= 0 or args.settle <= 0:
        parser.error("--interval and --settle must be positive")
    if "://" in str(args.workdir):
        parser.error("--workdir must be a local directory")
    args.sizes = sorted(set(args.sizes))
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in CHILD_MODES:
        return {"_fixture": build_fixture_main, "_writer": writer_main, "_check": check_main}[argv[0]](argv[1:])
    args = parse_args(argv)
    compile_project()
    if not MIGRATE.exists():
        say(f"{MIGRATE} not found: run this with the project's virtualenv python (.venv/bin/python)")
        return 2
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "command": [Path(sys.argv[0]).name, *argv],
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "sizes": args.sizes,
        "runs_per_size": args.runs,
        "interval_s": args.interval,
        "fixtures": {},
        "runs": [],
        "baselines": [],
        "summary": [],
    }
    summaries: dict[int, dict[str, Any]] = {}

    def write_report() -> None:
        report["driver_maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")

    try:
        for size in args.sizes:
            fixture, document = ensure_fixture(workdir, size, args.rebuild)
            report["fixtures"][str(size)] = {k: v for k, v in document.items() if k not in ("images", "pins")}
            runs: list[Run] = []
            baselines: list[dict[str, Any]] = []
            for run in range(1, args.runs + 1):
                measured = one_run(fixture, workdir, size, run, args)
                baseline = baseline_run(fixture, size)
                runs.append(measured)
                baselines.append(baseline)
                report["runs"].append({**asdict(measured), "outage_s": measured.outage_s})
                report["baselines"].append({"size": size, "run": run, **baseline})
                write_report()
                reported = "" if measured.outage_reported_s is None else f" (run says {measured.outage_reported_s:.2f}s)"
                say(
                    f"N={human(size)} run {run}/{args.runs}: outage {fmt(measured.outage_ledger_s)}s{reported}, "
                    f"longest writer gap {measured.longest_gap_s:.2f}s, run {measured.wall_s:.2f}s "
                    f"{measured.maxrss_kib / MIB:.0f} MiB, writes ok {measured.writes_ok} refused {measured.writes_refused} "
                    f"errors {measured.writes_errors} | baseline {baseline['wall_s']:.2f}s"
                )
            summaries[size] = summarize(size, runs, baselines)
            report["summary"] = [summaries[s] for s in sorted(summaries)]
            write_report()
    except BenchFailure as failure:
        write_report()
        say(f"FAILED: {failure}")
        return 3
    verdicts = targets(summaries)
    report["targets"] = [{"target": t, "measured": m, "verdict": v} for t, m, v in verdicts]
    report["finished_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    write_report()

    info = report["machine"]
    print(
        f"write outage of `omnigraph-migrate run` under a writer appending every {args.interval * 1000:.0f} ms; "
        f"3 branches x 4 tables (b2 lazy); medians of {args.runs} run(s)"
    )
    print(
        f"machine: {info.get('cpus')} CPUs, {info.get('mem_total_mib')} MiB RAM, Python {info['python']}, "
        f"pylance {info['pylance']}, pyarrow {info['pyarrow']}"
    )
    print(render_table(summaries))
    print(
        "outage: ledger barrier_set -> claim_released"
        + (
            " (the run document's outage_seconds where it has one)"
            if any(s["outage_reported_s"] is not None for s in summaries.values())
            else ""
        )
        + "; longest gap: between two acknowledged writes, from the last before `run` to the first after it"
    )
    for size in sorted(summaries):
        s = summaries[size]
        print(
            f"N={human(size)}: ledger outage {fmt(s['outage_ledger_s'])}s, reported {fmt(s['outage_reported_s'])}s; "
            f"writer switched to format 5 at +{fmt(s['writer_switch_s'])}s, first write after `run` +{fmt(s['writer_first_ok_after_s'])}s; "
            f"writer errors {s['writes_errors']}; `run` refused before its claim {s['run_refused_attempts']} time(s); "
            f"writer peak RSS {s['writer_maxrss_mib']:.0f} MiB, one write "
            + ", ".join(f"{ms:.0f} ms at {key}" for key, ms in s["writer_write_ms"].items() if ms is not None)
            + "; "
            f"baseline {fmt(s['baseline_wall_s'])}s whole process"
        )
        sides = {"online": "online (before the barrier)", "barrier": "under the barrier"}
        checked = [
            f"{label} {s['validation'][side]['rows'] / 1e6:.2f}M ids in {s['validation'][side]['seconds']:.2f}s"
            for side, label in sides.items()
            if side in s["validation"]
        ]
        print("  id validation (image_validated records): " + ("; ".join(checked) or "none recorded"))
        print(f"  ledger of run {s['median_run']} (median outage), seconds after barrier_set: {render_phases(s['median_run_phases'])}")
    loads = [r["loadavg_before"] for r in report["runs"] if r["loadavg_before"] is not None]
    cpus = info.get("cpus_usable") or info.get("cpus") or 1
    if loads and max(loads) > cpus:
        print(f"NOTE: the 1-minute load average reached {max(loads):.1f} on {cpus} CPU(s): wall times are inflated")
    print("targets:")
    for target, measured, verdict in verdicts:
        print(f"{verdict if verdict != '-' else 'NOT EVALUATED'}: {target}: {measured}")
    return 1 if any(v == "FAIL" for _, _, v in verdicts) else 0


if __name__ == "__main__":
    raise SystemExit(main())
