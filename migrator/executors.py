"""Bounded fan-out of reads, the bounded-memory id validator, and the executor seam.

Fan-out: on an object store every read of a migration is a few requests that mostly wait; a
graph with many branches reads each branch's manifest and tables several times (preflight, plan,
verify, stamp). :func:`fan_out` runs such per-branch or per-table work (or units) ``workers`` at
a time in a bounded pool of threads and returns the results in the order of the inputs, so what
is printed and persisted does not depend on timing. :func:`default_parallel` is how many are in
flight when ``--parallel`` is not given.

Validation (:func:`validate_image`) of one pinned table image: every ``id`` non-null and unique,
in bounded memory. The ``id`` column is streamed from Lance's scanner as Arrow batches into
DuckDB, which groups it under a memory limit (:data:`MEMORY_LIMIT`) and spills to a temporary
directory beyond it, so peak memory does not follow table size:

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
release (:func:`digest_release`). The report also carries the physical fingerprint of the image
(:func:`~omnigraph.migrator.layout.physical_fingerprint`). DuckDB is imported by the first
validation, not by importing this module.

The executor seam: where step 5 of the migration (validate every pinned image) runs. An executor
(:class:`ImageExecutor`) validates pinned images (:class:`~omnigraph.migrator.layout.PinnedImage`)
and returns one :class:`ImageReport` per image, keyed by image id in image-id order. Every executor
keeps one contract: an image's report is exactly what :func:`validate_image` gives for that image
opened in this process (rows, null ids, duplicates, digest, fingerprint), so the ledger records
written from the reports, the duplicate inventory and the exit code do not depend on the
executor. Progress is ``start("validating ids", rows of every image)``, ``advance(rows)`` as rows
are validated, then ``finish()``. An executor writes nothing to the graph or the ledger.

Executors (:data:`~omnigraph.migrator.options.EXECUTORS`): ``local`` validates in this process
(:class:`LocalExecutor`); ``ray`` validates as tasks on a Ray cluster
(:mod:`omnigraph.migrator.ray_executor`, imported only when chosen: it needs the ``[ray]`` extra).
Lifecycle: :func:`open_executor` gives a context manager; ``start()`` acquires what the executor
needs (idempotent; ``validate`` starts it when needed) and the context's exit releases it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import lance
import pyarrow as pa

from omnigraph.engine import __version__
from omnigraph.engine.errors import BadRequest
from omnigraph.engine.progress import Progress
from omnigraph.engine.storage.store import GraphStore
from omnigraph.migrator.layout import VALIDATING, PinnedImage, open_images, physical_fingerprint
from omnigraph.migrator.options import DEFAULT_PARALLEL_LOCAL, DEFAULT_PARALLEL_OBJECT_STORE, EXECUTORS

if TYPE_CHECKING:
    import duckdb

    from omnigraph.engine.manifest.manifest import Manifest
    from omnigraph.engine.manifest.rows import BranchSnapshot


T = TypeVar("T")
R = TypeVar("R")


def default_parallel(store: GraphStore) -> int:
    """How many units (or reads) are in flight on ``store`` when ``--parallel`` is not given."""
    return DEFAULT_PARALLEL_LOCAL if store.is_local else DEFAULT_PARALLEL_OBJECT_STORE


def fan_out(work: Callable[[T], R], items: Sequence[T], workers: int) -> list[R]:
    """``work(item)`` for every item, up to ``workers`` at once, results in the order of ``items``.

    Every item runs (none is cancelled); if any raised, the exception of the first such item in
    the order of ``items`` is raised once all have finished. ``workers`` <= 1, or a single item,
    runs them one after another in this thread.
    """
    if workers <= 1 or len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="fan-out") as pool:
        futures = [pool.submit(work, item) for item in items]
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
    return [future.result() for future in futures]


def read_snapshots(manifest: Manifest, branches: Sequence[str]) -> list[BranchSnapshot]:
    """The latest snapshot of each of ``branches``, in their order, read :func:`default_parallel` at a time.

    A branch that does not exist is ``not_found``.
    """
    return fan_out(manifest.snapshot, branches, default_parallel(manifest.store))


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
    hash_sum: int
    """The wrapping (mod 2**64) sum of the ``hash`` of every non-null id, one term per row."""
    hash_xor: int
    """The xor of the ``hash`` of every non-null id, one term per row."""
    delta_from: str | None = None
    """The receipt (image id) this report was derived from by reading only the rows changed since (None: every row was read)."""
    changed_rows: int | None = None
    """The rows read for a derived report: rows added or rewritten, and rows removed, since ``delta_from``."""

    @property
    def clean(self) -> bool:
        """True if the image has no null id and no duplicate id."""
        return self.null_ids == 0 and not self.duplicates


def id_digest(rows: int, null_ids: int, total: int, xor: int) -> str:
    """The logical digest of an image's ids from its row count, null count, hash sum and hash xor."""
    text = f"rows={rows};nulls={null_ids};sum={total % _UINT64};xor={xor}"
    return hashlib.sha256(text.encode()).hexdigest()


def digest_release() -> dict[str, str]:
    """The versions a report depends on: this tool's, DuckDB's and Lance's.

    DuckDB's ``hash`` makes the digest and Lance decides which rows an image holds. Equal releases
    give equal reports.
    """
    import duckdb

    return {"omnigraph-fence": __version__, "duckdb": duckdb.__version__, "pylance": lance.__version__}


@contextmanager
def validation_session(threads: int | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """One DuckDB connection (memory limit, spill directory) for validating several images.

    It uses ``threads`` threads (default: every core of this machine). DuckDB is imported here, by
    the first validation, not by every migrator command.
    """
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
        digest=id_digest(rows, null_ids, total, xor),
        fingerprint=physical_fingerprint(dataset),
        hash_sum=total % _UINT64,
        hash_xor=xor,
    )


class ImageExecutor(Protocol):
    """Validates pinned images (see the module docstring for the contract)."""

    def start(self) -> None:
        """Acquire what the executor needs; idempotent."""

    def validate(self, store: GraphStore, images: list[PinnedImage], progress: Progress) -> dict[str, ImageReport]:
        """One report per image, keyed by image id in the order of ``images``; starts the executor if needed."""

    def close(self) -> None:
        """Release what :meth:`start` acquired."""


class LocalExecutor:
    """Validates the images one after the other in this process, in one DuckDB session."""

    def start(self) -> None:
        """Nothing to acquire."""
        return None

    def validate(self, store: GraphStore, images: list[PinnedImage], progress: Progress) -> dict[str, ImageReport]:
        """Validate every image in this process, in the order given, in one DuckDB session."""
        datasets = open_images(store, images)
        progress.start(VALIDATING, sum(dataset.count_rows() for dataset in datasets.values()))
        with validation_session() as session:
            reports = {image_id: validate_image(dataset, progress.advance, session) for image_id, dataset in datasets.items()}
        progress.finish()
        return reports

    def close(self) -> None:
        """Nothing to release."""
        return None


@contextmanager
def open_executor(name: str, ray_address: str | None = None) -> Iterator[ImageExecutor]:
    """The executor called ``name`` (one of :data:`EXECUTORS`), released on exit.

    ``ray_address`` is the Ray cluster to connect to (``ray`` only; None starts a private local
    Ray instance). Check :func:`omnigraph.migrator.options.executor_unavailable` first: a missing package raises ImportError.
    """
    executor: ImageExecutor
    if name == "local":
        if ray_address is not None:
            raise BadRequest("a Ray address needs the ray executor", {"executor": name})
        executor = LocalExecutor()
    elif name == "ray":
        from omnigraph.migrator.ray_executor import RayExecutor

        executor = RayExecutor(ray_address)
    else:
        raise BadRequest(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}", {"executor": name})
    try:
        yield executor
    finally:
        executor.close()
