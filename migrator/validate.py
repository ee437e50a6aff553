"""Validate one pinned table image: every ``id`` non-null and unique, in bounded memory.

The ``id`` column is streamed from Lance's scanner as Arrow batches into DuckDB, which groups
it under a memory limit (:data:`MEMORY_LIMIT`) and spills to a temporary directory beyond it, so
peak memory does not follow table size:

1. one pass groups the 64-bit DuckDB ``hash`` of every non-null id and counts rows per hash. It
   yields the row count, the null count, the logical digest (row count, null count, and the
   wrapping sum and the xor of the id hashes, each id counted once per row: order-independent)
   and the *candidate* hashes, those seen on more than one row;
2. only if there are candidates, two more passes collect the candidate hashes and group the ids
   themselves whose hash is a candidate, reporting each id on more than one row with its row
   count. Ids are compared exactly here: a hash collision between two distinct ids is a candidate
   that is not reported.

Every duplicate id has a repeated hash, so pass 1 cannot miss one; pass 2 decides equality on the
strings. The digest depends on DuckDB's ``hash`` function, which is why ``duckdb`` is pinned
exactly in ``pyproject.toml``: a digest recorded by one release compares equal under the same
release. The report also carries the physical fingerprint of the image.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import lance
import pyarrow as pa

from omnigraph.engine import __version__
from omnigraph.migrator.fingerprint import physical_fingerprint

if TYPE_CHECKING:
    import duckdb

MEMORY_LIMIT = "128MB"
BATCH_ROWS = 32_768
FRAGMENT_READAHEAD = 1
"""Fragments Lance reads ahead of the one being grouped: each read-ahead fragment's ``id``
column is held in memory, so more would raise peak memory with fragment size, not speed."""
_UINT64 = 1 << 64

_HASH_GROUPS = """
WITH groups AS (
    SELECT h, count(*) AS c
    FROM (SELECT CASE WHEN id IS NULL THEN NULL ELSE hash(id) END AS h FROM ids)
    GROUP BY h
)
SELECT
    coalesce(sum(c), 0)::HUGEINT,
    coalesce(sum(c) FILTER (WHERE h IS NULL), 0)::HUGEINT,
    coalesce(sum(h::HUGEINT * c) FILTER (WHERE h IS NOT NULL), 0)::HUGEINT,
    coalesce(bit_xor(h) FILTER (WHERE h IS NOT NULL AND c % 2 = 1), 0)::UBIGINT,
    count(*) FILTER (WHERE h IS NOT NULL AND c > 1)
FROM groups
"""

_CANDIDATES = (
    "CREATE TEMP TABLE candidates AS SELECT h FROM (SELECT hash(id) AS h FROM ids WHERE id IS NOT NULL) GROUP BY h HAVING count(*) > 1"
)

_DUPLICATES = """
SELECT id::VARCHAR AS id, count(*) AS c
FROM ids
WHERE id IS NOT NULL AND hash(id) IN (SELECT h FROM candidates)
GROUP BY id HAVING count(*) > 1
"""


@dataclass(frozen=True)
class ImageReport:
    """What validating one image found."""

    rows: int
    null_ids: int
    duplicates: list[tuple[str, int]]
    digest: str
    fingerprint: str

    @property
    def clean(self) -> bool:
        return self.null_ids == 0 and not self.duplicates


def _digest(rows: int, null_ids: int, total: int, xor: int) -> str:
    text = f"rows={rows};nulls={null_ids};sum={total % _UINT64};xor={xor}"
    return hashlib.sha256(text.encode()).hexdigest()


def digest_release() -> dict[str, str]:
    """The versions a report depends on: this tool's, DuckDB's (its ``hash`` makes the digest)
    and Lance's (it decides which rows an image holds). Equal releases give equal reports."""
    import duckdb

    return {"omnigraph-fence": __version__, "duckdb": duckdb.__version__, "pylance": lance.__version__}


@contextmanager
def validation_session(threads: int | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """One DuckDB connection (memory limit, spill directory) for validating several images,
    using ``threads`` threads (default: every core of this machine). DuckDB is imported here, by
    the first validation, not by every migrator command."""
    import duckdb

    with tempfile.TemporaryDirectory(prefix="omnigraph-validate-") as spill_dir:
        con = duckdb.connect(
            config={
                "memory_limit": MEMORY_LIMIT,
                "temp_directory": spill_dir,
                "threads": max(1, threads or os.cpu_count() or 1),
                "preserve_insertion_order": False,
            }
        )
        try:
            yield con
        finally:
            con.close()


def _id_reader(dataset: lance.LanceDataset, progress: Callable[[int], None] | None) -> pa.RecordBatchReader:
    """The ``id`` column as one Arrow stream, calling ``progress(rows)`` per batch if given."""
    scanner = dataset.scanner(columns=["id"], batch_size=BATCH_ROWS, fragment_readahead=FRAGMENT_READAHEAD)
    if progress is None:
        return scanner.to_reader()

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in scanner.to_batches():
            progress(batch.num_rows)
            yield batch

    return pa.RecordBatchReader.from_batches(scanner.projected_schema, batches())


def validate_image(
    dataset: lance.LanceDataset,
    progress: Callable[[int], None] | None = None,
    session: duckdb.DuckDBPyConnection | None = None,
) -> ImageReport:
    """Validate the checked-out version of ``dataset`` (see the module docstring).

    ``session`` (from :func:`validation_session`) is reused if given; otherwise one is opened.
    """
    if session is None:
        with validation_session() as own:
            return validate_image(dataset, progress, own)
    con = session.cursor()
    try:
        con.register("ids", _id_reader(dataset, progress))
        (row,) = con.execute(_HASH_GROUPS).fetchall()
        rows, null_ids, total, xor, candidates = (int(value) for value in row)
        duplicates: list[tuple[str, int]] = []
        if candidates:
            con.register("ids", _id_reader(dataset, None))
            con.execute(_CANDIDATES)
            con.register("ids", _id_reader(dataset, None))
            duplicates = [(str(value), int(count)) for value, count in con.execute(_DUPLICATES).fetchall()]
            con.execute("DROP TABLE candidates")
    finally:
        con.close()
    return ImageReport(
        rows=rows,
        null_ids=null_ids,
        duplicates=sorted(duplicates),
        digest=_digest(rows, null_ids, total, xor),
        fingerprint=physical_fingerprint(dataset),
    )
