"""Where the time of one small fenced commit goes, against the protocol's Lance floor (a benchmark).

For each size N (rows of one keyed format-5 node table ``Item``, the fixture of
``write_bench.py``/``write_ops.py build``), one child process (``commit_split.py measure``) opens
a copy of the fixture graph with the engine and runs, after one unmeasured warm-up round,
``--runs`` rounds of:

* an engine **upsert**: ``omnigraph.engine.ops.load.load`` of 32 existing ids, ``mode="merge"``;
* an engine **strict insert**: the same with 32 new ids, ``mode="append"``;
* after each, the **floor** on a second copy of the same fixture, with Lance alone: open the
  table at its latest version and run the same fenced ``merge_insert("id")`` on the same 32 rows
  the engine merged (``when_matched_update_all`` for the upsert, ``when_matched_fail`` for the
  strict insert, then ``when_not_matched_insert_all().conflict_retries(0).use_index(False)``),
  then open ``__manifest`` and run the one ``merge_insert("object_id")`` the publish made, on the
  same rows (the head row and the table's row). Both copies get the same writes in the same
  order, so their tables keep the same shape.

The engine's phases are timed by wrappers this script installs around engine functions (no
engine code changes): each phase's own time, its children's subtracted, so the phases add up to
the engine total. Every Lance dataset open (``omnigraph.engine.storage.lance_io.open_dataset_at``) is also
counted and timed inside whichever phase made it, without being subtracted from it.

Usage: ``.venv/bin/python bench/commit_split.py --sizes 1k 100k 1M --runs 7 [--workdir DIR]``; exit
status 1 when the engine is above the target at any size.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omnigraph.engine.storage.store import open_store

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from bytecode import compile_project  # noqa: E402
from migrate_bench import human, parse_size, say  # noqa: E402
from write_bench import ensure_fixture  # noqa: E402
from write_ops import ACTOR, BATCH, GRAPH, TABLE_KEY, _jsonl  # noqa: E402

TARGET = 1.3
KINDS = ("upsert", "insert")
# The engine's phases, in protocol order: (label, what it covers).
PHASES: tuple[tuple[str, str], ...] = (
    ("parse", "read and validate the 32-row JSONL (load's own time)"),
    ("load_checks", "load_records: limits, endpoint checks"),
    ("snapshot", "snapshot read(s) of __manifest"),
    ("commit_loop", "commit(): retry loop, ids, intent document"),
    ("prepare", "prepare: @unique and constraint checks"),
    ("probes", "id probes (present_ids)"),
    ("pins", "pin check"),
    ("arm", "intent create (put-if-absent, fsync)"),
    ("effects", "effects: open the table, count_rows"),
    ("table_merge", "table merge_insert (Lance)"),
    ("publish", "publish: head row"),
    ("manifest_publish", "manifest publish: open, rows"),
    ("manifest_merge", "__manifest merge_insert (Lance)"),
    ("disarm", "disarm (delete the intent)"),
)
FLOOR_PARTS: tuple[tuple[str, str], ...] = (
    ("table_open", "open the table (latest)"),
    ("table_merge", "table merge_insert"),
    ("manifest_open", "open __manifest (latest)"),
    ("manifest_merge", "__manifest merge_insert"),
)


class Split:
    """Own time per phase (children subtracted), calls per phase, and dataset opens per phase."""

    def __init__(self) -> None:
        self.own: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.open_count: dict[str, int] = defaultdict(int)
        self.open_s: dict[str, float] = defaultdict(float)
        self.captured: dict[str, Any] = {}
        self._stack: list[list[Any]] = []

    def reset(self) -> None:
        """Forget the last commit's figures (the wrappers stay installed)."""
        self.own.clear()
        self.calls.clear()
        self.open_count.clear()
        self.open_s.clear()
        self.captured.clear()

    @contextmanager
    def phase(self, label: str) -> Iterator[None]:
        """Time the block as ``label``; its time is taken out of the enclosing phase's own time."""
        frame: list[Any] = [label, 0.0]
        self._stack.append(frame)
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            self._stack.pop()
            self.own[label] += elapsed - frame[1]
            self.calls[label] += 1
            if self._stack:
                self._stack[-1][1] += elapsed

    def wrap(self, owner: Any, name: str, label: str | Callable[..., str]) -> None:
        """Replace ``owner.name`` by a wrapper timing each call as a phase."""
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(label if isinstance(label, str) else label(*args, **kwargs)):
                return original(*args, **kwargs)

        setattr(owner, name, timed)

    def count_opens(self, owner: Any, name: str) -> None:
        """Count and time each call of ``owner.name`` inside the current phase (not subtracted)."""
        original = getattr(owner, name)

        @functools.wraps(original)
        def counted(*args: Any, **kwargs: Any) -> Any:
            label = self._stack[-1][0] if self._stack else "outside"
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.open_count[label] += 1
                self.open_s[label] += time.perf_counter() - started

        setattr(owner, name, counted)


def install(split: Split) -> None:
    """Install the phase wrappers around the engine's write path (module attributes only)."""
    import omnigraph.engine.ops.constraints as id_probe
    import omnigraph.engine.ops.load as load_module
    import omnigraph.engine.ops.write as write
    import omnigraph.engine.storage.lance_io as lance_io
    from omnigraph.engine.door import table_store
    from omnigraph.engine.manifest.manifest import Manifest
    from omnigraph.engine.reconcile import pins, recovery

    split.wrap(load_module, "load_records", "load_checks")
    split.wrap(load_module, "commit", "commit_loop")
    split.wrap(Manifest, "snapshot", "snapshot")
    split.wrap(id_probe, "present_ids", "probes")
    split.wrap(load_module, "present_ids", "probes")
    split.wrap(pins, "check_pins", "pins")
    split.wrap(recovery, "arm", "arm")
    split.wrap(recovery, "disarm", "disarm")
    split.wrap(write, "apply_effects", "effects")
    split.wrap(write, "publish", "publish")
    split.wrap(Manifest, "publish", "manifest_publish")

    original_prepare_for = load_module._prepare_for

    @functools.wraps(original_prepare_for)
    def prepare_for(*args: Any, **kwargs: Any) -> Any:
        prepare = original_prepare_for(*args, **kwargs)

        def timed(*inner: Any) -> Any:
            with split.phase("prepare"):
                return prepare(*inner)

        return timed

    load_module._prepare_for = prepare_for

    original_merge = table_store._fenced_merge

    @functools.wraps(original_merge)
    def fenced_merge(dataset: Any, rows: Any, *, strict: bool) -> int:
        label = "manifest_merge" if dataset.uri.rstrip("/").endswith("__manifest") else "table_merge"
        split.captured[label] = rows  # the floor merges exactly these rows
        with split.phase(label):
            return original_merge(dataset, rows, strict=strict)

    table_store._fenced_merge = fenced_merge
    split.count_opens(lance_io, "open_dataset_at")


def floor_commit(floor_root: Path, table_path: str, table_rows: Any, manifest_rows: Any, strict: bool, session: Any) -> dict[str, float]:
    """The protocol's necessary Lance work on the floor copy: the fenced table merge of the
    engine's rows, then the one ``__manifest`` merge of the publish's rows; seconds per part.

    Both merges are the door's own calls (:mod:`omnigraph.engine.door.table_store`: one Lance
    ``merge_insert`` ON the primary key with ``use_index(False)`` and ``conflict_retries(0)``,
    nothing else), so the floor is Lance's work and no keyed write bypasses the door."""
    import lance

    from omnigraph.engine.door import table_store

    times: dict[str, float] = {}
    started = time.perf_counter()
    table = lance.dataset(str(floor_root / table_path), session=session)
    times["table_open"] = time.perf_counter() - started
    started = time.perf_counter()
    (table_store.strict_insert if strict else table_store.upsert)(table, table_rows)
    times["table_merge"] = time.perf_counter() - started
    started = time.perf_counter()
    manifest = lance.dataset(str(floor_root / "__manifest"), session=session)
    times["manifest_open"] = time.perf_counter() - started
    started = time.perf_counter()
    table_store.upsert(manifest, manifest_rows)
    times["manifest_merge"] = time.perf_counter() - started
    return times


def measure(engine_root: Path, floor_root: Path, runs: int, warmup: int) -> dict[str, Any]:
    """The child process of one size: ``warmup`` + ``runs`` rounds of upsert, floor, insert, floor."""
    import lance

    from omnigraph.engine.door.table_store import FENCED_PROFILE
    from omnigraph.engine.graph import open_graph
    from omnigraph.engine.manifest.rows import MAIN
    from omnigraph.engine.ops.load import load

    split = Split()
    install(split)
    graph = open_graph(open_store(str(engine_root)), FENCED_PROFILE, write=True)
    entry = graph.manifest.snapshot(MAIN).table(TABLE_KEY)
    rows = entry.row_count
    session = lance.Session()
    samples: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for round_index in range(warmup + runs):
        for kind in KINDS:
            first = rows // 2 + round_index * BATCH if kind == "upsert" else rows + round_index * BATCH
            data = _jsonl(first, BATCH, round_index)
            split.reset()
            started = time.perf_counter()
            with split.phase("parse"):
                result = load(graph, data, mode="merge" if kind == "upsert" else "append", branch=MAIN, actor=ACTOR)
            total = time.perf_counter() - started
            if len(result.commits) != 1:
                raise SystemExit(f"{kind}: expected one commit, got {len(result.commits)}")
            sample: dict[str, Any] = {
                "total": total,
                "own": dict(split.own),
                "calls": dict(split.calls),
                "opens": dict(split.open_count),
                "open_s": dict(split.open_s),
            }
            floor = floor_commit(
                floor_root, entry.table_path, split.captured["table_merge"], split.captured["manifest_merge"], kind == "insert", session
            )
            sample["floor"] = floor
            sample["floor_total"] = sum(floor.values())
            if round_index >= warmup:
                samples[kind].append(sample)
    expected = rows + (warmup + runs) * BATCH
    engine_rows = graph.manifest.snapshot(MAIN).table(TABLE_KEY).row_count
    floor_rows = lance.dataset(str(floor_root / entry.table_path)).count_rows()
    if engine_rows != expected or floor_rows != expected:
        raise SystemExit(f"expected {expected} rows, engine has {engine_rows}, floor {floor_rows}")
    return {"rows": rows, "runs": runs, "warmup": warmup, "samples": samples}


def summarise(document: dict[str, Any]) -> dict[str, Any]:
    """Medians of the runs: per phase (own ms, calls, opens), engine total, floor parts and total."""
    summary: dict[str, Any] = {"rows": document["rows"]}
    for kind in KINDS:
        samples = document["samples"][kind]

        def med(get: Callable[[dict[str, Any]], float], samples: list[dict[str, Any]] = samples) -> float:
            return statistics.median(get(s) for s in samples)

        phases = {}
        for label, _ in PHASES:
            phases[label] = {
                "ms": med(lambda s, label=label: s["own"].get(label, 0.0)) * 1000,
                "calls": med(lambda s, label=label: s["calls"].get(label, 0)),
                "opens": med(lambda s, label=label: s["opens"].get(label, 0)),
                "open_ms": med(lambda s, label=label: s["open_s"].get(label, 0.0)) * 1000,
            }
        floor = {part: med(lambda s, part=part: s["floor"][part]) * 1000 for part, _ in FLOOR_PARTS}
        total = med(lambda s: s["total"]) * 1000
        floor_total = med(lambda s: s["floor_total"]) * 1000
        merges = med(lambda s: s["floor"]["table_merge"] + s["floor"]["manifest_merge"]) * 1000
        summary[kind] = {
            "phases": phases,
            "floor": floor,
            "total_ms": total,
            "floor_ms": floor_total,
            "floor_merges_ms": merges,
            "ratio": total / floor_total,
            "ratio_merges": total / merges,
            "table_merge_ratio": total / floor["table_merge"],
        }
    return summary


def render(summaries: list[dict[str, Any]], runs: int) -> str:
    """One markdown table: a row per phase and per floor part, a column per (size, kind)."""
    columns = [(s, kind) for s in summaries for kind in KINDS]
    header = f"| ms (median of {runs}) | " + " | ".join(f"{human(s['rows'])} {kind}" for s, kind in columns) + " |"
    lines = [header, "|---|" + "---:|" * len(columns)]

    def row(name: str, cells: list[str]) -> None:
        lines.append(f"| {name} | " + " | ".join(cells) + " |")

    for label, text in PHASES:
        cells = []
        for s, kind in columns:
            phase = s[kind]["phases"][label]
            cell = f"{phase['ms']:.1f}"
            if phase["calls"] > 1:
                cell += f" ({phase['calls']:g} calls)"
            if phase["opens"]:
                cell += f" [{phase['opens']:g} open{'s' if phase['opens'] > 1 else ''} {phase['open_ms']:.1f}]"
            cells.append(cell)
        row(text, cells)
    row("**engine total** (median of totals)", [f"**{s[k]['total_ms']:.1f}**" for s, k in columns])
    for part, text in FLOOR_PARTS:
        row(f"floor: {text}", [f"{s[k]['floor'][part]:.1f}" for s, k in columns])
    row("**floor total** (median of totals)", [f"**{s[k]['floor_ms']:.1f}**" for s, k in columns])
    row(f"**engine / floor** (target <= {TARGET}x)", [f"**{s[k]['ratio']:.2f}x**" for s, k in columns])
    row("engine / floor merges alone (no opens)", [f"{s[k]['ratio_merges']:.2f}x" for s, k in columns])
    row("engine / Lance's table merge alone", [f"{s[k]['table_merge_ratio']:.2f}x" for s, k in columns])
    return "\n".join(lines)


def run_size(workdir: Path, size: int, runs: int, warmup: int) -> dict[str, Any]:
    """Build (or reuse) the fixture of ``size`` rows, copy it twice, measure in one child process."""
    fixture = ensure_fixture(workdir, size, btree=False)
    scratch = Path(tempfile.mkdtemp(dir=workdir, prefix=f"split-{size}-"))
    try:
        engine_copy, floor_copy = scratch / "engine", scratch / "floor"
        shutil.copytree(fixture / GRAPH, engine_copy)
        shutil.copytree(fixture / GRAPH, floor_copy)
        say(f"N={human(size)}: {warmup} warm-up + {runs} rounds in one process ...")
        child = subprocess.run(
            [sys.executable, __file__, "measure", str(engine_copy), str(floor_copy), "--runs", str(runs), "--warmup", str(warmup)],
            check=True,
            capture_output=True,
            text=True,
        )
        return summarise(json.loads(child.stdout.splitlines()[-1]))
    finally:
        shutil.rmtree(scratch)


def main(argv: list[str] | None = None) -> int:
    """The driver (``--sizes``), or ``measure ENGINE FLOOR`` (the child of one size)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="op")
    child = sub.add_parser("measure")
    child.add_argument("engine", type=Path)
    child.add_argument("floor", type=Path)
    child.add_argument("--runs", type=int, default=7)
    child.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--sizes", nargs="+", type=parse_size, default=[1_000, 100_000, 1_000_000], metavar="N")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "omnigraph-write-bench")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args(argv)
    if args.op == "measure":
        print(json.dumps(measure(args.engine, args.floor, args.runs, args.warmup)))
        return 0
    compile_project()
    args.workdir.mkdir(parents=True, exist_ok=True)
    summaries = [run_size(args.workdir, size, args.runs, args.warmup) for size in sorted(args.sizes)]
    print(render(summaries, args.runs))
    if args.json:
        args.json.write_text(json.dumps(summaries, indent=1) + "\n", encoding="utf-8")
    missed = [s for s in summaries for kind in KINDS if s[kind]["ratio"] > TARGET]
    print(f"target (engine <= {TARGET}x the floor at every size): {'MISSED' if missed else 'met'}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
