"""Re-running a load: ``--mode merge`` of the same file changes nothing the second time, and every
mode reports what it inserted, updated, left unchanged and (overwrite) deleted per table.

The graphs are shaped after upstream OmniGraph's own test fixtures: its ``test.pg`` people graph
(4 Person, 2 Company, 3 ``Knows`` and 2 ``WorksAt`` edges without ids: 11 rows) and its
``context.pg`` decision graph (``@card(1..1)`` ownership edges, a ``@unique(src, dst)`` lineage
edge). Local only, in process (the CLI through click's runner): nothing here depends on the
storage backend.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import omnigraph
from tests.support.graph_helpers import OMNIGRAPH, invoke

PEOPLE_SCHEMA = """
node Person { name: String @key  age: I32?  ver: I64? }
node Company { name: String @key }
edge Knows: Person -> Person { since: Date? }
edge WorksAt: Person -> Company
"""
PEOPLE = [
    {"type": "Person", "data": {"name": "Alice", "age": 30}},
    {"type": "Person", "data": {"name": "Bob", "age": 25}},
    {"type": "Person", "data": {"name": "Charlie", "age": 35}},
    {"type": "Person", "data": {"name": "Diana", "age": 28}},
    {"type": "Company", "data": {"name": "Acme"}},
    {"type": "Company", "data": {"name": "Globex"}},
    {"edge": "Knows", "from": "Alice", "to": "Bob", "data": {"since": "2020-01-15"}},
    {"edge": "Knows", "from": "Alice", "to": "Charlie"},
    {"edge": "Knows", "from": "Bob", "to": "Diana"},
    {"edge": "WorksAt", "from": "Alice", "to": "Acme"},
    {"edge": "WorksAt", "from": "Bob", "to": "Globex"},
]
CONTEXT_SCHEMA = """
node Actor { slug: String @key  name: String }
node Decision { slug: String @key  title: String  decided_at: Date? }
edge OwnedBy: Decision -> Actor @card(1..1)
edge Supersedes: Decision -> Decision { note: String?  @unique(src, dst) }
"""
CONTEXT = [
    {"type": "Actor", "data": {"slug": "andrew", "name": "Andrew"}},
    {"type": "Decision", "data": {"slug": "d1", "title": "One", "decided_at": "2026-03-27"}},
    {"type": "Decision", "data": {"slug": "d2", "title": "Two"}},
    {"edge": "OwnedBy", "from": "d1", "to": "andrew"},
    {"edge": "OwnedBy", "from": "d2", "to": "andrew"},
    {"edge": "Supersedes", "from": "d2", "to": "d1", "data": {"note": "first"}},
]


def _file(tmp_path: Path, name: str, records: list[dict[str, object]]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def _counts(inserted: int = 0, updated: int = 0, unchanged: int = 0, deleted: int = 0) -> dict[str, int]:
    return {"inserted": inserted, "updated": updated, "unchanged": unchanged, "deleted": deleted}


def _edges(graph: omnigraph.Graph) -> list[tuple[str, str, str]]:
    return sorted((r["edge"], r["from"], r["to"]) for r in graph.export() if "edge" in r)


@pytest.mark.parametrize("chunk_rows", [None, 2])
def test_a_merge_load_run_twice_adds_nothing_the_second_time(tmp_path: Path, chunk_rows: int | None) -> None:
    data = _file(tmp_path, "test.jsonl", PEOPLE)
    with omnigraph.init(str(tmp_path / "people"), PEOPLE_SCHEMA) as graph:
        first = graph.load(data, mode="merge", chunk_rows=chunk_rows)
        assert first.changes == {
            "edge:Knows": _counts(inserted=3),
            "edge:WorksAt": _counts(inserted=2),
            "node:Company": _counts(inserted=2),
            "node:Person": _counts(inserted=4),
        }
        exported = list(graph.export_jsonl())
        second = graph.load(data, mode="merge", chunk_rows=chunk_rows)
        assert second.changes == {key: _counts(unchanged=sum(c.values())) for key, c in first.changes.items()}
        assert list(graph.export_jsonl()) == exported and len(_edges(graph)) == 5
        assert graph.check().ok


def test_the_same_edge_twice_in_a_file_is_two_edges_and_stays_two(tmp_path: Path) -> None:
    """Without a key an edge cannot be told from a second one: the file's copies are counted, not merged."""
    twice = [*PEOPLE[:4], PEOPLE[7], PEOPLE[7]]
    with omnigraph.init(str(tmp_path / "people"), PEOPLE_SCHEMA) as graph:
        assert graph.load(_file(tmp_path, "twice.jsonl", twice), mode="merge").changes["edge:Knows"] == _counts(inserted=2)
        again = graph.load(_file(tmp_path, "three.jsonl", [*twice, PEOPLE[7]]), mode="merge").changes["edge:Knows"]
        assert again == _counts(inserted=1, unchanged=2)
        assert _edges(graph) == [("Knows", "Alice", "Charlie")] * 3
        other_since = {**PEOPLE[7], "data": {"since": "2021-01-01"}}  # another property value: another edge
        assert graph.load(_file(tmp_path, "since.jsonl", [other_since]), mode="merge").changes["edge:Knows"] == _counts(inserted=1)
        # an append is a strict insert with generated ids (as upstream): the same edge again is one more edge
        assert graph.load(_file(tmp_path, "append.jsonl", [PEOPLE[7]]), mode="append").changes["edge:Knows"] == _counts(inserted=1)
        assert len(_edges(graph)) == 5


def test_card_one_edges_and_unique_pairs_rerun_and_upsert(tmp_path: Path) -> None:
    data = _file(tmp_path, "context.jsonl", CONTEXT)
    with omnigraph.init(str(tmp_path / "context"), CONTEXT_SCHEMA) as graph:
        graph.load(data, mode="merge")
        rerun = graph.load(data, mode="merge")  # once refused: @card(1..1) counted the re-sent OwnedBy edges
        assert rerun.changes["edge:OwnedBy"] == _counts(unchanged=2) and len(rerun.commits) == 1
        [lineage] = [r for r in graph.export() if r.get("edge") == "Supersedes"]
        renoted = [*CONTEXT[:5], {**CONTEXT[5], "data": {"note": "second"}}]
        upserted = graph.load(_file(tmp_path, "renoted.jsonl", renoted), mode="merge")
        assert upserted.changes["edge:Supersedes"] == _counts(updated=1) and len(upserted.commits) == 1
        [after] = [r for r in graph.export() if r.get("edge") == "Supersedes"]
        assert after["data"] == {"id": lineage["data"]["id"], "note": "second"}  # the pair kept its id
        assert graph.check().ok


def test_every_mode_reports_its_changes_in_text_and_json(tmp_path: Path) -> None:
    uri, data = str(tmp_path / "people"), _file(tmp_path, "test.jsonl", PEOPLE)
    omnigraph.init(uri, PEOPLE_SCHEMA).close()
    appended = invoke(OMNIGRAPH, "load", "--mode", "append", "--data", data, "--json", uri).ok().json()
    assert appended["changes"]["node:Person"] == _counts(inserted=4)
    merged = invoke(OMNIGRAPH, "load", "--mode", "merge", "--data", data, uri).ok()
    assert merged.stdout.splitlines() == [
        "loaded 11 rows into main in 1 commit(s)",
        "  edge:Knows                   0 inserted, 0 updated, 3 unchanged",
        "  edge:WorksAt                 0 inserted, 0 updated, 2 unchanged",
        "  node:Company                 0 inserted, 0 updated, 2 unchanged",
        "  node:Person                  0 inserted, 0 updated, 4 unchanged",
    ]
    # overwrite rewrites every row it is given; id-less edges get new ids, so their old rows go
    overwritten = invoke(OMNIGRAPH, "load", "--mode", "overwrite", "--data", data, "--json", uri).ok().json()
    assert overwritten["changes"]["edge:Knows"] == _counts(inserted=3, deleted=3)
    assert overwritten["changes"]["node:Person"] == _counts(updated=4)
    text = invoke(OMNIGRAPH, "load", "--mode", "overwrite", "--data", data, uri).ok().stdout
    assert "  node:Company                 0 inserted, 2 updated, 0 unchanged, 0 deleted" in text.splitlines()
