"""Readers share one handle per image of a main branch (``lance_io.open_pinned_for_read``).

A shared handle must keep naming the rows of its image: never moved by a write (a Lance commit
moves the handle it is called on), never answering for another graph whose table has the same
path and version (a table a schema change added lives at a path derived from the schema version,
so a root removed and created again with the same change holds it at the same path and versions,
with other rows), and read at the version a read pins (the head, or an older commit).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import omnigraph
from omnigraph.engine.storage import lance_io
from omnigraph.maintenance import optimize
from tests.support.call_spy import returns_of
from tests.support.graph_helpers import DATA_PATH, SCHEMA_PATH

AGE = "query age($name: String) { match { $p: Person { name: $name } } return { $p.age } }"
KNOWS = "query knows($name: String) { match { $p: Person { name: $name }  $p knows $f } return { $f.name } order { $f.name } }"

FIRST_SCHEMA = "node Person {\n    name: String @key\n}\n"
ADDED = FIRST_SCHEMA + "node City {\n    name: String @key\n    pop: I32?\n}\n"
POP = 'query pop() { match { $c: City { name: "Oslo" } } return { $c.pop } }'
CITIES = "query cities() { match { $c: City } return { $c.name, $c.pop } order { $c.name } }"


def _olga(age: int) -> list[dict[str, object]]:
    return [{"type": "Person", "data": {"name": "Olga", "age": age}}]


def _age(graph: omnigraph.Graph, **read: str) -> object:
    rows = graph.query(AGE, params={"name": "Olga"}, **read).rows
    return rows[0]["p.age"] if rows else None


def _person_version(graph: omnigraph.Graph) -> int:
    return next(table.version for table in graph.snapshot().tables if table.table_key == "node:Person")


def _city(graph: omnigraph.Graph) -> tuple[str, int]:
    return next((table.path, table.version) for table in graph.snapshot().tables if table.table_key == "node:City")


def test_a_main_image_is_opened_once_and_then_shared_by_every_read(tmp_path: Path) -> None:
    with omnigraph.init(str(tmp_path / "graph"), SCHEMA_PATH) as graph:
        graph.load(DATA_PATH, mode="append")
        graph.query(AGE, params={"name": "Alice"})
        with returns_of(lance_io, "open_pinned") as opened:
            for _ in range(3):
                graph.query(AGE, params={"name": "Alice"})
                graph.query(KNOWS, params={"name": "Alice"})
        assert [dataset for dataset in opened if "Knows" not in dataset.uri] == []  # Person's image: read three times, opened before
        assert len(opened) == 1  # the Knows image, opened by the first of its reads only


def test_writes_after_reads_in_one_process_never_move_a_shared_handle(tmp_path: Path) -> None:
    """Every kind of write, after reads of the images it replaces: each shared handle still holds its own version."""
    with omnigraph.init(str(tmp_path / "graph"), SCHEMA_PATH) as graph:
        graph.load(DATA_PATH, mode="append")
        graph.load(_olga(50), mode="append")
        first = graph.commits()[0].commit_id
        everyone = [json.loads(line) for line in DATA_PATH.read_text().splitlines() if line.strip()]
        writes = [
            lambda: graph.load(_olga(51), mode="merge"),
            lambda: graph.mutate('query grow() { update Person set { age: 52 } where name = "Olga" }'),
            lambda: graph.load([*everyone, *_olga(53)], mode="overwrite"),
            lambda: optimize(graph.uri, key_indexes=True),
        ]
        for age, write in zip((51, 52, 53, 53), writes, strict=True):
            before = _age(graph)
            graph.query(KNOWS, params={"name": "Alice"})
            write()
            assert _age(graph) == age, f"the head after the write (before it: {before})"
            assert _age(graph, at=first) == 50  # the old commit's image, read through its own handle
        for (_, _, version, _), handle in list(lance_io._READ_HANDLES.items()):
            assert handle.version == version


def test_a_graph_root_removed_and_created_again_is_read_as_the_new_graph(tmp_path: Path) -> None:
    """The same root path, the same version numbers, other rows: a long-lived process reads the new ones."""
    uri = str(tmp_path / "graph")
    with omnigraph.init(uri, SCHEMA_PATH) as graph:
        graph.load(_olga(50), mode="append")
        assert _age(graph) == 50
        version = _person_version(graph)
    shutil.rmtree(tmp_path / "graph")
    with omnigraph.init(uri, SCHEMA_PATH) as graph:
        graph.load(_olga(60), mode="append")
        assert _person_version(graph) == version  # the hazard: the same number
        assert _age(graph) == 60


def test_a_root_created_again_with_the_same_schema_change_is_read_as_the_new_graph(tmp_path: Path) -> None:
    uri = str(tmp_path / "graph")
    with omnigraph.init(uri, FIRST_SCHEMA) as graph:
        graph.apply_schema(ADDED)
        graph.load([{"type": "City", "data": {"name": "Oslo", "pop": 1}}], mode="append")
        assert graph.query(POP).rows == ({"c.pop": 1},)
        assert graph.query(CITIES).rows == ({"c.name": "Oslo", "c.pop": 1},)
        first = _city(graph)
    shutil.rmtree(uri)
    with omnigraph.init(uri, FIRST_SCHEMA) as graph:
        graph.apply_schema(ADDED)
        graph.load([{"type": "City", "data": {"name": "Oslo", "pop": 2}}], mode="append")
        assert _city(graph) == first  # the hazard: the same path and version
        assert graph.query(POP).rows == ({"c.pop": 2},)
        assert graph.query(CITIES).rows == ({"c.name": "Oslo", "c.pop": 2},)
        assert [row["data"]["pop"] for row in graph.export(types=["City"])] == [2]
