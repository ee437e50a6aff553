"""Id validation: duplicates and nulls found exactly, whatever the partitioning; stable digests."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import migrator.validate as validate
from migrator.fingerprint import physical_fingerprint
from migrator.id_hash import hash_strings

IDS = [f"node-{i:05d}" for i in range(3000)] + ["node-00007", "node-00007", "node-02999", "é", "é", ""]


def _dataset(path: Path, ids: list[str | None]) -> lance.LanceDataset:
    return lance.write_dataset(pa.table({"id": pa.array(ids, pa.utf8())}), str(path), max_rows_per_file=700)


@pytest.mark.parametrize("partition_rows, max_open", [(1_000_000, 256), (250, 256), (100, 4)])
def test_duplicates_and_nulls_are_found_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partition_rows: int, max_open: int) -> None:
    monkeypatch.setattr(validate, "PARTITION_ROWS", partition_rows)
    monkeypatch.setattr(validate, "MAX_OPEN_PARTITIONS", max_open)
    report = validate.validate_image(_dataset(tmp_path / "t", IDS + [None, None]))
    assert report.duplicates == [("node-00007", 3), ("node-02999", 2), ("é", 2)]
    assert report.null_ids == 2 and report.rows == len(IDS) + 2 and not report.clean


def test_the_digest_ignores_order_and_partitioning_but_not_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forward = validate.validate_image(_dataset(tmp_path / "a", IDS)).digest
    monkeypatch.setattr(validate, "PARTITION_ROWS", 100)
    backward = validate.validate_image(_dataset(tmp_path / "b", list(reversed(IDS)))).digest
    changed = validate.validate_image(_dataset(tmp_path / "c", IDS[:-1] + ["other"])).digest
    assert forward == backward != changed


def test_hashes_are_deterministic_and_spread() -> None:
    ids = pa.array([f"id-{i}" for i in range(20000)])
    first, second = hash_strings(ids), hash_strings(ids.slice(0))
    assert np.array_equal(first, second) and len(np.unique(first)) == 20000
    assert np.bincount((first % np.uint64(8)).astype(np.int64)).min() > 2000
    assert hash_strings(pa.array(["ab", "a"]))[1] == hash_strings(pa.array(["a"]))[0]


def test_fingerprint_survives_a_pk_install_and_a_fork_but_not_a_write(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.utf8(), nullable=False)])
    dataset = lance.write_dataset(pa.table({"id": IDS[:100]}, schema=schema), str(tmp_path / "f"), max_rows_per_file=30)
    before = physical_fingerprint(dataset)
    dataset.create_branch("b")
    dataset.update_field_metadata({"id": {"lance-schema:unenforced-primary-key": "true"}})
    assert physical_fingerprint(lance.dataset(str(tmp_path / "f"))) == before
    assert physical_fingerprint(lance.dataset(str(tmp_path / "f")).checkout_version(("b", None))) == before
    lance.dataset(str(tmp_path / "f")).delete("id = 'node-00001'")
    assert physical_fingerprint(lance.dataset(str(tmp_path / "f"))) != before
