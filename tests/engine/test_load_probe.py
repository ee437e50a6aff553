"""Strict inserts probe existing ids only where the fenced merge cannot refuse them alone, and
never miss one.

At format 5 the first table of a commit's first attempt is not probed (when the branch owns its
image): its fenced strict merge fails with nothing landed on an existing id, and the attempt is
run again, probed. Every other table, every retry, and every table of the format-4 writer (which
has no fenced merge) is probed. :class:`omnigraph.engine.ops.constraints.ChunkProbe` answers "which of this
chunk's ids exist?" from one probe while the table has changed only by the load's own commits;
these tests count the probes and show that every other change (a concurrent commit between
chunks, a fork of an inherited table) is probed again, so a conflicting id is still
``key_conflict`` with nothing of that chunk written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import omnigraph.engine.ops.constraints as id_probe
from omnigraph.engine.errors import KeyConflict
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.load import load
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import FENCED_PROFILE, LEGACY_PROFILE, EngineProfile, export_text, init, jsonl, knows, person

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


def _intents(uri: str) -> list[str]:
    return sorted(name for name in open_store(uri).list("__recovery") if name.endswith(".json"))


def test_a_fenced_strict_insert_of_one_table_probes_nothing_and_still_refuses_an_existing_id(tmp_path: Path, probes: list[int]) -> None:
    uri = str(tmp_path / "g")
    graph = init(uri)
    load(graph, _people(["p001", "p002", "p003"]), mode="append", branch="main", actor=ACTOR, chunk_rows=2)
    assert probes == []
    with pytest.raises(KeyConflict) as refused:
        load(graph, _people(["p004", "p002"]), mode="append", branch="main", actor=ACTOR)
    assert refused.value.details["entity_id"] == "p002"
    assert probes == [2]  # the attempt the fenced merge refused is run again, probed
    assert _intents(uri) == []
    exported = export_text(uri)
    assert '"p004"' not in exported and exported.count('"id": "p002"') == 1


def test_only_the_first_table_of_a_fenced_commit_goes_unprobed(tmp_path: Path, probes: list[int]) -> None:
    """Tables are written in key order (``edge:Knows`` before ``node:Person``). An existing id in
    the second table is refused before anything is armed; one in the first is refused by its
    merge, the attempt runs again probed, and the second table's new rows never land."""
    uri = str(tmp_path / "g")
    graph = init(uri)
    load(graph, jsonl([person("a"), person("b"), knows("a", "b", "e1")]), mode="append", branch="main", actor=ACTOR)
    probes.clear()
    with pytest.raises(KeyConflict) as refused:
        load(graph, jsonl([person("a"), knows("a", "b", "e2")]), mode="append", branch="main", actor=ACTOR)
    assert refused.value.details["entity_id"] == "a" and probes == [1]
    probes.clear()
    with pytest.raises(KeyConflict) as refused:
        load(graph, jsonl([person("c"), knows("c", "a", "e1")]), mode="append", branch="main", actor=ACTOR)
    assert refused.value.details["entity_id"] == "e1" and probes == [1, 1]  # node:Person, then edge:Knows again
    assert _intents(uri) == []
    exported = export_text(uri)
    assert '"c"' not in exported and '"e2"' not in exported and exported.count('"id": "e1"') == 1


def test_one_probe_serves_every_chunk_of_an_undisturbed_load(tmp_path: Path, probes: list[int]) -> None:
    graph = init(str(tmp_path / "g"), LEGACY_PROFILE)
    result = load(graph, _people([f"p{i:03d}" for i in range(10)]), mode="append", branch="main", actor=ACTOR, chunk_rows=3)
    assert len(result.commits) == 4
    assert probes == [10]  # every id the load had left, once


def test_a_commit_between_chunks_is_probed_again_and_its_conflict_refused(tmp_path: Path, probes: list[int]) -> None:
    """Another writer inserts p007 after the first chunk: the third chunk is refused with
    ``key_conflict`` naming it, after two chunks landed; p007 is the other writer's row."""
    uri = str(tmp_path / "g")
    graph = init(uri, LEGACY_PROFILE)
    other = {"done": False}

    def between_chunks(done: int, total: int) -> None:
        if done == 1 and not other["done"]:
            other["done"] = True
            load(graph, _people(["p007"]), mode="append", branch="main", actor="other")

    with pytest.raises(KeyConflict) as refused:
        load(
            graph,
            _people([f"p{i:03d}" for i in range(10)]),
            mode="append",
            branch="main",
            actor=ACTOR,
            chunk_rows=3,
            progress=between_chunks,
        )
    assert refused.value.details["entity_id"] == "p007"
    assert refused.value.details["chunks_total"] == 4 and len(refused.value.details["committed_chunks"]) == 2
    assert probes == [10, 1, 7]  # the load, the other writer's own probe, the load again
    exported = export_text(uri, profile=LEGACY_PROFILE)
    assert all(f'"p{i:03d}"' in exported for i in (0, 1, 2, 3, 4, 5, 7)) and '"p006"' not in exported


def test_an_existing_id_is_refused_in_its_chunk(tmp_path: Path, probes: list[int]) -> None:
    uri = str(tmp_path / "g")
    graph = init(uri, LEGACY_PROFILE)
    load(graph, _people(["p008"]), mode="append", branch="main", actor=ACTOR)
    probes.clear()
    with pytest.raises(KeyConflict) as refused:
        load(graph, _people([f"p{i:03d}" for i in range(10)]), mode="append", branch="main", actor=ACTOR, chunk_rows=3)
    assert refused.value.details["entity_id"] == "p008" and len(refused.value.details["committed_chunks"]) == 2
    assert probes == [10]


@pytest.mark.parametrize(("profile", "expected"), [(LEGACY_PROFILE, [9, 6]), (FENCED_PROFILE, [9])], ids=["format4", "format5"])
def test_a_fork_is_probed_afresh(tmp_path: Path, probes: list[int], profile: EngineProfile, expected: list[int]) -> None:
    """On a branch that inherits the table, the first chunk forks it and is probed against the
    inherited image; ids of the parent's rows are still conflicts. The format-4 writer probes
    the fork made by chunk 1 for the next chunk (and reuses that for chunk 3); at format 5 the
    chunks after the fork are left to their fenced merge."""
    uri = str(tmp_path / "g")
    graph = init(uri, profile)
    load(graph, _people(["p009"]), mode="append", branch="main", actor=ACTOR)
    create_branch(graph, "feat")
    probes.clear()
    result = load(graph, _people([f"p{i:03d}" for i in range(9)]), mode="append", branch="feat", actor=ACTOR, chunk_rows=3)
    assert len(result.commits) == 3
    assert probes == expected
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
