"""A graph with more Person rows than one commit may carry, for the chunked mutation tests."""

from __future__ import annotations

import json

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.graph import init_graph, open_graph
from omnigraph.engine.ops.export import export_lines
from omnigraph.engine.ops.load import load
from omnigraph.engine.storage.store import open_store

SCHEMA = "node Person { name: String @key  age: I32? }\nedge Knows: Person -> Person\n"
PEOPLE = 8_300


def many_people(uri: str) -> None:
    """A format-5 graph with :data:`PEOPLE` Person rows aged 30 (more than one commit may carry) and 19 edges."""
    graph = init_graph(open_store(uri), SCHEMA, FENCED_PROFILE, actor="chunk-tests")
    lines = [json.dumps({"type": "Person", "data": {"name": f"p{i:05d}", "age": 30}}) for i in range(PEOPLE)]
    lines += [json.dumps({"edge": "Knows", "from": f"p{i:05d}", "to": "p00000", "data": {"id": f"k{i}"}}) for i in range(1, 20)]
    load(graph, ("\n".join(lines) + "\n").encode(), mode="append", branch="main", actor="chunk-tests", chunk_rows=8192)


def ages(uri: str) -> dict[str, int]:
    """name -> age of every Person on main (a name on two rows fails the test)."""
    graph = open_graph(open_store(uri), FENCED_PROFILE, write=False)
    ages: dict[str, int] = {}
    for line in export_lines(graph, "main", ["Person"]):
        data = json.loads(line)["data"]
        assert data["name"] not in ages, f"duplicate {data['name']}"
        ages[data["name"]] = data["age"]
    return ages
