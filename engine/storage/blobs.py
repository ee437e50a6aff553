"""Blob payloads: stored Blob cells read from a pinned image, and the external objects Blob URIs name.

A scan of a Lance blob column yields *descriptors* (``kind, position, size, blob_id,
blob_uri``), not bytes; the bytes of a cell come from ``LanceDataset.take_blobs`` by stable row id
(``_rowid``), one file-like :class:`lance.BlobFile` per cell, read lazily. Descriptor kinds of
the pinned Lance (``tests/guards/test_lance_surface.py``): 0 inline, 1 packed, 2 dedicated (all
three: bytes the table manages), 3 external (a reference; ``position``/``size`` 0 for the whole
object). Every function here reads at most one cell's payload at a time, except
:func:`materialize`, whose caller bounds the bytes first (:func:`stored_sizes`).

An external object is named by a ``file://`` or ``s3://`` URI
(:data:`omnigraph.engine.schema.types.EXTERNAL_SCHEMES`); :func:`object_size` and
:func:`read_object` give its size and its bytes. S3 objects are reached with the same settings as
graph roots (the settings of the graph's store, endpoint, region and keys from the environment).
A missing object is :class:`ExternalObjectMissing`; callers word it for their input (line,
property, id).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlparse

import lance
import pyarrow as pa
from lance.blob import Blob, blob_array
from lance.blob import BlobType as LanceBlobType

from omnigraph.engine.errors import NotFound
from omnigraph.engine.storage.store import GraphStore

if TYPE_CHECKING:
    import fsspec


class ExternalObjectMissing(Exception):
    """The object a Blob URI names does not exist (or is not a file)."""

    def __init__(self, uri: str) -> None:
        super().__init__(f"external object {uri!r} does not exist")
        self.uri = uri


def _located(store: GraphStore, uri: str) -> tuple[fsspec.AbstractFileSystem, str]:
    import fsspec  # only a load with external Blob values reaches here

    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        return fsspec.filesystem("s3", **store.s3_fs_kwargs), f"{parsed.netloc}/{parsed.path.lstrip('/')}"
    return fsspec.filesystem("file"), unquote(parsed.path)


def object_size(store: GraphStore, uri: str) -> int:
    """The size in bytes of the object ``uri`` names, read with ``store``'s S3 settings.

    One metadata request; no payload is read.
    """
    fs, path = _located(store, uri)
    try:
        info = fs.info(path)
    except FileNotFoundError:
        raise ExternalObjectMissing(uri) from None
    if info.get("type") != "file":
        raise ExternalObjectMissing(uri)
    return int(info["size"])


def read_object(store: GraphStore, uri: str, at_most: int) -> bytes:
    """The object ``uri`` names, read with ``store``'s S3 settings, :data:`READ_CHUNK` bytes at a time.

    Reading stops once more than ``at_most`` bytes have arrived (at most one chunk more), so an
    object that grew past the caller's limit since it was sized is never read whole; the caller
    refuses a result longer than ``at_most``.
    """
    fs, path = _located(store, uri)
    parts: list[bytes] = []
    size = 0
    try:
        with fs.open(path, "rb") as handle:
            while size <= at_most and (chunk := handle.read(READ_CHUNK)):
                parts.append(chunk)
                size += len(chunk)
    except FileNotFoundError:
        raise ExternalObjectMissing(uri) from None
    return b"".join(parts)


T = TypeVar("T")
ROW_ID = "_rowid"
_GONE = "Not found"
"""How Lance's error for a missing object starts (the pinned Lance's wording)."""
REFERENCE_KIND = 3
"""The descriptor kind of an external reference."""
READ_CHUNK = 1024 * 1024
_TAKE_BATCH = 256
"""Cells opened per ``take_blobs`` call (handles only: payloads are read one at a time)."""


def blob_names(schema: pa.Schema) -> list[str]:
    """The names of the blob columns of a logical (dataset or catalog) schema, in schema order."""
    return [f.name for f in schema if isinstance(f.type, LanceBlobType)]


def whole_reference(descriptor: dict[str, Any] | None) -> str | None:
    """The URI of a descriptor that references a whole external object, else None."""
    if descriptor is None or descriptor["kind"] != REFERENCE_KIND:
        return None
    return str(descriptor["blob_uri"]) if descriptor["position"] == 0 and descriptor["size"] == 0 else None


def cells(dataset: lance.LanceDataset, column: str, row_ids: list[int]) -> Iterator[lance.BlobFile | None]:
    """The cells of ``column`` for ``row_ids`` (stable row ids of ``dataset``), in order; None for a null cell.

    Handles are opened :data:`_TAKE_BATCH` at a time. A referenced external object that is gone is
    ``not_found`` (Lance fails the whole take).
    """
    for start in range(0, len(row_ids), _TAKE_BATCH):
        try:
            taken = dataset.take_blobs(column, ids=row_ids[start : start + _TAKE_BATCH])
        except (OSError, ValueError) as error:
            if _GONE not in str(error):
                raise
            raise NotFound(
                f"a {column} cell references an external object that is gone ({error}); restore the object, or "
                "load the row again with its bytes (a load in merge mode)",
                {"property": column},
            ) from None
        yield from taken


def stored_sizes(dataset: lance.LanceDataset, rows: pa.Table, name: str) -> list[int]:
    """Per row of ``rows`` (descriptors and ``_rowid`` as scanned) the payload bytes of its ``name`` cell (0 for null).

    Sizes are read from the descriptors; a whole-object reference (size unknown to its descriptor)
    is sized by its handle. No payload is read.
    """
    row_ids = rows.column(ROW_ID).to_pylist()
    descriptors = rows.column(name).to_pylist()
    sizes = [0 if d is None or whole_reference(d) is not None else int(d["size"]) for d in descriptors]
    unsized = [index for index, d in enumerate(descriptors) if whole_reference(d) is not None]
    for index, cell in zip(unsized, cells(dataset, name, [row_ids[i] for i in unsized]), strict=True):
        sizes[index] = 0 if cell is None else int(cell.size())
    return sizes


def materialize(dataset: lance.LanceDataset, rows: pa.Table, names: list[str]) -> pa.Table:
    """``rows`` (scanned with ``_rowid``) with blob descriptors replaced by payloads, ``_rowid`` dropped.

    Each blob column's payloads become managed bytes (a reference's bytes are copied: Lance's
    merge-insert cannot keep one). The caller has bounded the bytes (:func:`stored_sizes`).
    """
    row_ids = rows.column(ROW_ID).to_pylist()
    for name in names:
        values = [None if cell is None else Blob.from_bytes(cell.readall()) for cell in cells(dataset, name, row_ids)]
        rows = rows.set_column(rows.schema.get_field_index(name), name, blob_array(values))
    return rows.drop_columns([ROW_ID])


def stored_values(column: pa.ChunkedArray) -> list[Any]:
    """``column.to_pylist()``, except that a materialized Blob column gives ``lance.blob.Blob`` values.

    A Blob column materialized by :func:`materialize` gives ``Blob`` values, as coercion does, so
    that its rows can be staged again.
    """
    if not isinstance(column.type, LanceBlobType):
        values: list[Any] = column.to_pylist()
        return values
    cells = column.combine_chunks().storage.to_pylist()
    return [None if cell is None else Blob.from_bytes(cell["data"]) for cell in cells]


def digest(cell: lance.BlobFile) -> str:
    """The SHA-256 (hex) of one cell's payload, read :data:`READ_CHUNK` bytes at a time."""
    hasher = hashlib.sha256()
    while chunk := cell.read(READ_CHUNK):
        hasher.update(chunk)
    return hasher.hexdigest()


def _each(
    dataset: lance.LanceDataset, rows: pa.Table | pa.RecordBatch, name: str, read: Callable[[lance.BlobFile], T]
) -> list[str | T | None]:
    """Per cell of blob column ``name`` of ``rows`` (scanned with ``_rowid``), what it holds.

    None for null, the URI of a whole-object reference (its object is not opened), else ``read``
    of the cell (one cell at a time).
    """
    descriptors = rows.column(name).to_pylist()
    found: list[str | T | None] = [None if d is None else whole_reference(d) for d in descriptors]
    managed = [i for i, (d, f) in enumerate(zip(descriptors, found, strict=True)) if d is not None and f is None]
    row_ids = rows.column(ROW_ID).to_pylist()
    for index, cell in zip(managed, cells(dataset, name, [row_ids[i] for i in managed]), strict=True):
        assert cell is not None
        found[index] = read(cell)
    return found


def digests(dataset: lance.LanceDataset, rows: pa.Table | pa.RecordBatch, name: str) -> pa.Array:
    """A Utf8 summary of each cell of blob column ``name`` of ``rows`` (scanned with ``_rowid``).

    The summary differs whenever the stored value does: ``sha256:<hex>`` of managed bytes, the URI
    of a whole-object reference (a URI never starts ``sha256:``); null for null. Descriptors alone
    would not do: a rewritten cell may get the same descriptor.
    """
    return pa.array(_each(dataset, rows, name, lambda cell: "sha256:" + digest(cell)), pa.utf8())


def contents(dataset: lance.LanceDataset, rows: pa.Table, name: str) -> list[bytes | str | None]:
    """Each cell of blob column ``name`` of ``rows`` (scanned with ``_rowid``) as what it stores.

    The URI (``str``) of a whole-object reference, else its bytes (a ranged reference gives the
    bytes of its range); None for null.
    """
    return _each(dataset, rows, name, lambda cell: cell.readall())
