"""Id validation: duplicates and nulls found exactly, whatever the memory limit; stable digests."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import omnigraph.migrator.executors as validate
from omnigraph.migrator.layout import physical_fingerprint

STABLE_DIGEST = "f864ac71e2414e807d21c3fa6d80c456d9f36e45417ad362525c6741a56a2c89"
IDS = [f"node-{i:05d}" for i in range(3000)] + ["node-00007", "node-00007", "node-02999", "é", "é", ""]


def _dataset(path: Path, ids: list[str | None]) -> lance.LanceDataset:
    return lance.write_dataset(pa.table({"id": pa.array(ids, pa.utf8())}), str(path), max_rows_per_file=700)


@pytest.mark.parametrize("memory_limit", ["256MB", "32MB"])
def test_duplicates_and_nulls_are_found_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_limit: str) -> None:
    monkeypatch.setattr(validate, "MEMORY_LIMIT", memory_limit)
    report = validate.validate_image(_dataset(tmp_path / "t", [*IDS, None, None]))
    assert report.duplicates == [("node-00007", 3), ("node-02999", 2), ("é", 2)]
    assert report.null_ids == 2 and report.rows == len(IDS) + 2 and not report.clean


def test_the_digest_ignores_order_and_partitioning_but_not_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forward = validate.validate_image(_dataset(tmp_path / "a", IDS)).digest
    monkeypatch.setattr(validate, "MEMORY_LIMIT", "32MB")
    backward = validate.validate_image(_dataset(tmp_path / "b", list(reversed(IDS)))).digest
    changed = validate.validate_image(_dataset(tmp_path / "c", [*IDS[:-1], "other"])).digest
    assert forward == backward != changed


def test_the_digest_is_stable_across_releases_of_its_hash(tmp_path: Path) -> None:
    """Digests recorded in a ledger are compared later: the pinned DuckDB hash must not change."""
    report = validate.validate_image(_dataset(tmp_path / "s", [*IDS, None]))
    assert report.digest == STABLE_DIGEST


def test_duplicates_in_a_large_image_are_found_exactly(tmp_path: Path) -> None:
    ids = [f"big-{i:07d}" for i in range(50_000)]
    clean = validate.validate_image(_dataset(tmp_path / "clean", ids))
    assert clean.clean and clean.rows == 50_000
    broken = validate.validate_image(_dataset(tmp_path / "broken", [*ids, "big-0012345", "big-0000000", "big-0000000"]))
    assert broken.duplicates == [("big-0000000", 3), ("big-0012345", 2)] and broken.rows == 50_003
    assert broken.digest != clean.digest


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
