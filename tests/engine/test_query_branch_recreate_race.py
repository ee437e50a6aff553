"""Read queries never answer from a mix of two states of a branch that is deleted and created again while they run.

A branch deleted and created again under the same name numbers its ``__manifest`` and table
versions again from its fork point, so ``(branch, version)`` names different rows in each
incarnation. Every process-wide cache of the read path must still answer from one state:
the folded ``__manifest`` snapshots (:class:`omnigraph.engine.manifest.manifest.SnapshotCache`),
the adjacencies of edge images and id indexes of node images
(:class:`omnigraph.engine.query.adjacency.AdjacencyCache`), the
shared Lance session and branch anchors (:mod:`omnigraph.engine.storage.lance_io`), and the
probes that read rows by key (:mod:`omnigraph.engine.query.probe`).

Two real processes race for a few seconds. The writer loops: delete branch ``b``, create it
from main, overwrite its people and edges with state A (a chain) or B (a reversed chain with two
more edges from ``p0``), alternately, and reports the commit each load published. The reader,
one read-only ``Graph`` whose caches live as long as it does, runs point lookups, one- and
two-hop matches from key constants (answered directly, :mod:`omnigraph.engine.query.direct`,
through the node images' id indexes), a one-hop match with a negation (probed), a
variable-length traversal (served by the adjacency cache) and an edge count on ``b`` from
several threads, and records every outcome; one
thread is a slow reader that pauses up to :data:`PAUSE_SECONDS` between reading the branch's
snapshot and reading its tables, the window in which the branch can be replaced.

Every answer must be exactly the answer of the state its commit names: main's head (``b`` just
created, not loaded yet), or a load of A or of B. The only errors allowed are ``not_found`` (``b``
is gone) and ``read_set_conflict`` (``b`` was created again while the query read it: retry);
anything else (a Lance or Arrow exception) is a failure. The people's ages differ in every state
and every answer carries an age or a sum of ages, so an answer that joined rows of two states
matches none of them, and an answer whose rows are one state's under another state's commit is
caught by the commit. The reader also reports how many probes, direct answers and cache builds
ran, so the test fails if the race did not exercise them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import omnigraph
from tests.support.graph_helpers import SCHEMA_PATH
from tests.support.process_race import release_together, spawn

PEOPLE = 10
RACE_SECONDS = 4.0
HOLD_SECONDS = 0.05
PAUSE_SECONDS = 0.2
READER_THREADS = 4


def _people(age_base: int) -> list[dict[str, Any]]:
    return [{"type": "Person", "data": {"name": f"p{i}", "age": age_base + i}} for i in range(PEOPLE)]


def _edges(prefix: str, pairs: list[tuple[int, int]]) -> list[dict[str, Any]]:
    return [{"edge": "Knows", "from": f"p{a}", "to": f"p{b}", "data": {"id": f"{prefix}{a}-{b}"}} for a, b in pairs]


MAIN = _people(0) + _edges("m", [(i, (i + 5) % PEOPLE) for i in range(PEOPLE)])
"""Main (and ``b`` just created): ages 0..9, each person knows the one five places on."""
STATES = {
    "A": _people(100) + _edges("a", [(i, i + 1) for i in range(PEOPLE - 1)]),
    "B": _people(200) + _edges("b", [(i + 1, i) for i in range(PEOPLE - 1)] + [(0, 9), (0, 8)]),
}
"""What the writer loads into ``b`` (overwrite: both tables replaced): A a chain, B a reversed chain and two edges from p0."""


def _query(match: str, returned: str, order: str) -> str:
    return f"query q() {{ match {{ {match} }} return {{ {returned} }}{f' order {{ {order} }}' if order else ''} }}"


QUERIES = {
    "point": _query('$p: Person { name: "p3" }', "$p.age", ""),
    "one hop": _query('$p: Person { name: "p0" }  $p knows $f', "$f.name, $f.age", "$f.name"),
    "one hop back": _query('$f: Person { name: "p5" }  $p knows $f', "$p.name, $p.age", "$p.name"),
    "two hops": _query('$p: Person { name: "p2" }  $p knows $f  $f knows $g', "$f.age, $g.name, $g.age", "$g.name"),
    "one hop, not back": _query('$p: Person { name: "p1" }  $p knows $f  not { $f knows $p }', "$f.name, $f.age", "$f.name"),
    "up to three hops": _query('$p: Person { name: "p0" }  $p knows{1,3} $f', "count($f) as n, sum($f.age) as ages", ""),
    "edges": _query("$a knows $b", "count($b) as n, sum($a.age) as ages", ""),
}

WRITER = r"""
import json, sys, time
import omnigraph
root, seconds, hold, states = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
graph = omnigraph.open(root)
print("ready", flush=True)
start = float(sys.stdin.readline())
while time.time() < start:
    time.sleep(0.001)
loaded, cycle = [], 0
while time.time() < start + seconds:
    state = sorted(states)[cycle % len(states)]
    cycle += 1
    graph.delete_branch("b")
    graph.create_branch("b")
    loaded += [[commit, state] for commit in graph.load(states[state], mode="overwrite", branch="b").commits]
    time.sleep(hold)
print(json.dumps({"loaded": loaded}))
"""
"""Loops delete, create, load A or B (alternately) on ``b`` for ``seconds``; prints the commit each load published, with its state."""

READER = r"""
import collections, json, random, sys, threading, time, traceback
import omnigraph
from omnigraph.adjacency import adjacency_stats
from omnigraph.engine.query import run
root, seconds, threads, pause, queries = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
graph = omnigraph.open(root, read_only=True)
lock = threading.Lock()
probes = collections.Counter()
slow = threading.local()
real_probe, real_read_point, real_direct_rows = run.probe, run.read_point, run.direct_rows

def counting_probe(*args, **kwargs):
    found = real_probe(*args, **kwargs)
    with lock:
        probes["nodes"] += bool(found.nodes)
        probes["edges"] += bool(found.edges)
    return found

def counting_direct_rows(*args, **kwargs):
    found = real_direct_rows(*args, **kwargs)
    with lock:
        probes["direct"] += found is not None
    return found

def pausing_read_point(*args, **kwargs):
    point = real_read_point(*args, **kwargs)
    if getattr(slow, "pause", False):
        time.sleep(random.random() * pause)
    return point

run.probe, run.read_point, run.direct_rows = counting_probe, pausing_read_point, counting_direct_rows
seen = collections.Counter()
print("ready", flush=True)
start = float(sys.stdin.readline())
while time.time() < start:
    time.sleep(0.001)

def read(turn):
    slow.pause = turn == 0
    names = sorted(queries)
    while time.time() < start + seconds:
        name = names[turn % len(names)]
        turn += 1
        try:
            result = graph.query(queries[name], branch="b")
            outcome = {"commit": result.commit, "rows": [dict(row) for row in result.rows]}
        except omnigraph.errors.OmnigraphError as error:
            outcome = {"error": error.code}
        except Exception as error:
            where = [f"{frame.filename.rsplit('/omnigraph/', 1)[-1]}:{frame.lineno}" for frame in traceback.extract_tb(error.__traceback__)]
            outcome = {"crash": type(error).__name__, "message": str(error)[:200], "where": where[-4:]}
        with lock:
            seen[json.dumps([name, outcome], sort_keys=True)] += 1

workers = [threading.Thread(target=read, args=(n,)) for n in range(threads)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
stats = adjacency_stats()
print(json.dumps({"seen": sorted(seen.items()), "probes": dict(probes), "builds": stats.builds, "hits": stats.hits}))
"""
"""One read-only ``Graph``, ``threads`` threads querying ``b`` for ``seconds``; the first thread pauses up to ``pause``
seconds between reading the branch's snapshot and reading its tables (a slow reader). Prints each distinct outcome with its
count, the probes that ran (with node rows, with edge rows read by key), the direct answers and the image cache's builds and hits."""


def _race(*scripts: list[str]) -> list[Any]:
    """Start each ``[script, *args]`` as ``python -c``, release them at one instant; each one's JSON document."""
    outcomes = release_together([spawn([sys.executable, "-c", *script]) for script in scripts], timeout=120)
    for outcome in outcomes:
        assert outcome.returncode == 0, outcome.stderr
    return [outcome.json() for outcome in outcomes]


def _answers(graph: omnigraph.Graph, branch: str) -> dict[str, list[dict[str, Any]]]:
    return {name: [dict(row) for row in graph.query(source, branch=branch).rows] for name, source in QUERIES.items()}


def test_answers_come_from_one_state_while_the_branch_is_deleted_and_created_again(tmp_path: Path) -> None:
    root = str(tmp_path / "graph")
    with omnigraph.init(root, SCHEMA_PATH) as graph:
        graph.load(MAIN, mode="append")
        expected = {"main": _answers(graph, "main")}
        for state, records in STATES.items():
            graph.create_branch(f"ref-{state}")
            graph.load(records, mode="overwrite", branch=f"ref-{state}")
            expected[state] = _answers(graph, f"ref-{state}")
        graph.create_branch("b")
        main_head = graph.commits("main")[0].commit_id
    assert [expected[state]["point"] for state in ("main", "A", "B")] == [[{"p.age": 3}], [{"p.age": 103}], [{"p.age": 203}]]
    assert expected["A"]["one hop"] == [{"f.name": "p1", "f.age": 101}]
    assert expected["B"]["edges"] == [{"n": 11, "ages": sum(200 + a for a in [*range(1, PEOPLE), 0, 0])}]
    for name in QUERIES:
        answers = [json.dumps(expected[state][name]) for state in expected]
        assert len(set(answers)) == len(answers), (name, answers)  # no answer is right in two states

    written, read = _race(
        [WRITER, root, str(RACE_SECONDS), str(HOLD_SECONDS), json.dumps(STATES)],
        [READER, root, str(RACE_SECONDS), str(READER_THREADS), str(PAUSE_SECONDS), json.dumps(QUERIES)],
    )

    state_of = {main_head: "main", **dict(written["loaded"])}
    tally: dict[str, int] = {}
    wrong = []
    for entry, count in read["seen"]:
        name, outcome = json.loads(entry)
        if "rows" in outcome:
            state = state_of.get(outcome["commit"], "unknown")
            kind = state if outcome["rows"] == expected.get(state, {}).get(name) else "wrong"
            of = [other for other in sorted(expected) if expected[other][name] == outcome["rows"]]
            outcome = {"commit of": state, "rows of": of or "no state", **outcome}
        else:
            kind = outcome.get("error", "crash")
        if kind not in ("main", "A", "B", "not_found", "read_set_conflict"):
            wrong.append({"query": name, "times": count, **outcome})
        tally[kind] = tally.get(kind, 0) + count
    assert wrong == [], "\n".join(json.dumps(one, sort_keys=True) for one in wrong) + f"\n{tally}"
    assert tally.get("A", 0) and tally.get("B", 0) and tally.get("not_found", 0), tally
    assert len(written["loaded"]) >= 4, written
    assert all(read["probes"].get(kind, 0) for kind in ("nodes", "edges", "direct")), read["probes"]
    assert read["builds"] >= 2, read  # the traversal's adjacency was built for more than one image of b
