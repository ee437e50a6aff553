"""Receipts of validated images, and validation of a moved image from the rows changed since its receipt.

A table image pinned at (table path, table branch, version) does not change while writers go on;
what changes is which image each branch pins. ``omnigraph-migrate prepare`` validates every pinned
image online and records a *receipt* for it: its ``image_validated`` ledger record (row count, null
and duplicate counts, id digest and its parts, physical fingerprint). The cutover, under the
barrier, validates only what moved since.

Receipts (:func:`receipts`): the clean ``image_validated`` records of a migration, the last one per
image id (an image later found broken has none). A receipt holds for an image only while the
image's physical fingerprint (:func:`~omnigraph.migrator.layout.physical_fingerprint`) equals the
receipt's: a Lance table branch deleted and created again reuses version numbers for other rows,
and its fingerprint differs. Receipts hold only with the schema they were taken with
(:mod:`omnigraph.migrator.schema_receipt`): each validation records that identity first, and the
records taken with an earlier schema (before ``receipts_from``) are not receipts any more.

Validation of the plan's images (:func:`validate_plan_images`), each distinct image once:

* an image whose receipt holds is skipped;
* an image with a *base*, a receipt of the same table path and table branch at an older version
  whose image still has the receipt's fingerprint, is validated from it (:func:`derive_report`);
* any other image is validated whole, on the migration's executor
  (:mod:`omnigraph.migrator.executors`).

Validation from a base receipt R to image N. Lance never rewrites a data file in place, so the
fragments of the two versions, compared by fragment id, say which rows changed:

* a fragment of N that R does not have, or has with other data files, holds added (or rewritten)
  rows: all of its live rows in N are read;
* a fragment of R that N does not have, or has with other data files, lost all its rows: its live
  rows in R are read;
* a fragment with the same data files and another deletion file lost the rows deleted since: its
  ``id`` and stable row id are read in R, its row ids in N, and the rows of R missing from N are
  the removed ones.

N's row count, null count and the wrapping sum and xor of its id hashes are then R's, minus the
removed rows', plus the added rows' (DuckDB ``hash``, as a full validation computes them), so N's
digest is the one a full validation gives; if the row count disagrees with N's, N is validated
whole instead. Every distinct added id is probed in N (a filter on ``id``: the table's BTREE
serves its indexed fragments, only unindexed ones are scanned): an id on more than one row of N
is a duplicate, reported with its row count. R was clean (no null, no duplicate), so every
duplicate of N involves an added row and none is missed. The reads follow the changed fragments,
not the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import lance
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.storage.lance_io import open_pinned
from omnigraph.ledger.ledger import LedgerReplay
from omnigraph.ledger.records import ImageValidated
from omnigraph.migrator.executors import ImageReport, default_parallel, fan_out, id_digest, validation_session
from omnigraph.migrator.layout import PinnedImage, physical_fingerprint
from omnigraph.migrator.schema_receipt import take_schema

if TYPE_CHECKING:
    import duckdb

    from omnigraph.engine.storage.store import GraphStore
    from omnigraph.migrator.claim import Migration
    from omnigraph.migrator.plan import MigrationPlan

PROBE_IDS = 4096
"""Distinct added ids probed in one filter."""
_UINT64 = 1 << 64

_HASH_TOTALS = """
SELECT
    count(*)::HUGEINT,
    count(*) FILTER (WHERE id IS NULL)::HUGEINT,
    coalesce(sum(hash(id)::HUGEINT) FILTER (WHERE id IS NOT NULL), 0)::HUGEINT,
    coalesce(bit_xor(hash(id)) FILTER (WHERE id IS NOT NULL), 0)::UBIGINT
FROM rows_of
"""


@dataclass(frozen=True)
class Receipt:
    """A clean validated image: where it is and what its ids add up to."""

    image: PinnedImage
    rows: int
    digest: str
    fingerprint: str
    hash_sum: int | None
    hash_xor: int | None

    @property
    def derivable(self) -> bool:
        """True if a later image of its table can be validated from it (its hash parts were recorded)."""
        return self.hash_sum is not None and self.hash_xor is not None


def receipts(replay: LedgerReplay, receipts_from: int = 1) -> dict[str, Receipt]:
    """The receipts of a migration by image id: its last ``image_validated`` per image, if clean.

    Only records from sequence number ``receipts_from`` on count (those taken with the schema now).
    """
    found: dict[str, Receipt] = {}
    for seq, record in replay.records:
        if seq < receipts_from or not isinstance(record, ImageValidated):
            continue
        if record.null_ids or record.duplicate_ids:
            found.pop(record.image_id, None)
            continue
        image = PinnedImage(record.image_id, record.table_path, record.table_branch, record.table_version)
        found[record.image_id] = Receipt(image, record.rows, record.digest, record.fingerprint, record.hash_sum, record.hash_xor)
    return found


@dataclass(frozen=True)
class ImageDelta:
    """What changed in one table between a base receipt's image and a later image."""

    base: Receipt
    added_fragments: tuple[int, ...]
    removed_fragments: tuple[int, ...]
    thinned_fragments: tuple[int, ...]
    """Fragments with the same data files in both and more rows deleted in the later image."""
    rows_to_read: int


@dataclass(frozen=True)
class ImageStanding:
    """How one pinned image stands against the receipts: received, derivable from a base, or to validate whole."""

    image: PinnedImage
    fingerprint: str
    rows: int
    received: bool
    delta: ImageDelta | None

    @property
    def rows_to_read(self) -> int:
        """The rows validating it reads now: none if received, the changed ones from a base, else all."""
        if self.received:
            return 0
        return self.delta.rows_to_read if self.delta is not None else self.rows


def _fragments(dataset: lance.LanceDataset) -> dict[int, dict[str, Any]]:
    """Every fragment's metadata, by fragment id."""
    return {int(meta["id"]): meta for meta in (fragment.metadata.to_json() for fragment in dataset.get_fragments())}


def _files(meta: dict[str, Any]) -> list[tuple[str, Any]]:
    return sorted((f["path"], f.get("file_size_bytes")) for f in meta["files"])


def _live_rows(meta: dict[str, Any]) -> int:
    deletion = meta.get("deletion_file")
    return int(meta["physical_rows"]) - (int(deletion["num_deleted_rows"] or 0) if deletion else 0)


def _delta(base: Receipt, base_dataset: lance.LanceDataset, dataset: lance.LanceDataset) -> ImageDelta:
    """Which fragments changed from the base receipt's image to ``dataset``."""
    before, after = _fragments(base_dataset), _fragments(dataset)
    added = sorted(fid for fid, meta in after.items() if fid not in before or _files(before[fid]) != _files(meta))
    removed = sorted(fid for fid, meta in before.items() if fid not in after or _files(after[fid]) != _files(meta))
    thinned = sorted(
        fid
        for fid, meta in after.items()
        if fid in before and fid not in added and meta.get("deletion_file") != before[fid].get("deletion_file")
    )
    rows = sum(_live_rows(after[fid]) for fid in added) + sum(_live_rows(before[fid]) for fid in removed)
    rows += sum(_live_rows(before[fid]) + _live_rows(after[fid]) for fid in thinned)
    return ImageDelta(base, tuple(added), tuple(removed), tuple(thinned), rows)


def _base_for(image: PinnedImage, found: dict[str, Receipt]) -> list[Receipt]:
    """Receipts of the same table branch at older versions, newest first, that can be derived from."""
    return sorted(
        (
            r
            for r in found.values()
            if r.derivable
            and r.image.table_path == image.table_path
            and r.image.table_branch == image.table_branch
            and r.image.table_version < image.table_version
        ),
        key=lambda r: -r.image.table_version,
    )


def stand(store: GraphStore, image: PinnedImage, found: dict[str, Receipt]) -> ImageStanding:
    """How ``image`` stands against the receipts ``found`` (reads fragment metadata only)."""
    dataset = open_pinned(store, image.image)
    fingerprint = physical_fingerprint(dataset)
    rows = dataset.count_rows()
    receipt = found.get(image.image_id)
    if receipt is not None and receipt.fingerprint == fingerprint:
        return ImageStanding(image, fingerprint, rows, True, None)
    for base in _base_for(image, found)[:1]:
        try:
            base_dataset = open_pinned(store, base.image.image)
        except (ValueError, OSError):
            continue  # the base version is gone (cleaned up, or its table branch deleted)
        if physical_fingerprint(base_dataset) == base.fingerprint:
            return ImageStanding(image, fingerprint, rows, False, _delta(base, base_dataset, dataset))
    return ImageStanding(image, fingerprint, rows, False, None)


def stand_all(store: GraphStore, images: list[PinnedImage], found: dict[str, Receipt]) -> list[ImageStanding]:
    """:func:`stand` for every image, in their order, :func:`default_parallel` at a time."""
    return fan_out(lambda image: stand(store, image, found), images, default_parallel(store))


def _totals(con: duckdb.DuckDBPyConnection, ids: pa.Table) -> tuple[int, int, int, int]:
    """(rows, null ids, hash sum, hash xor) of the ``id`` column of ``ids``."""
    cursor = con.cursor()
    try:
        cursor.register("rows_of", ids)
        (row,) = cursor.execute(_HASH_TOTALS).fetchall()
    finally:
        cursor.close()
    rows, nulls, total, xor = (int(value) for value in row)
    return rows, nulls, total, xor


def _ids(dataset: lance.LanceDataset, fragment_ids: tuple[int, ...], *, with_row_id: bool = False) -> pa.Table:
    """The ``id`` column of the live rows of those fragments of ``dataset`` (with ``_rowid`` if asked)."""
    fragments = []
    for fid in fragment_ids:
        fragment = dataset.get_fragment(fid)
        if fragment is None:
            raise ValueError(f"fragment {fid} is not in version {dataset.version} of {dataset.uri}")
        fragments.append(fragment)
    if not fragments:
        schema = pa.schema([dataset.schema.field("id")] + ([pa.field("_rowid", pa.uint64())] if with_row_id else []))
        return schema.empty_table()
    return dataset.scanner(columns=["id"], fragments=fragments, with_row_id=with_row_id).to_table()


def _removed_by_deletion(base: lance.LanceDataset, dataset: lance.LanceDataset, fragment_ids: tuple[int, ...]) -> pa.Table:
    """The ``id`` of the rows of those fragments live in ``base`` and deleted in ``dataset`` (by stable row id)."""
    before = _ids(base, fragment_ids, with_row_id=True)
    after = _ids(dataset, fragment_ids, with_row_id=True)
    gone = pc.invert(pc.is_in(before["_rowid"], value_set=after["_rowid"]))
    return before.filter(gone).select(["id"])


def _duplicates(dataset: lance.LanceDataset, added: pa.Table) -> list[tuple[str, int]]:
    """Each distinct non-null added id on more than one row of ``dataset``, with its row count."""
    distinct = pc.unique(pc.drop_null(added["id"]))
    found: list[tuple[str, int]] = []
    for start in range(0, len(distinct), PROBE_IDS):
        chunk = distinct[start : start + PROBE_IDS]
        rows = dataset.to_table(columns=["id"], filter=pc.field("id").isin(chunk))
        counts = pc.value_counts(rows["id"])
        found += [(str(entry["values"]), int(entry["counts"])) for entry in counts.to_pylist() if entry["counts"] > 1]
    return sorted(found)


def derive_report(
    store: GraphStore, standing: ImageStanding, session: duckdb.DuckDBPyConnection, progress: Callable[[int], None] | None = None
) -> ImageReport | None:
    """The report of ``standing``'s image validated from its base receipt, or None if its counts disagree.

    None means the image must be validated whole (see the module docstring).
    """
    delta = standing.delta
    assert delta is not None and delta.base.hash_sum is not None and delta.base.hash_xor is not None
    base_dataset = open_pinned(store, delta.base.image.image)
    dataset = open_pinned(store, standing.image.image)
    added = _ids(dataset, delta.added_fragments)
    removed = pa.concat_tables(
        [_ids(base_dataset, delta.removed_fragments), _removed_by_deletion(base_dataset, dataset, delta.thinned_fragments)],
        promote_options="permissive",
    )
    plus_rows, plus_nulls, plus_sum, plus_xor = _totals(session, added)
    minus_rows, minus_nulls, minus_sum, minus_xor = _totals(session, removed)
    rows = delta.base.rows + plus_rows - minus_rows
    null_ids = plus_nulls - minus_nulls
    if rows != standing.rows or null_ids < 0:
        return None
    hash_sum = (delta.base.hash_sum + plus_sum - minus_sum) % _UINT64
    hash_xor = delta.base.hash_xor ^ plus_xor ^ minus_xor
    if progress is not None:
        progress(delta.rows_to_read)
    return ImageReport(
        rows=rows,
        null_ids=null_ids,
        duplicates=_duplicates(dataset, added),
        digest=id_digest(rows, null_ids, hash_sum, hash_xor),
        fingerprint=standing.fingerprint,
        hash_sum=hash_sum,
        hash_xor=hash_xor,
        delta_from=delta.base.image.image_id,
        changed_rows=delta.rows_to_read,
    )


def validate_plan_images(
    m: Migration, plan: MigrationPlan, replay: LedgerReplay, *, retake: bool = False
) -> tuple[dict[str, ImageReport], list[ImageStanding]]:
    """Validate every image of ``plan`` its receipts do not cover, recording one ``image_validated`` each.

    The schema identity the receipts are taken with is recorded first
    (:func:`~omnigraph.migrator.schema_receipt.take_schema`): if ``_schema.pg`` changed since the
    earlier receipts, ``retake`` (``prepare``) sets them aside and validates every image again,
    otherwise it is refused (``SchemaChanged``, before any record). Returns the reports of the
    images validated now (by image id, in image-id order) and how every image of the plan stood
    before. Images with a base receipt are validated from it in this process; the others on the
    migration's executor.
    """
    from omnigraph.migrator.plan import pinned_images

    receipts_from = take_schema(m, replay, retake=retake)
    standings = stand_all(m.store, pinned_images(plan), receipts(replay, receipts_from))
    derivable = [s for s in standings if not s.received and s.delta is not None]
    whole = [s.image for s in standings if not s.received and s.delta is None]
    reports: dict[str, ImageReport] = {}
    if derivable:
        m.progress.start("validating changed rows", sum(s.rows_to_read for s in derivable))
        with validation_session() as session:
            for standing in derivable:
                report = derive_report(m.store, standing, session, m.progress.advance)
                if report is None:
                    whole.append(standing.image)
                else:
                    reports[standing.image.image_id] = report
        m.progress.finish()
    if whole:
        reports.update(m.executor.validate(m.store, sorted(whole, key=lambda image: image.image_id), m.progress))
    images = plan.images()
    for image_id, report in sorted(reports.items()):
        unit = images[image_id][0]
        m.record(
            ImageValidated,
            image_id=image_id,
            table_path=unit.table_path,
            table_branch=unit.pinned_table_branch,
            table_version=unit.pinned_table_version,
            rows=report.rows,
            digest=report.digest,
            fingerprint=report.fingerprint,
            null_ids=report.null_ids,
            duplicate_ids=len(report.duplicates),
            hash_sum=report.hash_sum,
            hash_xor=report.hash_xor,
            delta_from=report.delta_from,
            changed_rows=report.changed_rows,
        )
    return dict(sorted(reports.items())), standings
