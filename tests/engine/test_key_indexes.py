"""The key indexes (BTREE on ``id``, and on ``src``/``dst`` of edges) the engine keeps itself (engine/storage/key_indexes.py).

Real CLI processes on real Lance: the indexes exist from a table's creation (init, a schema apply
that adds a type), every ``optimize`` that indexes makes them cover every row, published as a
graph commit (``check`` stays clean), a process killed between the index build and its publish
leaves a graph the next run completes, and a writer that commits while ``optimize`` holds its
indexes unpublished loses nothing.
"""

from __future__ import annotations

import itertools
import subprocess
import time
from pathlib import Path

import pytest

from omnigraph.engine.failpoints import FAILPOINT_EXIT_STATUS
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.key_indexes import btree_indexes
from omnigraph.engine.storage.lance_io import latest_version, open_pinned
from omnigraph.engine.storage.store import open_store
from tests.support.check_helpers import assert_check_clean
from tests.support.graph_helpers import OMNIGRAPH, export_text, invoke, knows, load_lines, omnigraph, person, write_jsonl
from tests.support.paused_process import pause_at

SCHEMA = """
node Person { name: String @key  age: I32? }
edge Knows: Person -> Person
"""
ADDED = SCHEMA + "node Tag { label: String @key }\n"
HOP = "query hop($n: String) { match { $p: Person { name: $n }  $p knows $f } return { $f.name } order { $f.name } }\n"
KEYS = {"node:Person": ["id"], "edge:Knows": ["dst", "id", "src"]}


def _people(count: int, start: int = 0) -> list[str]:
    names = [f"p{i:03d}" for i in range(start, start + count)]
    return [person(name, i) for i, name in enumerate(names)] + [knows(a, b, f"k-{a}-{b}") for a, b in itertools.pairwise(names)]


def _coverage(uri: str, branch: str = "main") -> dict[str, dict[str, int]]:
    """Per pinned table: key column -> fragments its BTREE leaves unindexed (absent columns have no BTREE)."""
    store = open_store(uri)
    found = {}
    for key, entry in Manifest(store).snapshot(branch).tables.items():
        dataset = open_pinned(store, entry.image)
        found[key] = {
            column: int(dataset.stats.index_stats(name)["num_unindexed_fragments"])
            for column, name in btree_indexes(dataset).items()
            if column in ("id", "src", "dst")
        }
    return found


def _pinned_at_head(uri: str, branch: str = "main") -> None:
    store = open_store(uri)
    for entry in Manifest(store).snapshot(branch).tables.values():
        assert latest_version(store, entry.table_path, entry.table_branch) == entry.table_version, entry


def _answer(uri: str, tmp_path: Path, name: str) -> dict[str, object]:
    query = tmp_path / "hop.gq"
    query.write_text(HOP)
    return invoke(OMNIGRAPH, "query", "--query", query, "--params", f'{{"n": "{name}"}}', "--json", uri).ok().json()


def _graph(tmp_path: Path, rows: int = 40) -> str:
    uri = str(tmp_path / "graph")
    schema = tmp_path / "schema.pg"
    schema.write_text(SCHEMA)
    invoke(OMNIGRAPH, "init", "--schema", schema, uri).ok()
    invoke(OMNIGRAPH, "load", "--mode", "append", "--data", write_jsonl(tmp_path, "a.jsonl", _people(rows)), uri).ok()
    return uri


def test_key_indexes_exist_from_creation_and_optimize_makes_them_cover_every_row(tmp_path: Path) -> None:
    uri = _graph(tmp_path)
    # init made them on the empty tables; the load's rows are not covered yet
    assert {key: sorted(cols) for key, cols in _coverage(uri).items()} == KEYS
    assert all(left > 0 for table in _coverage(uri).values() for left in table.values())
    before = _answer(uri, tmp_path, "p005")
    assert len(before["rows"]) == 1

    # a schema apply that adds a type: its table is created with its key index and pinned at that version
    added = tmp_path / "added.pg"
    added.write_text(ADDED)
    invoke(OMNIGRAPH, "schema", "apply", "--schema", added, uri).ok()
    assert _coverage(uri)["node:Tag"] == {"id": 0}
    _pinned_at_head(uri)
    assert_check_clean(uri)

    # optimize --compact refreshes the key indexes in the same graph commit
    done = invoke(OMNIGRAPH, "optimize", "--compact", "--json", uri).ok().json()
    actions = {t["table_key"]: t["actions"] for t in done["tables"]}
    assert "refresh key index src" in actions["edge:Knows"] and "refresh key index id" in actions["node:Person"]
    assert done["manifest_version"] is not None
    assert _coverage(uri) == {"node:Person": {"id": 0}, "edge:Knows": {"id": 0, "src": 0, "dst": 0}, "node:Tag": {"id": 0}}
    _pinned_at_head(uri)
    assert_check_clean(uri)
    assert _answer(uri, tmp_path, "p005")["rows"] == before["rows"]

    # nothing left to do: no table, no commit
    again = invoke(OMNIGRAPH, "optimize", "--key-indexes", "--json", uri).ok().json()
    assert again["tables"] == [] and again["manifest_version"] is None

    # an overwrite load drops every index of the table (Lance); the next optimize builds them again
    invoke(OMNIGRAPH, "load", "--mode", "overwrite", "--data", write_jsonl(tmp_path, "b.jsonl", _people(10, 100)), uri).ok()
    assert _coverage(uri)["edge:Knows"] == {}
    rebuilt = invoke(OMNIGRAPH, "optimize", "--key-indexes", "--json", uri).ok().json()
    assert {t["table_key"]: t["actions"] for t in rebuilt["tables"]}["edge:Knows"] == ["key index id", "key index src", "key index dst"]
    assert _coverage(uri)["edge:Knows"] == {"id": 0, "src": 0, "dst": 0}
    assert_check_clean(uri)


def test_explain_names_the_key_indexes_that_serve_an_id_comparison_and_a_frontier(tmp_path: Path) -> None:
    uri = _graph(tmp_path, 5)
    query = tmp_path / "id.gq"
    query.write_text('query one() { match { $p: Person  $p.id = "p001" } return { $p.age } }\n')
    plan = invoke(OMNIGRAPH, "query", "--query", query, "--explain", "--json", uri).ok().json()
    (pushed,) = plan["filters"]
    assert pushed["pushed_into_scan"] is True and pushed["index"] == "id_idx"
    assert [i["columns"] for i in next(t for t in plan["tables"] if t["table"] == "node:Person")["indexes"]] == [["id"]]
    query.write_text('query far() { match { $p: Person { name: "p001" }  $p knows{1,3} $f } return { $f.name } }\n')
    plan = invoke(OMNIGRAPH, "query", "--query", query, "--explain", "--json", uri).ok().json()
    (hop,) = plan["hops"]
    assert hop["mode"] == "breadth_first" and hop["start"] == "sources" and hop["frontier_index"] == "src_idx"
    source = next(v for v in plan["variables"] if v["variable"] == "$p")
    assert source["id_lookup"] == "p001" and source["id_index"] == "id_idx"
    query.write_text('query near() { match { $f: Person { name: "p002" }  $p knows $f } return { $p.name } }\n')
    plan = invoke(OMNIGRAPH, "query", "--query", query, "--explain", "--json", uri).ok().json()
    (hop,) = plan["hops"]
    assert hop["mode"] == "probe" and hop["start"] == "destinations" and hop["frontier_index"] == "dst_idx"


def test_killed_between_index_build_and_publish_then_rerun_completes(tmp_path: Path) -> None:
    uri = _graph(tmp_path)
    exported = export_text(uri)
    pinned = {key: entry.table_version for key, entry in Manifest(open_store(uri)).snapshot("main").tables.items()}
    killed = omnigraph("optimize", "--key-indexes", uri, env={"OMNIGRAPH_FAILPOINTS": "optimize.before_publish"})
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.describe()
    # the index commits landed on the tables but no graph commit pins them yet
    assert {key: entry.table_version for key, entry in Manifest(open_store(uri)).snapshot("main").tables.items()} == pinned
    checked = invoke(OMNIGRAPH, "check", "--json", uri)
    if checked.returncode != 0:  # what check reports must be resolved by the command it names
        assert "omnigraph recover" in checked.stdout + checked.stderr, checked.describe()
        invoke(OMNIGRAPH, "recover", uri).ok()
    rerun = invoke(OMNIGRAPH, "optimize", "--key-indexes", "--json", uri).ok().json()
    assert rerun["skipped"] == []
    assert all(left == 0 for table in _coverage(uri).values() for left in table.values())
    _pinned_at_head(uri)
    assert_check_clean(uri)
    assert export_text(uri) == exported


def test_a_writer_committing_during_the_index_build_loses_nothing(tmp_path: Path) -> None:
    uri = _graph(tmp_path)
    held = pause_at("optimize.before_publish", "omnigraph", "optimize", "--key-indexes", "--json", uri)
    data = write_jsonl(tmp_path, "late.jsonl", [person("late", 1), knows("late", "p001", "k-late")])
    writer = subprocess.Popen(
        [str(OMNIGRAPH), "load", "--mode", "append", "--data", str(data), "--json", uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)  # the writer is waiting for the branch lease optimize holds
    status, _out, err = held.release("continue")
    assert status == 0, err
    _written_out, written_err = writer.communicate(timeout=120)
    assert writer.returncode == 0, written_err
    # the index commits are pinned by a graph commit: optimize's own, or the adoption the writer's
    # read-write open made of them first (optimize then has nothing left to publish)
    messages = [c["message"] for c in invoke(OMNIGRAPH, "commit", "list", "--json", uri).ok().json()["commits"]]
    assert any(m.startswith(("optimized ", "adopted CreateIndex")) for m in messages), messages
    assert {key: sorted(columns) for key, columns in _coverage(uri).items()} == KEYS
    assert '"late"' in export_text(uri)
    assert '"k-late"' in export_text(uri)
    _pinned_at_head(uri)
    assert_check_clean(uri)
    assert len(_answer(uri, tmp_path, "late")["rows"]) == 1


@pytest.mark.parametrize("backend", ["s3"], indirect=True)
def test_key_indexes_on_s3(root_uri: str, tmp_path: Path) -> None:
    schema = tmp_path / "schema.pg"
    schema.write_text(SCHEMA)
    invoke(OMNIGRAPH, "init", "--schema", schema, root_uri).ok()
    load_lines(root_uri, _people(20))
    invoke(OMNIGRAPH, "optimize", "--key-indexes", root_uri).ok()
    assert _coverage(root_uri) == {"node:Person": {"id": 0}, "edge:Knows": {"id": 0, "src": 0, "dst": 0}}
    assert_check_clean(root_uri)
