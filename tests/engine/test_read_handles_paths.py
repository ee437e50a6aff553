"""A shared read handle never answers for another graph whose table has the same path and version.

The table of a type added by a schema change lives at a path derived from the schema version
(``schema_change.added_table_path``), not at a fresh ULID: a graph root removed, created again
and given the same schema change holds that table at the same path, at the same versions, with
other rows. A long-lived process must read the new rows.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import omnigraph

FIRST = "node Person {\n    name: String @key\n}\n"
ADDED = FIRST + "node City {\n    name: String @key\n    pop: I32?\n}\n"
POP = 'query pop() { match { $c: City { name: "Oslo" } } return { $c.pop } }'
CITIES = "query cities() { match { $c: City } return { $c.name, $c.pop } order { $c.name } }"


def _city(graph: omnigraph.Graph) -> tuple[str, int]:
    return next((table.path, table.version) for table in graph.snapshot().tables if table.table_key == "node:City")


def test_a_root_created_again_with_the_same_schema_change_is_read_as_the_new_graph(tmp_path: Path) -> None:
    uri = str(tmp_path / "graph")
    with omnigraph.init(uri, FIRST) as graph:
        graph.apply_schema(ADDED)
        graph.load([{"type": "City", "data": {"name": "Oslo", "pop": 1}}], mode="append")
        assert graph.query(POP).rows == ({"c.pop": 1},)
        assert graph.query(CITIES).rows == ({"c.name": "Oslo", "c.pop": 1},)
        first = _city(graph)
    shutil.rmtree(uri)
    with omnigraph.init(uri, FIRST) as graph:
        graph.apply_schema(ADDED)
        graph.load([{"type": "City", "data": {"name": "Oslo", "pop": 2}}], mode="append")
        assert _city(graph) == first  # the hazard: the same path and version
        assert graph.query(POP).rows == ({"c.pop": 2},)
        assert graph.query(CITIES).rows == ({"c.name": "Oslo", "c.pop": 2},)
        assert [row["data"]["pop"] for row in graph.export(types=["City"])] == [2]
