"""Validation from a receipt gives exactly what a full validation gives, on real Lance tables.

A table with stable row ids and a BTREE on ``id`` (as format-4 tables are made) is validated whole
at a first version; that report is the receipt. Each later version (appends, deletions, updates,
a duplicate of an old id, a duplicate among new rows, a null id, a compaction, a fragment added
then deleted whole) is then validated from the receipt and whole, and every field of the two
reports must agree: rows, null ids, duplicates, digest and its parts, fingerprint. A receipt whose
image no longer has its fingerprint (a table branch deleted and made again) is not derived from.
"""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

from omnigraph.engine.storage.store import GraphStore, open_store
from omnigraph.migrator.executors import ImageReport, validate_image, validation_session
from omnigraph.migrator.layout import PinnedImage
from omnigraph.migrator.receipts import Receipt, derive_report, stand

TABLE = "nodes/Thing"
SCHEMA = pa.schema([pa.field("id", pa.string()), pa.field("n", pa.int64())])


def _rows(ids: list[str | None], start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.string()), "n": pa.array(range(start, start + len(ids)), pa.int64())})


def _image(version: int) -> PinnedImage:
    return PinnedImage(f"{TABLE}@main@v{version}", TABLE, None, version)


def _receipt(report: ImageReport, version: int) -> Receipt:
    return Receipt(_image(version), report.rows, report.digest, report.fingerprint, report.hash_sum, report.hash_xor)


def _same(derived: ImageReport, whole: ImageReport) -> None:
    for name in ("rows", "null_ids", "duplicates", "digest", "fingerprint", "hash_sum", "hash_xor"):
        assert getattr(derived, name) == getattr(whole, name), name


def _derive(store: GraphStore, receipt: Receipt, version: int) -> ImageReport:
    standing = stand(store, _image(version), {receipt.image.image_id: receipt})
    assert not standing.received and standing.delta is not None, standing
    with validation_session(1) as session:
        derived = derive_report(store, standing, session)
    assert derived is not None
    assert derived.delta_from == receipt.image.image_id
    return derived


@pytest.fixture
def table(tmp_path: Path) -> tuple[GraphStore, lance.LanceDataset, Receipt]:
    store = open_store(str(tmp_path / "root"))
    uri = store.dataset_uri(TABLE)
    dataset = lance.write_dataset(_rows([f"t-{i:05d}" for i in range(1000)]), uri, schema=SCHEMA, enable_stable_row_ids=True)
    dataset.create_scalar_index("id", "BTREE")
    dataset = lance.dataset(uri)
    receipt = _receipt(validate_image(dataset), dataset.version)
    assert receipt.rows == 1000
    return store, dataset, receipt


def test_every_kind_of_change_derives_the_full_report(table: tuple[GraphStore, lance.LanceDataset, Receipt]) -> None:
    store, dataset, receipt = table
    uri = dataset.uri
    steps = [
        lambda: lance.write_dataset(_rows([f"new-{i}" for i in range(400)], 5000), uri, mode="append"),
        lambda: lance.dataset(uri).delete("n % 7 = 0"),
        lambda: lance.dataset(uri).merge_insert("id").when_matched_update_all().execute(_rows([f"t-{i:05d}" for i in range(10, 40)], 9000)),
        lambda: lance.write_dataset(_rows(["t-00001", "fresh-a", "fresh-a"], 7000), uri, mode="append"),
        lambda: lance.write_dataset(_rows([None, "fresh-b"], 8000), uri, mode="append"),
        lambda: lance.write_dataset(_rows(["gone-1", "gone-2"], 8500), uri, mode="append"),
        lambda: lance.dataset(uri).delete("id IN ('gone-1', 'gone-2')"),
        lambda: lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=1_000_000),
    ]
    for step in steps:
        step()
        current = lance.dataset(uri)
        whole = validate_image(current)
        derived = _derive(store, receipt, current.version)
        _same(derived, whole)
        assert derived.changed_rows is not None and derived.changed_rows > 0
    final = validate_image(lance.dataset(uri))
    assert final.null_ids == 1
    assert dict(final.duplicates) == {"fresh-a": 2, "t-00001": 2}


def test_a_derived_receipt_is_a_base_too(table: tuple[GraphStore, lance.LanceDataset, Receipt]) -> None:
    """Catching up twice: the second round derives from the receipt the first round derived."""
    store, dataset, receipt = table
    lance.write_dataset(_rows(["a-1", "a-2"], 6000), dataset.uri, mode="append")
    first = _derive(store, receipt, lance.dataset(dataset.uri).version)
    second_receipt = _receipt(first, lance.dataset(dataset.uri).version)
    lance.write_dataset(_rows(["a-3", "a-1"], 6100), dataset.uri, mode="append")
    current = lance.dataset(dataset.uri)
    derived = _derive(store, second_receipt, current.version)
    _same(derived, validate_image(current))
    assert derived.duplicates == [("a-1", 2)] and derived.changed_rows == 2


def test_an_unchanged_image_is_received_and_a_foreign_base_is_not_derived_from(
    table: tuple[GraphStore, lance.LanceDataset, Receipt],
) -> None:
    store, dataset, receipt = table
    assert stand(store, receipt.image, {receipt.image.image_id: receipt}).received
    lance.write_dataset(_rows(["b-1"], 6000), dataset.uri, mode="append")
    version = lance.dataset(dataset.uri).version
    # The receipt's image no longer holds its rows (a table branch deleted and made again reuses
    # its version numbers): the same image id with another fingerprint is neither received nor a base.
    other = Receipt(receipt.image, receipt.rows, receipt.digest, "not-" + receipt.fingerprint, receipt.hash_sum, receipt.hash_xor)
    assert not stand(store, other.image, {other.image.image_id: other}).received
    standing = stand(store, _image(version), {other.image.image_id: other})
    assert not standing.received and standing.delta is None and standing.rows_to_read == 1001
