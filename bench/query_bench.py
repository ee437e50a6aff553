"""Read-query benchmark: ``omnigraph.engine.query`` against hand-written DuckDB SQL over the same Lance data.

``python bench/query_bench.py [--sizes 100000 1000000] [--runs 5] [--work DIR]``

For each size N it builds (once, kept in ``DIR/qbench-N``) a format-5 graph of N ``Person``
nodes (``name: String @key, age: I32``) and 5N random ``Knows`` edges through the engine's own
commit path (one overwrite commit), adds a BTREE on ``Person.name`` with Lance and lets a
read-write open adopt it (an index-only table commit), then runs ``omnigraph optimize
--key-indexes`` (the BTREEs on ``id``, ``src`` and ``dst`` that a bulk overwrite drops), then, in
a fresh process per size, runs
each query ``--runs`` times through :func:`omnigraph.engine.query.run_query` and the floor: a hand-written
DuckDB statement over the same pinned Lance datasets, registered once, in the same process.
Reported: the median wall time of each, their ratio, and the process's peak RSS
(``os.wait4`` ``ru_maxrss``) for the whole size, then the peak RSS of a second process that runs
only the engine's queries (the floor's DuckDB has no memory limit, so the first peak is mostly
the floor's). Not a test; CI never runs it.
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

from omnigraph.engine.storage.store import open_store

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCHEMA = "node Person { name: String @key  age: I32 }\nedge Knows: Person -> Person\n"
START = "p-000000042"
QUERIES = """
query point($n: String) { match { $p: Person { name: $n } } return { $p.age } }
query hop1($n: String) { match { $p: Person { name: $n }  $p knows $f } return { $f.name } }
query hop2($n: String) { match { $p: Person { name: $n }  $p knows $f  $f knows $g } return { $g.name } }
query edges() { match { $p: Person  $p knows $f } return { count($f) as n } }
query hop3($n: String) { match { $p: Person { name: $n }  $p knows $f {1,3} } return { count($f) as n } }
query any10($n: String) { match { $p: Person { name: $n }  $p knows{1,4} $f } return { $f.name } limit 10 }
query first10($n: String) { match { $p: Person { name: $n }  $p knows{1,4} $f } return { $f.name } order { $f.name } limit 10 }
"""
_TWO_HOPS = (
    "WITH h1 AS (SELECT DISTINCT dst AS n FROM K WHERE src = $1), h2 AS (SELECT DISTINCT e.dst AS n FROM h1 JOIN K e ON e.src = h1.n)"
)
_FOUR_HOPS = (
    f"{_TWO_HOPS}, h3 AS (SELECT DISTINCT e.dst AS n FROM h2 JOIN K e ON e.src = h2.n), "
    "h4 AS (SELECT DISTINCT e.dst AS n FROM h3 JOIN K e ON e.src = h3.n) "
)
FLOORS = {
    "point": "SELECT age FROM P WHERE name = $1",
    "hop1": "SELECT DISTINCT e.dst, f.name FROM K e JOIN P f ON f.id = e.dst WHERE e.src = $1",
    "hop2": "SELECT DISTINCT e.dst, g.dst, n.name FROM K e JOIN K g ON g.src = e.dst JOIN P n ON n.id = g.dst WHERE e.src = $1",
    "edges": "SELECT count(*) FROM (SELECT DISTINCT src, dst FROM K)",
    "hop3": "WITH h1 AS (SELECT DISTINCT dst AS n FROM K WHERE src = $1), "
    "h2 AS (SELECT DISTINCT e.dst AS n FROM h1 JOIN K e ON e.src = h1.n), "
    "h3 AS (SELECT DISTINCT e.dst AS n FROM h2 JOIN K e ON e.src = h2.n) "
    "SELECT count(*) FROM (SELECT n FROM h1 UNION SELECT n FROM h2 UNION SELECT n FROM h3) WHERE n <> $1",
    "any10": f"{_TWO_HOPS} SELECT n FROM (SELECT n FROM h1 UNION SELECT n FROM h2) WHERE n <> $1 LIMIT 10",
    "first10": _FOUR_HOPS + "SELECT p.name FROM (SELECT n FROM h1 UNION SELECT n FROM h2 UNION SELECT n FROM h3 UNION SELECT n FROM h4) r "
    "JOIN P p ON p.id = r.n WHERE r.n <> $1 ORDER BY p.name LIMIT 10",
}


def build(root: Path, nodes: int, edges_per_node: int = 5) -> None:
    """The benchmark graph at ``root`` (see the module docstring), with ``edges_per_node`` times
    ``nodes`` random ``Knows`` edges (5N here; ``bench/graph_bench.py`` also builds other densities)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from omnigraph.engine.door.table_store import FENCED_PROFILE
    from omnigraph.engine.graph import init_graph, open_graph
    from omnigraph.engine.ops.write import CommitPlan, TableWrite, commit
    from omnigraph.engine.storage.lance_io import open_pinned

    graph = init_graph(open_store(str(root)), SCHEMA, FENCED_PROFILE, actor="bench")
    rng = np.random.default_rng(7)

    def ids(prefix: str, count: int) -> pa.Array:
        digits = pc.utf8_lpad(pc.cast(pa.array(np.arange(count)), pa.utf8()), width=9, padding="0")
        return pc.binary_join_element_wise(pa.scalar(prefix), digits, "-")

    def prepare(snapshot: Any, _previous: Any) -> Any:
        people_ids = ids("p", nodes)
        people = pa.Table.from_arrays(
            [people_ids, people_ids, pa.array(rng.integers(0, 100, nodes), pa.int32())],
            schema=graph.catalog.table("node:Person").arrow_schema(with_pk=True),
        )
        ends = [pc.take(people_ids, pa.array(rng.integers(0, nodes, edges_per_node * nodes))) for _ in range(2)]
        edges = pa.Table.from_arrays(
            [ids("e", edges_per_node * nodes), *ends], schema=graph.catalog.table("edge:Knows").arrow_schema(with_pk=True)
        )
        writes = (TableWrite("node:Person", "overwrite", people), TableWrite("edge:Knows", "overwrite", edges))
        return CommitPlan(writes, (snapshot.head.commit_id,), "query bench", None)

    commit(graph, "main", prepare, actor="bench")
    entry = graph.manifest.snapshot("main").table("node:Person")
    open_pinned(graph.store, entry.image).create_scalar_index("name", "BTREE")
    open_graph(open_store(str(root)), FENCED_PROFILE, write=True)  # adopts the index-only commit
    from omnigraph.maintenance import optimize

    optimize(str(root), key_indexes=True)  # the engine's BTREEs on id, src and dst, as after a user's optimize


def measure(root: Path, runs: int, engine_only: bool = False) -> dict[str, Any]:
    """Median seconds per query, engine and floor (in this process); ``engine_only`` runs only
    the engine's queries (for the engine's own peak RSS: the floor's DuckDB has no memory limit)."""
    import duckdb

    from omnigraph.engine.door.table_store import FENCED_PROFILE
    from omnigraph.engine.graph import open_graph
    from omnigraph.engine.query.run import run_query
    from omnigraph.engine.storage.lance_io import open_pinned

    graph = open_graph(open_store(str(root)), FENCED_PROFILE, write=False)
    snapshot = graph.manifest.snapshot("main")
    floor = duckdb.connect()
    floor.register("P", open_pinned(graph.store, snapshot.table("node:Person").image))
    floor.register("K", open_pinned(graph.store, snapshot.table("edge:Knows").image))
    results: dict[str, Any] = {}
    for name, sql in FLOORS.items():
        params = {} if name == "edges" else {"n": START}
        engine_times, floor_times = [], []
        for _ in range(runs):
            started = time.perf_counter()
            answer = run_query(graph, QUERIES, name=name, params=params)
            engine_times.append(time.perf_counter() - started)
            if engine_only:
                continue
            started = time.perf_counter()
            floor_rows = floor.execute(sql, list(params.values())).fetchall()
            floor_times.append(time.perf_counter() - started)
        if engine_only:
            results[name] = {"engine": statistics.median(engine_times), "rows": len(answer["rows"])}
            continue
        results[name] = {
            "engine": statistics.median(engine_times),
            "floor": statistics.median(floor_times),
            "rows": len(answer["rows"]),
            "floor_rows": len(floor_rows),
        }
    return results


def _child(nodes: int, runs: int, work: Path, *flags: str) -> tuple[dict[str, Any], float]:
    """One measuring child process: its results and its peak RSS in MiB (``os.wait4``)."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--measure", str(nodes), "--runs", str(runs), "--work", str(work), *flags], stdout=subprocess.PIPE
    )
    assert child.stdout is not None
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise RuntimeError(f"measuring {nodes} nodes failed with status {status}")
    return json.loads(output), usage.ru_maxrss / 1024


def one_size(nodes: int, runs: int, work: Path) -> dict[str, Any]:
    """Build if needed, then measure in a child process (engine and floor), and the engine's
    peak RSS alone in another."""
    root = work / f"qbench-{nodes}"
    if not root.exists():
        subprocess.run([sys.executable, __file__, "--build", str(nodes), "--work", str(work)], check=True)
    results, peak = _child(nodes, runs, work)
    _, engine_peak = _child(nodes, 1, work, "--engine-only")
    return {"results": results, "peak_rss_mib": peak, "engine_peak_rss_mib": engine_peak}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("bench-out"))
    parser.add_argument("--build", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--engine-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        build(args.work / f"qbench-{args.build}", args.build)
        return 0
    if args.measure:
        print(json.dumps(measure(args.work / f"qbench-{args.measure}", args.runs, args.engine_only)))
        return 0
    compile_project()
    args.work.mkdir(parents=True, exist_ok=True)
    print("| nodes | query | engine ms | floor ms | ratio | rows |")
    print("|---|---|---|---|---|---|")
    for nodes in args.sizes:
        size = one_size(nodes, args.runs, args.work)
        for name, row in size["results"].items():
            print(
                f"| {nodes:,} | {name} | {row['engine'] * 1000:.1f} | {row['floor'] * 1000:.1f} | "
                f"{row['engine'] / row['floor']:.2f} | {row['rows']} |"
            )
        print(f"| {nodes:,} | peak RSS | {size['peak_rss_mib']:.0f} MiB | | | |")
        print(f"| {nodes:,} | peak RSS, engine only | {size['engine_peak_rss_mib']:.0f} MiB | | | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
