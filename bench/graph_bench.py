"""Graph benchmark: the engine's read queries side by side with Kùzu on the same generated graph.

``python bench/graph_bench.py [--sizes 100000 1000000] [--runs 5] [--work DIR] [--timeout 30] [--json]``

Needs the ``bench`` extra (``kuzu``, pinned in ``pyproject.toml``; see ``bench/README.md``). Kùzu is
never a runtime dependency: only this script imports it.

The graphs. For each size N, the generator of ``bench/query_bench.py`` (:func:`query_bench.build`:
N ``Person`` nodes ``name: String @key, age: I32``, 5N random ``Knows`` edges, self-loops and
parallel edges included, a BTREE on ``Person.name``) builds the graph once under
``DIR/graph-N-5/omnigraph``; its pinned Lance tables are then written to Parquet and copied into a
Kùzu database (``CREATE NODE TABLE Person(name STRING PRIMARY KEY, age INT32)``, ``CREATE REL
TABLE Knows(FROM Person TO Person)``, ``COPY ... FROM`` the Parquet files) beside it. Both are
reused by later runs (a marker file, written last, says a side is complete; the Kùzu database is
per Kùzu version). A third graph of 50K nodes and 4 edges per node (``--compare-nodes``,
``--compare-edges-per-node``) holds the variable-comparison query, and two small graphs (20 nodes
with 5 edges each, 100 nodes with 2: several self-loops, parallel edges and cycles) check the
semantics: every query runs there from every node, on both systems, before anything is timed.

Equal answers. Each Cypher query is written to answer exactly what the ``.gq`` query answers (see
``QUERIES``): a match row is a distinct binding of the match's variables, so parallel edges count
once (``WITH DISTINCT`` in Cypher), and a ``{1,3}`` traversal reports the nodes whose shortest
distance from the start is 1 to 3, plus the start itself only when it has a self-loop (never
through a longer cycle). The answers of every query, on every graph, are compared (rows sorted,
except the ordered top-10, whose order is compared too); any difference stops the run with exit
status 2 and both answers on stderr.

What is timed, in one process tree. Each system runs in child processes of its own, never both in
one process. Warm queries: one child per system and size opens the graph once (ours:
``omnigraph.open(root, read_only=True)`` and ``Graph.query``, the public in-process API; Kùzu: a
read-only ``kuzu.Database`` and one ``kuzu.Connection``, ``Connection.execute`` with parameters),
runs each query once unmeasured (its answer is the one compared), then ``--runs`` times; reported
is the median wall time of a call that returns the answer as Python rows. The peak RSS of that
child (``os.wait4`` ``ru_maxrss``) is each side's peak. First query after open: ``--runs`` fresh
child processes per system, each importing its system, opening the graph and answering the point
lookup; reported is the median wall time of the whole process, from before its start to its exit.
Every query has a time limit of ``--timeout`` seconds (ours: ``OMNIGRAPH_QUERY_TIMEOUT_S``; Kùzu:
``Connection.set_query_timeout``): a query that reaches it is reported as ``>T s`` and its
remaining runs are skipped. Both systems use their default thread counts and memory settings.

Output: a markdown table, ``query | Kùzu | ours | ratio (ours / Kùzu) | target | met``, one block
per size and one for the comparison graph, against the issue's targets (``TARGETS``); with
``--json``, one JSON document instead. Exit status 0 when every target is met, 1 when one is not,
2 when the answers differ. Not a test; CI never runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
START = "p-000000042"  # the start person of bench/query_bench.py
CHECK_GRAPHS = ((20, 5), (100, 2))


@dataclass(frozen=True)
class Query:
    """One query in both languages: ``gq`` (a ``.gq`` source declaring the query ``name``) and ``cypher``."""

    name: str
    label: str
    gq: str
    cypher: str
    start: bool  # takes the start person as ``$n``
    ordered: bool = False  # the row order is part of the answer


QUERIES = {
    query.name: query
    for query in (
        Query(
            "point",
            "point lookup by key",
            "query point($n: String) { match { $p: Person { name: $n } } return { $p.age } }",
            "MATCH (p:Person {name: $n}) RETURN p.age",
            True,
        ),
        Query(
            "hop1",
            "1-hop names",
            "query hop1($n: String) { match { $p: Person { name: $n }  $p knows $f } return { $f.name } }",
            "MATCH (p:Person {name: $n})-[:Knows]->(f:Person) WITH DISTINCT f RETURN f.name",
            True,
        ),
        Query(
            "hop2",
            "2-hop distinct",
            "query hop2($n: String) { match { $p: Person { name: $n }  $p knows $f  $f knows $g } return { $g.name } }",
            "MATCH (p:Person {name: $n})-[:Knows]->(f:Person)-[:Knows]->(g:Person) WITH DISTINCT f, g RETURN g.name",
            True,
        ),
        Query(
            "edges",
            "edge count",
            "query edges() { match { $p: Person  $p knows $f } return { count($f) as n } }",
            "MATCH (p:Person)-[:Knows]->(f:Person) WITH DISTINCT p, f RETURN count(*)",
            False,
        ),
        Query(
            "hop13",
            "1..3 hops counted",
            "query hop13($n: String) { match { $p: Person { name: $n }  $p knows{1,3} $f } return { count($f) as n } }",
            # Every node a walk of 1 to 3 edges reaches is at shortest distance 1..3; the start
            # itself counts only through a self-loop.
            "MATCH (p:Person {name: $n})-[:Knows*1..3]->(f:Person) WITH DISTINCT p, f "
            "WHERE f <> p OR EXISTS { MATCH (p)-[:Knows]->(p) } RETURN count(f)",
            True,
        ),
        Query(
            "top10",
            "top-10 by out-degree",
            "query top10() { match { $p: Person  $p knows $f } return { $p.name, count($f) as d } order { d desc } limit 10 }",
            # Ours breaks ties by the group key, the name. Distinct (p, id(f)) pairs: Kùzu's fastest
            # form of the distinct pairs measured here (distinct nodes or count(DISTINCT) were slower).
            "MATCH (p:Person)-[:Knows]->(f:Person) WITH DISTINCT p, id(f) AS f "
            "RETURN p.name, count(*) AS d ORDER BY d DESC, p.name LIMIT 10",
            False,
            ordered=True,
        ),
        Query(
            "pairs",
            "count, no comparison",
            "query pairs() { match { $p: Person  $p knows $f } return { count($p) as n } }",
            "MATCH (p:Person)-[:Knows]->(f:Person) WITH DISTINCT p, f RETURN count(*)",
            False,
        ),
        Query(
            "older",
            "count, `$p.age > $f.age`",
            "query older() { match { $p: Person  $p knows $f  $p.age > $f.age } return { count($p) as n } }",
            "MATCH (p:Person)-[:Knows]->(f:Person) WHERE p.age > f.age WITH DISTINCT p, f RETURN count(*)",
            False,
        ),
    )
}
IDLE_SECONDS = 1.5
"""After the main suite, each child idles this long and reports what stays resident (what a
long-lived process holds between queries)."""
MAIN = ("point", "hop1", "hop2", "edges", "hop13", "top10")
COMPARE = ("pairs", "older")
SUITES = {"main": MAIN, "compare": COMPARE, "check": MAIN + COMPARE}

# The targets: an absolute time for ours ("ms"), or at most that many times Kùzu ("x").
TARGETS: dict[str, tuple[str, float]] = {
    "point": ("ms", 1),
    "hop1": ("ms", 3),
    "hop2": ("ms", 20),
    "edges": ("x", 2),
    "hop13": ("ms", 50),
    "top10": ("x", 2),
    "first": ("x", 2),
    "rss": ("x", 2),
}


# ---- building ---------------------------------------------------------------------------------


def kuzu_version() -> str:
    from importlib.metadata import version

    return version("kuzu")


def graph_dir(work: Path, nodes: int, edges_per_node: int) -> Path:
    return work / f"graph-{nodes}-{edges_per_node}"


def kuzu_path(directory: Path) -> Path:
    return directory / f"kuzu-{kuzu_version()}.kuzu"


def build(directory: Path, nodes: int, edges_per_node: int) -> None:
    """Both sides of one graph under ``directory``, each skipped when its marker says it is complete."""
    sys.path.insert(0, str(BENCH_DIR))
    from query_bench import build as build_omnigraph

    ours = directory / "omnigraph"
    if not (directory / "omnigraph.built").exists():
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        build_omnigraph(ours, nodes, edges_per_node)
        (directory / "omnigraph.built").touch()
    database = kuzu_path(directory)
    marker = database.with_suffix(".built")
    if marker.exists():
        return
    for stale in directory.glob(f"{database.name}*"):
        stale.unlink()
    build_kuzu(ours, database, directory)
    marker.touch()


def build_kuzu(ours: Path, database: Path, scratch: Path) -> None:
    """A Kùzu database at ``database`` holding the rows of the graph at ``ours``, through Parquet files."""
    import kuzu
    import pyarrow.parquet as pq

    from omnigraph.engine.door.table_store import FENCED_PROFILE
    from omnigraph.engine.graph import open_graph
    from omnigraph.engine.storage.lance_io import open_pinned
    from omnigraph.engine.storage.store import open_store

    graph = open_graph(open_store(str(ours)), FENCED_PROFILE, write=False)
    snapshot = graph.manifest.snapshot("main")
    files = {"Person": scratch / "person.parquet", "Knows": scratch / "knows.parquet"}
    pq.write_table(open_pinned(graph.store, snapshot.table("node:Person").image).to_table(columns=["name", "age"]), files["Person"])
    pq.write_table(open_pinned(graph.store, snapshot.table("edge:Knows").image).to_table(columns=["src", "dst"]), files["Knows"])
    db = kuzu.Database(str(database))
    connection = kuzu.Connection(db)
    connection.execute("CREATE NODE TABLE Person(name STRING PRIMARY KEY, age INT32)")
    connection.execute("CREATE REL TABLE Knows(FROM Person TO Person)")
    for table, path in files.items():
        connection.execute(f"COPY {table} FROM '{path}'")
        path.unlink()
    connection.close()
    db.close()


# ---- measuring children -----------------------------------------------------------------------


class TimedOut(Exception):
    """A query reached its time limit."""


Runner = Callable[[Query, dict[str, Any]], list[list[Any]]]


def open_system(system: str, directory: Path, timeout: float) -> Runner:
    """A function that answers a query on the open graph of ``system`` as Python rows."""
    if system == "ours":
        import omnigraph
        from omnigraph.errors import QueryTimeout

        graph = omnigraph.open(directory / "omnigraph", read_only=True)

        def ours(query: Query, params: dict[str, Any]) -> list[list[Any]]:
            try:
                result = graph.query(query.gq, name=query.name, params=params)
            except QueryTimeout as error:
                raise TimedOut from error
            return [[row[column] for column in result.columns] for row in result.rows]

        return ours
    import kuzu

    connection = kuzu.Connection(kuzu.Database(str(kuzu_path(directory)), read_only=True))
    connection.set_query_timeout(int(timeout * 1000))

    def theirs(query: Query, params: dict[str, Any]) -> list[list[Any]]:
        try:
            result = connection.execute(query.cypher, params)
        except RuntimeError as error:
            if "Interrupted" in str(error):
                raise TimedOut from error
            raise
        assert isinstance(result, kuzu.QueryResult)
        return [list(row) for row in result.get_all()]

    return theirs


def measure(system: str, directory: Path, suite: str, runs: int, timeout: float, out: Path) -> None:
    """Run ``suite`` on one system, one JSON line per (query, params) to ``out`` as each finishes."""
    run = open_system(system, directory, timeout)
    if suite == "check":
        nodes = int(directory.name.split("-")[1])
        starts = [f"p-{index:09d}" for index in range(nodes)]
    else:
        starts = [START]
    with out.open("w") as sink:
        for name in SUITES[suite]:
            query = QUERIES[name]
            for params in [{"n": start} for start in starts] if query.start else [{}]:
                line: dict[str, Any] = {"query": name, "params": params, "answer": None, "seconds": None}
                try:
                    rows = run(query, params)
                    line["answer"] = rows if query.ordered else sorted(rows)
                    times = []
                    for _ in range(runs):
                        started = time.perf_counter()
                        run(query, params)
                        times.append(time.perf_counter() - started)
                    line["seconds"] = statistics.median(times) if times else None
                except TimedOut:
                    line["timed_out"] = True
                sink.write(json.dumps(line) + "\n")
                sink.flush()
        time.sleep(IDLE_SECONDS)
        sink.write(json.dumps({"query": "idle", "params": {}, "answer": None, "seconds": None, "resident_mib": resident_mib()}) + "\n")


def resident_mib() -> float:
    """This process's resident memory now (Linux ``/proc``), in MiB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def first_query(system: str, directory: Path, timeout: float, out: Path) -> None:
    """Open the graph of ``system`` and answer the point lookup: the whole process is what is timed."""
    run = open_system(system, directory, timeout)
    out.write_text(json.dumps(run(QUERIES["point"], {"n": START})))


# ---- the parent -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Child:
    """A finished child process: its wall time from before its start, and its peak RSS."""

    seconds: float
    peak_mib: float


def spawn(args: list[str], deadline: float, timeout: float) -> Child:
    """Run this script with ``args`` in a child process; kill it past ``deadline`` seconds."""
    env = {**os.environ, "OMNIGRAPH_QUERY_TIMEOUT_S": str(timeout)}
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, __file__, *args], env=env)
    killer = threading.Timer(deadline, child.kill)
    killer.start()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    killer.cancel()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"graph_bench child {args} exited with {child.returncode} after {seconds:.1f} s")
    return Child(seconds, usage.ru_maxrss / 1024)


def ensure_built(work: Path, nodes: int, edges_per_node: int) -> Path:
    directory = graph_dir(work, nodes, edges_per_node)
    if not (directory / "omnigraph.built").exists() or not kuzu_path(directory).with_suffix(".built").exists():
        subprocess.run([sys.executable, __file__, "--build", str(nodes), str(edges_per_node), "--work", str(work)], check=True)
    return directory


def run_suite(directory: Path, suite: str, runs: int, timeout: float) -> dict[str, tuple[list[dict[str, Any]], Child]]:
    """Each system's result lines for ``suite`` on the graph at ``directory``, and its child process."""
    measured = {}
    for system in ("kuzu", "ours"):
        out = directory / f"{suite}-{system}.jsonl"
        starts = int(directory.name.split("-")[1]) if suite == "check" else 1
        calls = (runs + 1) * sum(starts if QUERIES[name].start else 1 for name in SUITES[suite])
        args = ["--child", system, "--suite", suite, "--dir", str(directory), "--runs", str(runs), "--timeout", str(timeout)]
        child = spawn([*args, "--out", str(out)], calls * timeout + 120, timeout)
        measured[system] = ([json.loads(line) for line in out.read_text().splitlines()], child)
        out.unlink()
    compare_answers(directory, measured["kuzu"][0], measured["ours"][0])
    return measured


def compare_answers(directory: Path, kuzu: list[dict[str, Any]], ours: list[dict[str, Any]]) -> None:
    """Stop with exit status 2 when the two systems answered anything differently."""
    if len(kuzu) != len(ours):
        print(f"ANSWERS DIFFER on {directory.name}: Kùzu answered {len(kuzu)} queries, ours {len(ours)}", file=sys.stderr)
        raise SystemExit(2)
    for theirs, mine in zip(kuzu, ours, strict=True):
        if theirs["answer"] is None or mine["answer"] is None:
            continue  # a side that timed out has no answer to compare
        if theirs["answer"] != mine["answer"]:
            print(
                f"ANSWERS DIFFER on {directory.name}, query {mine['query']} {mine['params']}:\n"
                f"  Kùzu: {theirs['answer'][:50]}\n  ours: {mine['answer'][:50]}",
                file=sys.stderr,
            )
            raise SystemExit(2)


def first_queries(directory: Path, runs: int, timeout: float) -> dict[str, float]:
    """The median whole-process time of open + point lookup, per system (answers compared)."""
    medians = {}
    answers: dict[str, list[dict[str, Any]]] = {}
    for system in ("kuzu", "ours"):
        out = directory / f"first-{system}.json"
        times = []
        for _ in range(runs):
            args = ["--child", system, "--first", "--dir", str(directory), "--timeout", str(timeout), "--out", str(out)]
            times.append(spawn(args, timeout + 120, timeout).seconds)
            answers[system] = [{"query": "point", "params": START, "answer": json.loads(out.read_text())}]
            out.unlink()
        medians[system] = statistics.median(times)
    compare_answers(directory, answers["kuzu"], answers["ours"])
    return medians


def size_label(nodes: int) -> str:
    if nodes % 1_000_000 == 0:
        return f"{nodes // 1_000_000}M"
    if nodes % 1_000 == 0:
        return f"{nodes // 1_000}K"
    return str(nodes)


def verdict(key: str, kuzu: float | None, ours: float | None) -> tuple[str, bool]:
    """The target of row ``key`` as text, and whether ours meets it (``None``: that side reached the time limit)."""
    unit, bound = TARGETS[key]
    if unit == "ms":
        return f"≤ {bound:g} ms", ours is not None and ours <= bound / 1000
    return f"≤ {bound:g}x Kùzu", ours is not None and (kuzu is None or ours <= bound * kuzu)


@dataclass
class Table:
    """The rows of the markdown table (times in seconds, memory in MiB), and whether each target was met."""

    timeout: float
    rows: list[dict[str, Any]]

    def add(self, graph: str, label: str, kuzu: float | None, ours: float | None, target: str = "", met: bool | None = None) -> None:
        self.rows.append({"graph": graph, "query": label, "kuzu": kuzu, "ours": ours, "target": target, "met": met})

    def show(self, row: dict[str, Any], side: str) -> str:
        value = row[side]
        if row["query"].startswith(("peak RSS", "resident")):
            return f"{value:.0f} MiB"
        if value is None:
            return f">{self.timeout:g} s"
        if value >= 1:
            return f"{value:.2f} s"
        return f"{value * 1000:.2f} ms" if value < 0.01 else f"{value * 1000:.1f} ms"

    def markdown(self) -> Iterator[str]:
        yield "| graph | query | Kùzu | ours | ratio | target | met |"
        yield "|---|---|---|---|---|---|---|"
        for row in self.rows:
            kuzu, ours = row["kuzu"], row["ours"]
            ratio = f"{ours / kuzu:.2f}" if ours is not None and kuzu else "n/a"
            met = "" if row["met"] is None else ("met" if row["met"] else "not met")
            cells = (row["graph"], row["query"], self.show(row, "kuzu"), self.show(row, "ours"), ratio, row["target"], met)
            yield "| " + " | ".join(cells) + " |"


def main_size(table: Table, work: Path, nodes: int, runs: int, timeout: float) -> dict[str, Any]:
    """Queries 1 to 6, the first query after open and the peak RSS on the graph of ``nodes`` nodes and 5 edges each."""
    directory = ensure_built(work, nodes, 5)
    measured = run_suite(directory, "main", runs, timeout)
    graph = f"{size_label(nodes)} / {size_label(5 * nodes)}"
    lines = {system: {line["query"]: line for line in measured[system][0]} for system in measured}
    for name in MAIN:
        kuzu, ours = lines["kuzu"][name]["seconds"], lines["ours"][name]["seconds"]
        table.add(graph, QUERIES[name].label, kuzu, ours, *verdict(name, kuzu, ours))
    first = first_queries(directory, runs, timeout)
    table.add(graph, "first query after open (process)", first["kuzu"], first["ours"], *verdict("first", first["kuzu"], first["ours"]))
    peaks = {system: measured[system][1].peak_mib for system in measured}
    table.add(graph, "peak RSS (query process)", peaks["kuzu"], peaks["ours"], *verdict("rss", peaks["kuzu"], peaks["ours"]))
    idle = {system: lines[system]["idle"]["resident_mib"] for system in lines}
    table.add(graph, f"resident after the suite, {IDLE_SECONDS:g} s idle", idle["kuzu"], idle["ours"])
    return {"queries": lines, "first_query_s": first, "peak_rss_mib": peaks, "idle_resident_mib": idle}


def compare_size(table: Table, work: Path, nodes: int, edges_per_node: int, runs: int, timeout: float) -> dict[str, Any]:
    """The variable-comparison count and the same match without it; the target is ours' ratio of the two."""
    directory = ensure_built(work, nodes, edges_per_node)
    measured = run_suite(directory, "compare", runs, timeout)
    graph = f"{size_label(nodes)} / {size_label(edges_per_node * nodes)}"
    lines = {system: {line["query"]: line for line in measured[system][0]} for system in measured}
    plain = {system: lines[system]["pairs"]["seconds"] for system in lines}
    compared = {system: lines[system]["older"]["seconds"] for system in lines}
    table.add(graph, QUERIES["pairs"].label, plain["kuzu"], plain["ours"])
    within = {system: compared[system] / plain[system] if compared[system] is not None and plain[system] else None for system in lines}
    shown = " / ".join(f"{system} {'n/a' if within[system] is None else f'{within[system]:.2f}x'}" for system in ("kuzu", "ours"))
    met = within["ours"] is not None and within["ours"] <= 2
    table.add(graph, QUERIES["older"].label, compared["kuzu"], compared["ours"], f"≤ 2x without it ({shown})", met)
    return {"queries": lines, "comparison_over_plain": within}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("bench-out"))
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds one query may run (default 30)")
    parser.add_argument("--compare-nodes", type=int, default=50_000)
    parser.add_argument("--compare-edges-per-node", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    parser.add_argument("--build", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=("ours", "kuzu"), help=argparse.SUPPRESS)
    parser.add_argument("--suite", choices=tuple(SUITES), help=argparse.SUPPRESS)
    parser.add_argument("--first", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        build(graph_dir(args.work, *args.build), *args.build)
        return 0
    if args.child and args.first:
        first_query(args.child, args.dir, args.timeout, args.out)
        return 0
    if args.child:
        measure(args.child, args.dir, args.suite, args.runs, args.timeout, args.out)
        return 0
    from bytecode import compile_project  # here, not at the top: the measured children never import it

    compile_project()  # else every child compiles the project's modules again, and the first query measures that
    args.work.mkdir(parents=True, exist_ok=True)
    for nodes, edges_per_node in CHECK_GRAPHS:
        run_suite(ensure_built(args.work, nodes, edges_per_node), "check", 0, args.timeout)
    table = Table(args.timeout, [])
    load = os.getloadavg()[0]
    document: dict[str, Any] = {"kuzu_version": kuzu_version(), "runs": args.runs, "timeout_s": args.timeout, "sizes": {}}
    for nodes in args.sizes:
        document["sizes"][str(nodes)] = main_size(table, args.work, nodes, args.runs, args.timeout)
    document["comparison"] = compare_size(table, args.work, args.compare_nodes, args.compare_edges_per_node, args.runs, args.timeout)
    document["table"] = table.rows
    document["load_average"] = {"start": load, "end": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(document, indent=2, default=str))
    else:
        loads = document["load_average"]
        print(
            f"Kùzu {document['kuzu_version']}, median of {args.runs} runs, time limit {args.timeout:g} s per query, "
            f"1-minute load average {loads['start']:.1f} at the start and {loads['end']:.1f} at the end\n"
        )
        print("\n".join(table.markdown()))
    return 0 if all(row["met"] is not False for row in table.rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
