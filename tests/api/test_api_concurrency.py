"""One id strict-inserted at the same moment through the Python API: by 8 threads sharing one
``Graph`` (writes serialised by its lock, reads running beside them) and by 8 processes each with
a ``Graph`` of its own (fenced by Lance). Exactly one insert wins, the other 7 raise
``omnigraph.KeyConflict`` with the id in their details, and the branch holds one row of that id.
Both backends."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import omnigraph
from tests.conftest import new_root
from tests.support.graph_helpers import DATA_PATH, SCHEMA_PATH
from tests.support.process_race import release_together, spawn

WRITERS = 8
PERSON = {"type": "Person", "data": {"name": "Mallory", "age": 33}}

PROCESS_WRITER = r"""
import json, sys, time
import omnigraph
graph = omnigraph.open(sys.argv[1])
record = json.loads(sys.argv[2])
print("ready", flush=True)
start = float(sys.stdin.readline())
while time.time() < start:
    time.sleep(0.001)
try:
    result = graph.load([record], mode="append")
    print(json.dumps({"won": result.commits}))
except omnigraph.KeyConflict as conflict:
    print(json.dumps({"conflict": conflict.details}))
"""


def _example(backend: str, tmp_path: Path) -> omnigraph.Graph:
    graph = omnigraph.init(new_root(backend, tmp_path), SCHEMA_PATH)
    graph.load(DATA_PATH, mode="append")
    return graph


def _rows_of(graph: omnigraph.Graph, entity_id: str) -> int:
    return sum(1 for record in graph.export(types=["Person"]) if record["data"]["id"] == entity_id)


def test_eight_threads_on_one_graph(backend: str, tmp_path: Path) -> None:
    graph = _example(backend, tmp_path)
    people_before = next(t.rows for t in graph.snapshot().tables if t.table_key == "node:Person")
    start = threading.Barrier(WRITERS * 2)
    outcomes: list[Any] = []
    seen: list[int] = []
    failures: list[BaseException] = []

    def write() -> None:
        start.wait()
        try:
            outcomes.append(graph.load([PERSON], mode="append"))
        except omnigraph.KeyConflict as conflict:
            outcomes.append(conflict)

    def read() -> None:
        start.wait()
        try:
            seen.append(sum(1 for record in graph.export(types=["Person"])))
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=write) for _ in range(WRITERS)] + [threading.Thread(target=read) for _ in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert failures == []
    winners = [o for o in outcomes if isinstance(o, omnigraph.LoadResult)]
    conflicts = [o for o in outcomes if isinstance(o, omnigraph.KeyConflict)]
    assert len(winners) == 1 and len(conflicts) == WRITERS - 1, outcomes
    assert all(c.details == {"entity_kind": "node", "type_name": "Person", "entity_id": "Mallory"} for c in conflicts)
    assert set(seen) <= {people_before, people_before + 1} and len(seen) == WRITERS
    assert _rows_of(graph, "Mallory") == 1
    assert graph.commits()[0].commit_id == winners[0].commits[0]
    graph.close()


def test_eight_processes_each_with_its_own_graph(backend: str, tmp_path: Path) -> None:
    graph = _example(backend, tmp_path)
    procs = [spawn([sys.executable, "-c", PROCESS_WRITER, graph.uri, json.dumps(PERSON)]) for _ in range(WRITERS)]
    outcomes = release_together(procs)
    assert all(o.returncode == 0 for o in outcomes), [o.stderr for o in outcomes]
    documents = [json.loads(o.stdout) for o in outcomes]
    assert sum("won" in d for d in documents) == 1, documents
    conflicts = [d["conflict"] for d in documents if "conflict" in d]
    assert conflicts == [{"entity_kind": "node", "type_name": "Person", "entity_id": "Mallory"}] * (WRITERS - 1)
    assert _rows_of(graph, "Mallory") == 1
    assert graph.check().ok
    graph.close()
