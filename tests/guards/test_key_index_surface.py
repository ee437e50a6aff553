"""Lance surface guards for the key indexes (engine/storage/key_indexes.py), pinned to pylance 14.0.2.

Each test pins one measured fact the key indexes rely on; if Lance changes it, the test goes red
and the rule built on it must be re-examined before the pin on ``pylance`` moves. Local disk only:
the facts are of Lance's index and scan logic, not of the object store.
"""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

from omnigraph.engine.storage import key_indexes

PK_KEY = "lance-schema:unenforced-primary-key"
SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False, metadata={PK_KEY: "true"}),
        pa.field("src", pa.string(), nullable=False),
        pa.field("dst", pa.string(), nullable=False),
    ]
)


def _edges(ids: range, src: str = "a") -> pa.Table:
    return pa.table({"id": [f"e{i}" for i in ids], "src": [f"{src}{i % 5}" for i in ids], "dst": ["z"] * len(ids)}, schema=SCHEMA)


def _fenced_upsert(dataset: lance.LanceDataset, rows: pa.Table) -> None:
    dataset.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().conflict_retries(0).use_index(False).execute(rows)


def _ids(dataset: lance.LanceDataset, condition: str) -> list[str]:
    return sorted(dataset.to_table(columns=["id"], filter=condition).column("id").to_pylist())


def _unindexed(dataset: lance.LanceDataset, name: str) -> int:
    return int(dataset.stats.index_stats(name)["num_unindexed_fragments"])


def test_a_btree_is_built_on_an_empty_table_and_rows_written_after_it_are_still_found(tmp_path: Path) -> None:
    """An empty table takes a BTREE per key column (one ``CreateIndex`` commit each, version 4 for
    an edge table); rows merged in afterwards are outside the index and a filter still finds them."""
    dataset = lance.write_dataset(SCHEMA.empty_table(), str(tmp_path / "t"), schema=SCHEMA, enable_stable_row_ids=True)
    assert key_indexes.create_on_empty(dataset) == key_indexes.created_version(SCHEMA) == 4
    assert sorted(key_indexes.btree_indexes(dataset)) == ["dst", "id", "src"]
    assert {type(dataset.read_transaction(v).operation).__name__ for v in (2, 3, 4)} == {"CreateIndex"}
    _fenced_upsert(dataset, _edges(range(20)))
    dataset = lance.dataset(str(tmp_path / "t"))
    assert _unindexed(dataset, "src_idx") == 1
    assert _ids(dataset, "src IN ('a1', 'a2')") == ["e1", "e11", "e12", "e16", "e17", "e2", "e6", "e7"]
    assert [step.describe() for step in key_indexes.plan(dataset)] == [
        "refresh key index id",
        "refresh key index src",
        "refresh key index dst",
    ]


def test_an_index_stays_exact_through_upserts_deletes_refreshes_and_compaction(tmp_path: Path) -> None:
    """With stable row ids, an upsert that moves an edge to another ``src``, a delete, an
    ``optimize_indices`` refresh (a ``CreateIndex`` commit that keeps every fragment) and a
    compaction never make the index answer a stale row."""
    uri = str(tmp_path / "t")
    dataset = lance.write_dataset(_edges(range(20)), uri, schema=SCHEMA, enable_stable_row_ids=True)
    key_indexes.apply(dataset, key_indexes.plan(dataset))
    assert key_indexes.plan(lance.dataset(uri)) == []
    _fenced_upsert(lance.dataset(uri), pa.table({"id": ["e1"], "src": ["moved"], "dst": ["z"]}, schema=SCHEMA))
    lance.dataset(uri).delete("id = 'e6'")
    dataset = lance.dataset(uri)
    assert _ids(dataset, "src = 'a1'") == ["e11", "e16"]
    assert _ids(dataset, "src IN ('moved', 'a1')") == ["e1", "e11", "e16"]
    fragments = sorted(f.fragment_id for f in dataset.get_fragments())
    key_indexes.apply(dataset, key_indexes.plan(dataset))
    dataset = lance.dataset(uri)
    assert type(dataset.read_transaction(dataset.version).operation).__name__ == "CreateIndex"
    assert sorted(f.fragment_id for f in dataset.get_fragments()) == fragments
    assert _unindexed(dataset, "src_idx") == 0
    assert _ids(dataset, "src IN ('moved', 'a1')") == ["e1", "e11", "e16"]
    dataset.optimize.compact_files()
    dataset = lance.dataset(uri)
    assert len(dataset.get_fragments()) == 1 and _unindexed(dataset, "src_idx") == 0
    assert _ids(dataset, "src IN ('moved', 'a1')") == ["e1", "e11", "e16"]
    assert _ids(dataset, "id = 'e6'") == []


def test_an_overwrite_drops_every_index(tmp_path: Path) -> None:
    """``write_dataset(mode="overwrite")`` (the fenced overwrite) keeps the PK but no index: the next optimize builds them again."""
    uri = str(tmp_path / "t")
    dataset = lance.write_dataset(_edges(range(10)), uri, schema=SCHEMA, enable_stable_row_ids=True)
    key_indexes.apply(dataset, key_indexes.plan(dataset))
    replaced = lance.write_dataset(_edges(range(5), "b"), lance.dataset(uri), schema=SCHEMA, mode="overwrite")
    assert replaced.describe_indices() == []
    assert replaced.schema.field("id").metadata == {PK_KEY.encode(): b"true"}
    assert [step.action for step in key_indexes.plan(replaced)] == ["build", "build", "build"]
