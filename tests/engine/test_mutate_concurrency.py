"""Concurrent ``.gq`` mutations: real processes released at one instant (``tests/process_race``),
and deterministic interleavings where a second writer commits between a mutation's prepare and
its effects (the same write protocol, driven in one process).

Strict inserts of one unkeyed id: the racers name the id explicitly (``insert Knows { id: "e1",
...}``, the mutation form of load's ``data.id``), so every process attempts exactly that id.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import KeyConflict, ReadSetConflict
from omnigraph.engine.gq.checker import BoundQuery
from omnigraph.engine.graph import Graph, init_graph, open_graph
from omnigraph.engine.ops.load import load
from omnigraph.engine.ops.mutate import mutate
from omnigraph.engine.ops.mutate_eval import Evaluation
from omnigraph.engine.reconcile.recovery import list_intents
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import export_text
from tests.support.process_race import race

SCHEMA = """
node Person { name: String @key  age: I32? }
node Tag { label: String }
edge Knows: Person -> Person
"""
WRITERS = 8


def _graph(uri: str) -> Graph:
    graph = init_graph(open_store(uri), SCHEMA, FENCED_PROFILE, "tests")
    people = "".join(json.dumps({"type": "Person", "data": {"name": n, "age": 1}}) + "\n" for n in ("a", "b"))
    load(graph, people.encode(), mode="append", branch="main", actor="tests")
    return graph


def _rows(uri: str, kind: str) -> list[dict]:
    records = [json.loads(line) for line in export_text(uri).splitlines()]
    return [r for r in records if r.get("type") == kind or r.get("edge") == kind]


def _query(tmp_path: Path, source: str) -> str:
    path = tmp_path / "q.gq"
    path.write_text(source)
    return str(path)


# local only: the S3 commit race is test_same_id_strict_insert_race_has_exactly_one_winner[s3]
@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_eight_processes_upserting_one_keyed_node(root_uri: str, tmp_path: Path) -> None:
    _graph(root_uri)
    query = _query(tmp_path, 'query up($age: I32) { insert Person { name: "racer", age: $age } }')
    outcomes = race(
        "omnigraph", [["mutate", "--query", query, "--params", json.dumps({"age": 100 + i}), "--json", root_uri] for i in range(WRITERS)]
    )
    succeeded = []
    for index, outcome in enumerate(outcomes):
        if outcome.returncode == 0:
            assert outcome.json()["affected_nodes"] == 1
            succeeded.append(100 + index)
        else:  # only the bounded retry running out is acceptable, and it is retryable
            assert outcome.returncode == 1, outcome.stderr
            assert outcome.json()["error"]["code"] == "read_set_conflict", outcome.stderr
    assert succeeded, [o.stderr for o in outcomes]
    [row] = [r for r in _rows(root_uri, "Person") if r["data"]["name"] == "racer"]
    assert row["data"]["age"] in succeeded
    assert list_intents(open_graph(open_store(root_uri), FENCED_PROFILE, write=False).store) == []


# local only: the S3 commit race is test_same_id_strict_insert_race_has_exactly_one_winner[s3]
@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_eight_processes_strict_inserting_one_edge_id_are_fenced(root_uri: str, tmp_path: Path) -> None:
    _graph(root_uri)
    query = _query(tmp_path, 'query link() { insert Knows { id: "e1", from: "a", to: "b" } }')
    outcomes = race("omnigraph", [["mutate", "--query", query, "--json", root_uri] for _ in range(WRITERS)])
    winners = [o for o in outcomes if o.returncode == 0]
    assert len(winners) == 1, [o.stderr for o in outcomes]
    for loser in (o for o in outcomes if o.returncode != 0):
        assert loser.returncode == 1, loser.stderr
        assert loser.json()["error"] == {
            "code": "key_conflict",
            "message": "edge Knows with id 'e1' already exists",
            "details": {"entity_kind": "edge", "type_name": "Knows", "entity_id": "e1"},
        }
    assert [r["data"]["id"] for r in _rows(root_uri, "Knows")] == ["e1"]


def _interleave(monkeypatch: pytest.MonkeyPatch, other: Callable[[], None]) -> list[int]:
    """Run ``other`` (a commit by a second writer) right after the first evaluation of the next
    mutation, before its intent is armed; returns a list that counts the evaluations."""
    evaluations: list[int] = []
    real_run = Evaluation.run

    def run(self: Evaluation, bound: BoundQuery) -> Evaluation:
        result = real_run(self, bound)
        evaluations.append(1)
        if len(evaluations) == 1:
            other()
        return result

    monkeypatch.setattr(Evaluation, "run", run)
    return evaluations


def test_a_strict_insert_racing_a_disjoint_insert_is_reprepared(root_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = _graph(root_uri)
    second = open_graph(open_store(root_uri), FENCED_PROFILE, write=True)
    evaluations = _interleave(
        monkeypatch,
        lambda: load(second, b'{"type": "Tag", "data": {"id": "theirs", "label": "y"}}\n', mode="append", branch="main", actor="other"),
    )
    result = mutate(graph, 'query q() { insert Tag { id: "ours", label: "x" } }', branch="main", actor="tests")
    assert len(evaluations) == 2  # the stale attempt was discarded and prepared again
    assert result.affected_nodes == 1
    assert sorted(r["data"]["id"] for r in _rows(root_uri, "Tag")) == ["ours", "theirs"]


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_a_strict_insert_racing_the_same_id_is_key_conflict(root_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = _graph(root_uri)
    second = open_graph(open_store(root_uri), FENCED_PROFILE, write=True)
    _interleave(
        monkeypatch,
        lambda: load(second, b'{"type": "Tag", "data": {"id": "same", "label": "theirs"}}\n', mode="append", branch="main", actor="other"),
    )
    with pytest.raises(KeyConflict) as conflict:
        mutate(graph, 'query q() { insert Tag { id: "same", label: "ours" } }', branch="main", actor="tests")
    assert conflict.value.details == {"entity_kind": "node", "type_name": "Tag", "entity_id": "same"}
    assert [r["data"]["label"] for r in _rows(root_uri, "Tag")] == ["theirs"]


@pytest.mark.parametrize(
    "backend, source",
    [
        ("local", 'query q() { update Person set { age: 7 } where name = "a" }'),
        ("s3", 'query q() { update Person set { age: 7 } where name = "a" }'),
        ("local", 'query q() { delete Person where name = "a" }'),
    ],
    indirect=["backend"],
)
def test_update_and_delete_racing_a_commit_are_read_set_conflicts(root_uri: str, monkeypatch: pytest.MonkeyPatch, source: str) -> None:
    graph = _graph(root_uri)
    second = open_graph(open_store(root_uri), FENCED_PROFILE, write=True)
    moved: list[str] = []

    def other() -> None:
        moved.append(
            mutate(second, 'query o() { update Person set { age: 9 } where name = "a" }', branch="main", actor="o").commit.commit_id
        )

    _interleave(monkeypatch, other)
    before_head = graph.manifest.snapshot("main").head.commit_id
    with pytest.raises(ReadSetConflict) as conflict:
        mutate(graph, source, branch="main", actor="tests")
    assert conflict.value.details == {"member": "main", "expected": before_head, "actual": moved[0]}
    assert conflict.value.http_status == 409
    assert [r["data"]["age"] for r in _rows(root_uri, "Person") if r["data"]["name"] == "a"] == [9]
    assert list_intents(graph.store) == []
    # What the message advises: run the mutation again, now against the moved head.
    assert mutate(graph, source, branch="main", actor="tests").affected_nodes == 1
