"""Chunked strict inserts probe existing ids once per table state, and never miss one.

:class:`engine.ops.id_probe.ChunkProbe` answers "which of this chunk's ids exist?" from one probe
while the table has changed only by the load's own commits. These tests count the probes and
show that every other change (a concurrent commit between chunks, a fork of an inherited
table) is probed again, so a conflicting id is still ``key_conflict`` with nothing of that
chunk written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import engine.ops.id_probe as id_probe
from engine.errors import KeyConflict
from engine.ops import create_branch
from engine.ops.load import load
from tests.support.graph_helpers import export_text, init

ACTOR = "tests"


def _people(names: list[str]) -> bytes:
    return "".join(json.dumps({"type": "Person", "data": {"name": name}}) + "\n" for name in names).encode()


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of ids of every probe a load makes."""
    calls: list[int] = []
    original = id_probe.present_ids

    def counting(graph: Any, entry: Any, ids: Any) -> set[str]:
        calls.append(len(ids))
        return original(graph, entry, ids)

    monkeypatch.setattr(id_probe, "present_ids", counting)
    return calls


def test_one_probe_serves_every_chunk_of_an_undisturbed_load(tmp_path: Path, probes: list[int]) -> None:
    graph = init(str(tmp_path / "g"))
    result = load(graph, _people([f"p{i:03d}" for i in range(10)]), mode="append", branch="main", actor=ACTOR, chunk_rows=3)
    assert len(result.commits) == 4
    assert probes == [10]  # every id the load had left, once


def test_a_commit_between_chunks_is_probed_again_and_its_conflict_refused(tmp_path: Path, probes: list[int]) -> None:
    """Another writer inserts p007 after the first chunk: the third chunk is refused with
    ``key_conflict`` naming it, after two chunks landed; p007 is the other writer's row."""
    uri = str(tmp_path / "g")
    graph = init(uri)
    other = {"done": False}

    def between_chunks(done: int, total: int) -> None:
        if done == 1 and not other["done"]:
            other["done"] = True
            load(graph, _people(["p007"]), mode="append", branch="main", actor="other")

    with pytest.raises(KeyConflict) as refused:
        load(graph, _people([f"p{i:03d}" for i in range(10)]), mode="append", branch="main", actor=ACTOR,
             chunk_rows=3, progress=between_chunks)
    assert refused.value.details["entity_id"] == "p007"
    assert refused.value.details["chunks_total"] == 4 and len(refused.value.details["committed_chunks"]) == 2
    assert probes == [10, 1, 7]  # the load, the other writer's own probe, the load again
    exported = export_text(uri)
    assert all(f'"p{i:03d}"' in exported for i in (0, 1, 2, 3, 4, 5, 7)) and '"p006"' not in exported


def test_an_existing_id_is_refused_in_its_chunk(tmp_path: Path, probes: list[int]) -> None:
    uri = str(tmp_path / "g")
    graph = init(uri)
    load(graph, _people(["p008"]), mode="append", branch="main", actor=ACTOR)
    probes.clear()
    with pytest.raises(KeyConflict) as refused:
        load(graph, _people([f"p{i:03d}" for i in range(10)]), mode="append", branch="main", actor=ACTOR, chunk_rows=3)
    assert refused.value.details["entity_id"] == "p008" and len(refused.value.details["committed_chunks"]) == 2
    assert probes == [10]


def test_a_fork_is_probed_afresh(tmp_path: Path, probes: list[int]) -> None:
    """On a branch that inherits the table, the first chunk forks it: the next chunk probes
    the fork; ids of the parent's rows are still conflicts."""
    uri = str(tmp_path / "g")
    graph = init(uri)
    load(graph, _people(["p009"]), mode="append", branch="main", actor=ACTOR)
    create_branch(graph, "feat")
    probes.clear()
    result = load(graph, _people([f"p{i:03d}" for i in range(9)]), mode="append", branch="feat", actor=ACTOR, chunk_rows=3)
    assert len(result.commits) == 3
    assert probes == [9, 6]  # the inherited image, then the fork made by chunk 1 (reused by chunk 3)
    with pytest.raises(KeyConflict) as refused:
        load(graph, _people(["q1", "q2", "q3", "p009"]), mode="append", branch="feat", actor=ACTOR, chunk_rows=3)
    assert refused.value.details["entity_id"] == "p009"


def test_a_probe_of_more_ids_than_a_filter_takes_finds_each_present_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``FILTER_IDS`` the ids are matched against the streamed column in slices; ids in
    every fragment, at slice edges and absent ones are told apart exactly."""
    monkeypatch.setattr(id_probe, "FILTER_IDS", 4)
    monkeypatch.setattr(id_probe, "MIN_PROBE_ROWS", 5)
    uri = str(tmp_path / "g")
    graph = init(uri)
    for start in range(0, 30, 6):  # five fragments of six rows
        load(graph, _people([f"p{i:03d}" for i in range(start, start + 6)]), mode="append", branch="main", actor=ACTOR)
    wanted = [f"p{i:03d}" for i in (0, 5, 6, 11, 17, 29)] + ["p030", "q000", "p0"]
    entry = graph.manifest.snapshot("main").table("node:Person")
    assert id_probe.present_ids(graph, entry, wanted) == {"p000", "p005", "p006", "p011", "p017", "p029"}
