"""``contains`` on a ``String @index`` property: served by the n-gram index against the table scan.

``python bench/substring_bench.py [--sizes 100000 1000000] [--runs 5] [--work DIR]``

For each size N it builds (once, kept in ``DIR/substring-N``) a graph of N ``Note`` nodes
(``slug: String @key, body: String @index``; a body is three words of a 12-word vocabulary and
the note's number, ``"golf alpha kilo 123456"``) in one commit A, then runs ``omnigraph optimize
--declared-indexes`` (commit B: the n-gram and full-text indexes). In a fresh process per size it
runs each query ``--runs`` times through :func:`omnigraph.engine.query.run.run_query` at B (the
n-gram index serves ``contains``) and at A (no index: the table is scanned), in the same
process. Queries: ``rare``, a text only a note's number holds (1 note at 100K, 20 at 1M);
``common``, two words in a row (1 note in 144: past the 4,096 rows the index may hand over at
1M, where the table is then scanned, the same as without the index), counted; ``counted``, the
rare text counted. Reported: the median wall time of each, their ratio, the
rows, and the process's peak RSS (``os.wait4``). Not a test; CI never runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bytecode import compile_project

SCHEMA = "node Note { slug: String @key  body: String @index }\n"
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]
QUERIES = """
query rare($t: String) { match { $n: Note  $n.body contains $t } return { $n.slug } }
query common($t: String) { match { $n: Note  $n.body contains $t } return { count($n) as n } }
query counted($t: String) { match { $n: Note  $n.body contains $t } return { count($n) as n } }
"""
PARAMS = {"rare": {"t": "12345"}, "common": {"t": "lima kilo"}, "counted": {"t": "12345"}}


def build(root: Path, notes: int) -> dict[str, str]:
    """The benchmark graph at ``root`` (one overwrite commit through the engine's commit path, as
    ``query_bench.py`` builds its graph); the commits before (``scan``) and after (``index``) the indexes."""
    import numpy as np
    import pyarrow as pa

    from omnigraph.engine.door.table_store import FENCED_PROFILE
    from omnigraph.engine.graph import init_graph, open_graph
    from omnigraph.engine.ops.write import CommitPlan, TableWrite, commit
    from omnigraph.engine.storage.store import open_store
    from omnigraph.maintenance import optimize

    graph = init_graph(open_store(str(root)), SCHEMA, FENCED_PROFILE, actor="bench")
    picks = np.random.default_rng(11).integers(0, len(WORDS), size=(notes, 3))
    slugs = [f"n{i:09d}" for i in range(notes)]
    bodies = [f"{WORDS[a]} {WORDS[b]} {WORDS[c]} {i}" for i, (a, b, c) in enumerate(picks.tolist())]
    table = pa.Table.from_arrays([slugs, slugs, bodies], schema=graph.catalog.table("node:Note").arrow_schema(with_pk=True))

    def prepare(snapshot: Any, _previous: Any) -> Any:
        return CommitPlan((TableWrite("node:Note", "overwrite", table),), (snapshot.head.commit_id,), "substring bench", None)

    commit(graph, "main", prepare, actor="bench")
    scan = graph.manifest.snapshot("main").head.commit_id
    optimize(str(root), declared_indexes=True)
    index = open_graph(open_store(str(root)), FENCED_PROFILE, write=False).manifest.snapshot("main").head.commit_id
    commits = {"scan": scan, "index": index}
    (root.parent / f"{root.name}.json").write_text(json.dumps(commits), encoding="utf-8")
    return commits


def measure(root: Path, runs: int) -> dict[str, Any]:
    """Median seconds per query at each commit, in this process."""
    from omnigraph.engine.door.table_store import FENCED_PROFILE
    from omnigraph.engine.graph import open_graph
    from omnigraph.engine.query.run import run_query
    from omnigraph.engine.storage.store import open_store

    commits = json.loads((root.parent / f"{root.name}.json").read_text(encoding="utf-8"))
    graph = open_graph(open_store(str(root)), FENCED_PROFILE, write=False)
    results: dict[str, Any] = {}
    for name, params in PARAMS.items():
        row: dict[str, Any] = {}
        for way in ("index", "scan"):
            times, rows = [], []
            for _ in range(runs):
                started = time.perf_counter()
                answer = run_query(graph, QUERIES, name=name, params=params, at=commits[way])
                times.append(time.perf_counter() - started)
                rows = answer["rows"]
            row[way] = statistics.median(times)
            row[f"{way}_rows"] = len(rows) if name == "rare" else rows[0]["n"]
        if row["index_rows"] != row["scan_rows"]:
            raise RuntimeError(f"{name}: {row['index_rows']} rows with the index, {row['scan_rows']} without")
        results[name] = row
    return results


def one_size(notes: int, runs: int, work: Path) -> tuple[dict[str, Any], float]:
    """Build if needed, then measure in a child process; its results and peak RSS in MiB."""
    root = work / f"substring-{notes}"
    if not root.exists():
        subprocess.run([sys.executable, __file__, "--build", str(notes), "--work", str(work)], check=True)
    child = subprocess.Popen(
        [sys.executable, __file__, "--measure", str(notes), "--runs", str(runs), "--work", str(work)], stdout=subprocess.PIPE
    )
    assert child.stdout is not None
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise RuntimeError(f"measuring {notes} notes failed with status {status}")
    return json.loads(output), usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("bench-out"))
    parser.add_argument("--build", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        build(args.work / f"substring-{args.build}", args.build)
        return 0
    if args.measure:
        print(json.dumps(measure(args.work / f"substring-{args.measure}", args.runs)))
        return 0
    compile_project()
    args.work.mkdir(parents=True, exist_ok=True)
    print("| notes | query | n-gram index ms | scan ms | ratio | rows |")
    print("|---|---|---|---|---|---|")
    for notes in args.sizes:
        results, peak = one_size(notes, args.runs, args.work)
        for name, row in results.items():
            ratio = row["index"] / row["scan"]
            print(f"| {notes:,} | {name} | {row['index'] * 1000:.1f} | {row['scan'] * 1000:.1f} | {ratio:.2f} | {row['index_rows']} |")
        print(f"| {notes:,} | peak RSS | {peak:.0f} MiB | | | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
