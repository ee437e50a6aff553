"""Helpers for the branch-merge tests: a small schema, row writes and deletes through the engine."""

from __future__ import annotations

import json
from typing import Any

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.graph import Graph, init_graph, open_graph
from omnigraph.engine.manifest.rows import BranchSnapshot
from omnigraph.engine.ops.export import export_lines
from omnigraph.engine.ops.load import load
from omnigraph.engine.ops.write import CommitPlan, TableWrite, commit
from omnigraph.engine.storage.store import open_store

SCHEMA = """
node Person { name: String @key  age: I32?  email: String? @unique }
edge Knows: Person -> Person
"""
ACTOR = "merge-tests"


def new_graph(uri: str, people: dict[str, int] | None = None) -> Graph:
    """A graph with ``people`` (name -> age) on main."""
    graph = init_graph(open_store(uri), SCHEMA, FENCED_PROFILE, ACTOR)
    if people:
        upsert(graph, "main", people)
    return graph


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def upsert(graph: Graph, branch: str, people: dict[str, int | None], emails: dict[str, str] | None = None) -> None:
    """``load --mode merge`` of Person rows (name -> age; optional emails), one commit."""
    emails = emails or {}
    records = []
    for name, age in sorted(people.items()):
        data: dict[str, Any] = {"name": name}
        if age is not None:
            data["age"] = age
        if name in emails:
            data["email"] = emails[name]
        records.append({"type": "Person", "data": data})
    load(graph, _jsonl(records), mode="merge", branch=branch, actor=ACTOR)


def add_edges(graph: Graph, branch: str, edges: dict[str, tuple[str, str]]) -> None:
    """``load --mode append`` of Knows edges (edge id -> (src, dst)), one commit."""
    records = [{"edge": "Knows", "from": s, "to": d, "data": {"id": i}} for i, (s, d) in sorted(edges.items())]
    load(graph, _jsonl(records), mode="append", branch=branch, actor=ACTOR)


def delete(graph: Graph, branch: str, table_key: str, ids: list[str]) -> None:
    """Delete rows by id on ``branch`` as one graph commit through the write protocol."""
    schema = graph.catalog.table(table_key).arrow_schema(with_pk=True)

    def prepare(snapshot: BranchSnapshot, _previous: CommitPlan[None] | None) -> CommitPlan[None]:
        writes = (TableWrite(table_key, "merge", schema.empty_table(), delete_ids=tuple(sorted(ids))),)
        return CommitPlan(writes, (snapshot.head.commit_id,), "delete", None)

    commit(graph, branch, prepare, actor=ACTOR)


def people(uri: str, branch: str) -> dict[str, int | None]:
    """name -> age of every Person on ``branch`` (a name on two rows fails the test)."""
    graph = open_graph(open_store(uri), FENCED_PROFILE, write=False)
    result = {}
    for line in export_lines(graph, branch, ["Person"]):
        data = json.loads(line)["data"]
        assert data["name"] not in result, f"duplicate Person {data['name']!r} on {branch}"
        result[data["name"]] = data.get("age")
    return result


def edges(uri: str, branch: str) -> dict[str, tuple[str, str]]:
    graph = open_graph(open_store(uri), FENCED_PROFILE, write=False)
    result = {}
    for line in export_lines(graph, branch, ["Knows"]):
        record = json.loads(line)
        assert record["data"]["id"] not in result, f"duplicate Knows {record['data']['id']!r} on {branch}"
        result[record["data"]["id"]] = (record["from"], record["to"])
    return result
