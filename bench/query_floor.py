"""What the parts a read query is built on cost by themselves, against the graph benchmark's targets.

``python bench/query_floor.py [--nodes 1000000] [--runs 5] [--calls 200] [--work DIR]``

Needs the ``bench`` extra and the graph ``bench/graph_bench.py`` builds (built here when missing,
in the same ``--work`` directory). A query that starts at a key, as the benchmark's point lookup
and 1-hop do, must at least open each table's pinned Lance image, look its rows up through the
key indexes, and (to evaluate the match) hand them to DuckDB and run one statement; a fresh
process must at least import Lance, pyarrow's compute functions and DuckDB. Each of these is
measured alone, with nothing of the engine around it, so their sums are floors: no plan built on
these parts answers faster.

In-process parts (one child process; each part is called ``--calls`` times after a warm-up, the
median is reported): ``lance.dataset`` at a fixed version through the engine's shared Lance
session; the ``Person`` row of one name through the BTREE on ``name`` (the point lookup's read);
the ``Knows`` rows of one source through the BTREE on ``src``; the ``Person`` rows of that
source's friends through the BTREE on ``id``; registering a small Arrow table on a DuckDB cursor;
a one-row DuckDB statement, fetched.

Whole processes (``--runs`` rounds, each running every command once in order; medians): the
interpreter alone (``python -c pass``); the third-party imports of a query process (``import
lance, pyarrow.compute, duckdb``); ``import kuzu``; and both systems' first query after open, the
benchmark's own children (``graph_bench.py --child SYSTEM --first``). Each is timed with a wall
clock around ``Popen`` ... ``os.wait4``. The driver imports only the standard library and
``graph_bench`` (which imports no engine module at load).

Output: the parts, then each absolute target beside the sum of the parts it cannot avoid. Not a
test; CI never runs it.
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

from bytecode import compile_project
from graph_bench import START, ensure_built, graph_dir, size_label

IMPORTS = "third-party imports of a query (`import lance, pyarrow.compute, duckdb`)"
PROCESSES = {
    "interpreter (`python -c pass`)": "pass",
    IMPORTS: "import lance, pyarrow.compute, duckdb",
    "`import kuzu`": "import kuzu",
}


def parts(directory: Path, calls: int) -> dict[str, float]:
    """The median seconds of each in-process part on the graph at ``directory`` (run in a child)."""
    import duckdb
    import lance
    import pyarrow as pa

    from omnigraph.engine.manifest.commit_graph import read_point
    from omnigraph.engine.manifest.manifest import Manifest
    from omnigraph.engine.storage.lance_io import open_dataset_at
    from omnigraph.engine.storage.store import open_store

    root = directory / "omnigraph"
    manifest = Manifest.of_graph(open_store(str(root)))
    person_uri = str(next((root / "nodes").glob("Person-*")))
    knows_uri = str(next((root / "edges").glob("Knows-*")))
    person = open_dataset_at(person_uri, None, None, lance.dataset(person_uri).version)
    knows = open_dataset_at(knows_uri, None, None, lance.dataset(knows_uri).version)
    friends = knows.to_table(columns=["dst"], filter=f"src = '{START}'").column("dst").to_pylist()
    listed = ", ".join(f"'{friend}'" for friend in sorted(set(friends)))
    row = pa.table({"id": [START], "age": [42]})
    cursor = duckdb.connect().cursor()
    cursor.register("row", row)
    measured = {
        "stamp": manifest.read_stamp,
        "head": lambda: read_point(manifest, "main", None),
        "database": lambda: duckdb.connect(config={"memory_limit": "1024MiB"}).close(),
        "open": lambda: open_dataset_at(person_uri, None, None, person.version),
        "key": lambda: person.to_table(columns=["id", "age"], filter=f"name = '{START}'"),
        "edges": lambda: knows.to_table(columns=["src", "dst"], filter=f"src = '{START}'"),
        "friends": lambda: person.to_table(columns=["id", "name"], filter=f"id IN ({listed})"),
        "register": lambda: cursor.register("again", row),
        "statement": lambda: cursor.execute("SELECT age FROM row WHERE id = ?", [START]).fetchall(),
    }
    medians = {"friend_count": float(len(set(friends)))}
    for part, call in measured.items():
        for _ in range(10):
            call()
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            call()
            times.append(time.perf_counter() - started)
        medians[part] = statistics.median(times)
    return medians


def wall(args: list[str]) -> float:
    """The wall time of the process ``args``, from before its start to its exit (which must be 0)."""
    started = time.perf_counter()
    child = subprocess.Popen(args)
    _, status, _ = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{args} exited with {os.waitstatus_to_exitcode(status)}")
    return seconds


def processes(directory: Path, runs: int) -> dict[str, float]:
    """The median wall time of each whole process, ``runs`` rounds of every command in order."""
    bench = str(Path(__file__).resolve().parent / "graph_bench.py")
    out = directory / "floor-first.json"
    commands = {label: [sys.executable, "-c", code] for label, code in PROCESSES.items()}
    for system in ("kuzu", "ours"):
        first = ["--child", system, "--first", "--dir", str(directory), "--timeout", "30", "--out", str(out)]
        commands[f"first query after open, {'Kùzu' if system == 'kuzu' else 'ours'} (process)"] = [sys.executable, bench, *first]
    times: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(runs):
        for label, args in commands.items():
            times[label].append(wall(args))
    out.unlink(missing_ok=True)
    return {label: statistics.median(values) for label, values in times.items()}


def shown(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 0.01 else f"{seconds * 1000:.0f} ms"


def report(nodes: int, inside: dict[str, float], whole: dict[str, float]) -> list[str]:
    """The markdown tables: the parts, then each absolute target against the parts it needs."""
    labels = {
        "stamp": "the graph's stamp (the latest `__manifest` main schema)",
        "head": "the branch's head (the latest `__manifest` version; its snapshot cached)",
        "database": "DuckDB: create a database",
        "open": "open a pinned table",
        "key": "a key's row through the BTREE (`name`)",
        "edges": "one source's edges through the BTREE (`src`)",
        "friends": f"its {inside['friend_count']:.0f} friends' rows through the BTREE (`id`)",
        "register": "DuckDB: register an Arrow table",
        "statement": "DuckDB: a one-row statement, fetched",
    }
    lines = [f"Graph {size_label(nodes)} / {size_label(5 * nodes)}.", "", "| part | median |", "|---|---|"]
    lines += [f"| {label} | {shown(inside[part])} |" for part, label in labels.items()]
    lines += [f"| {label} | {shown(seconds)} |" for label, seconds in whole.items()]
    fresh = inside["stamp"] + inside["head"]
    lookups = inside["key"] + inside["edges"] + inside["friends"]
    duck = inside["register"] + inside["statement"]
    kuzu_first = whole["first query after open, Kùzu (process)"]
    floors = [
        ("point lookup", "≤ 1 ms", 0.001, fresh + inside["open"] + inside["key"] + duck, "stamp + head + open + key row + DuckDB"),
        ("point lookup, without DuckDB", "≤ 1 ms", 0.001, fresh + inside["open"] + inside["key"], "stamp + head + open + key row"),
        (
            "1-hop names",
            "≤ 3 ms",
            0.003,
            fresh + 2 * inside["open"] + lookups + duck + 2 * inside["register"],
            "stamp + head + 2 opens + 3 reads + DuckDB (3 tables)",
        ),
        ("1-hop names, without DuckDB", "≤ 3 ms", 0.003, fresh + 2 * inside["open"] + lookups, "stamp + head + 2 opens + 3 reads"),
        (
            "first query after open",
            "≤ 2x Kùzu",
            2 * kuzu_first,
            whole[IMPORTS] + inside["database"],
            "third-party imports + DuckDB database",
        ),
    ]
    lines += ["", "| target | bound | floor | made of | floor within the bound |", "|---|---|---|---|---|"]
    for name, target, bound, floor, made in floors:
        lines.append(f"| {name} | {target} ({shown(bound)}) | {shown(floor)} | {made} | {'yes' if floor <= bound else 'no'} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--work", type=Path, default=Path("bench-out"))
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    directory = graph_dir(args.work, args.nodes, 5)
    if args.child:
        args.child.write_text(json.dumps(parts(directory, args.calls)))
        return 0
    compile_project()
    ensure_built(args.work, args.nodes, 5)
    out = directory / "floor-parts.json"
    wall([sys.executable, __file__, "--nodes", str(args.nodes), "--calls", str(args.calls), "--work", str(args.work), "--child", str(out)])
    inside: dict[str, float] = json.loads(out.read_text())
    out.unlink()
    print("\n".join(report(args.nodes, inside, processes(directory, args.runs))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
