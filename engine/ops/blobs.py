"""Blob cells: those a keyed write stages, and one stored cell streamed out (``blob get``).

Staging (load append/merge, ``.gq`` inserts and updates): the per-commit Arrow limit
(:mod:`omnigraph.engine.ops.write`) counts a staged table as the Arrow bytes of its other columns
plus the *declared* size of every Blob cell (:func:`staged_bytes`): the length of managed bytes,
the size of an external object (one metadata request each, no payload read). So the limit is
checked before any external payload is read, and blob bytes count once. A row that counts more
than the limit on its own is not counted: :func:`plan_staging` marks it to be staged alone (a
Lance commit of its own in the same graph commit, :class:`omnigraph.engine.ops.write.AloneRow`),
and every Blob cell of every write, overwrite included, is held to the per-cell limit
(:func:`cell_limit`, ``OMNIGRAPH_BLOB_CELL_MB``). Then :func:`copy_external` reads the accepted
external objects into the staged cells in counted 1 MiB pieces (Lance's merge-insert cannot store
a reference; a row staged alone is copied when its own commit is written), and the caller checks
the limit again on the copies (an object may have grown in between). A load overwrite keeps
references instead (:func:`check_references` proves the objects exist and bounds the managed
cells).

A missing external object is ``bad_request`` naming the line (when known), the property, the
id and the URI; nothing has been armed or written at that point. A door that must not read
objects on its caller's behalf (the HTTP server: a URI would make it read its own files or
buckets) refuses every external URI first (:func:`refuse_external`, :data:`BYTES_ONLY`).

Reading (``blob get``): a cell is addressed by type name (node or edge), id and property, on the
branch's current commit. :func:`open_blob` resolves it and opens the cell (no payload read yet);
a :class:`BlobReader` then yields the bytes :data:`omnigraph.engine.storage.blobs.READ_CHUNK` at
a time, so a cell of any size streams in bounded memory. Refusals, each naming what fixes it:
``not_found`` for an unknown type, property or id, a null cell, or a referenced external object
that is gone; ``bad_request`` for a property that is not a Blob.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from types import TracebackType

import lance
import msgspec
import pyarrow as pa
import pyarrow.compute as pc
from lance.blob import Blob, blob_array

from omnigraph.engine.errors import BadRequest, NotFound, ResourceLimit
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.commit_graph import read_point
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import BlobType
from omnigraph.engine.storage.blobs import READ_CHUNK, ROW_ID, ExternalObjectMissing, cells, object_size, read_object, whole_reference
from omnigraph.engine.storage.store import GraphStore

BYTES_ONLY = (
    "is the external URI {uri!r}; Blob values sent to a server are bytes only (it does not read its own files or "
    'buckets for its callers): send them as "base64:...", or load the file with the command-line '
    "tool where the object may be read"
)
"""The end of the refusal of an external URI where only bytes are taken (``str.format`` over ``uri``)."""


def refuse_external(table: TableDef, batches: Iterable[pa.RecordBatch], lines: pa.Array | None = None) -> None:
    """``bad_request`` for the first Blob cell of the rows that names an external object."""
    for batch, name, batch_lines in _blob_columns(table, batches, lines):
        uris = _parts(batch, name)[1].to_pylist()
        index = next((i for i, uri in enumerate(uris) if uri is not None), None)
        if index is None:
            continue
        line = None if batch_lines is None else batch_lines[index].as_py()
        row_id = batch.column("id")[index].as_py()
        where = {"type_name": table.type_name, "property": name, "id": row_id, **({} if line is None else {"line": line})}
        raise BadRequest(
            f"{'' if line is None else f'line {line}: '}{table.type_name}.{name} of id {row_id!r} " + BYTES_ONLY.format(uri=uris[index]),
            where,
        )


def _blob_columns(
    table: TableDef, batches: Iterable[pa.RecordBatch], lines: pa.Array | None
) -> Iterator[tuple[pa.RecordBatch, str, pa.Array | None]]:
    """Each (batch, Blob property, the batch's input lines) of a stream of ``table``'s rows."""
    names = blob_properties(table)
    if not names:
        return
    offset = 0
    for batch in batches:
        for name in names:
            yield batch, name, None if lines is None else lines.slice(offset, batch.num_rows)
        offset += batch.num_rows


def blob_properties(table: TableDef) -> list[str]:
    """The names of ``table``'s Blob properties, in declaration order."""
    return [prop.name for prop in table.properties if isinstance(prop.type, BlobType)]


def _parts(rows: pa.Table | pa.RecordBatch, name: str) -> tuple[pa.Array, pa.Array]:
    """The ``data`` and ``uri`` children of a staged Blob column."""
    column = rows.column(name)
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    storage = array.storage
    return storage.field("data"), storage.field("uri")


def _missing(table: TableDef, name: str, row_id: str, line: int | None, uri: str) -> BadRequest:
    where: dict[str, str | int] = {"type_name": table.type_name, "property": name, "id": row_id, "uri": uri}
    if line is not None:
        where["line"] = line
    return BadRequest(
        f"{'' if line is None else f'line {line}: '}{table.type_name}.{name} of id {row_id!r} names the external "
        f'object {uri!r}, which does not exist; upload the object first, or give the bytes inline as "base64:..."',
        where,
    )


def _external_sizes(
    store: GraphStore, table: TableDef, rows: pa.Table | pa.RecordBatch, name: str, lines: pa.Array | None
) -> list[int | None]:
    """Per row the size of the external object its cell names (None where it names none)."""
    _, uris = _parts(rows, name)
    ids = rows.column("id").to_pylist()
    sizes: list[int | None] = []
    for index, uri in enumerate(uris.to_pylist()):
        if uri is None:
            sizes.append(None)
            continue
        try:
            sizes.append(object_size(store, uri))
        except ExternalObjectMissing:
            raise _missing(table, name, ids[index], None if lines is None else lines[index].as_py(), uri) from None
    return sizes


def staged_bytes(store: GraphStore, table: TableDef, rows: pa.Table, lines: pa.Array | None = None) -> int:
    """The bytes the per-commit limit counts for ``rows`` (module docstring).

    ``lines`` (the input line of each row, when there is one) words a missing object.
    """
    names = blob_properties(table)
    total: int = rows.drop_columns(names).nbytes if names else rows.nbytes
    for name in names:
        data, _ = _parts(rows, name)
        total += int(pc.sum(pc.binary_length(data)).as_py() or 0)
        total += sum(size for size in _external_sizes(store, table, rows, name, lines) if size is not None)
    return total


def copy_external(store: GraphStore, table: TableDef, rows: pa.Table, lines: pa.Array | None = None) -> pa.Table:
    """``rows`` with every external Blob cell replaced by the object's bytes (module docstring).

    Each object is read :data:`omnigraph.engine.storage.blobs.READ_CHUNK` bytes at a time and
    counted: one that has grown past the per-cell limit (:func:`cell_limit`) since it was sized
    is ``resource_limit`` once the limit is passed, not read whole.
    """
    ids = rows.column("id").to_pylist()
    limit = cell_limit()
    for name in blob_properties(table):
        data, uris = _parts(rows, name)
        if uris.null_count == len(uris):
            continue
        values: list[Blob | None] = []
        for index, (payload, uri) in enumerate(zip(data.to_pylist(), uris.to_pylist(), strict=True)):
            if uri is None:
                values.append(None if payload is None else Blob.from_bytes(payload))
                continue
            line = None if lines is None else lines[index].as_py()
            try:
                copied = read_object(store, uri, limit)
            except ExternalObjectMissing:
                raise _missing(table, name, ids[index], line, uri) from None
            if len(copied) > limit:
                raise _cell_over(table, name, ids[index], line, len(copied), limit, grew=True)
            values.append(Blob.from_bytes(copied))
        rows = rows.set_column(rows.schema.get_field_index(name), rows.schema.field(name), blob_array(values))
    return rows


def check_references(store: GraphStore, table: TableDef, batches: Iterable[pa.RecordBatch], lines: pa.Array | None = None) -> None:
    """An overwrite's Blob cells: every external object they name exists, and every cell of bytes is within :func:`cell_limit`.

    An overwrite stores references as they are, so an object's size is not held to the limit.
    """
    for batch, name, batch_lines in _blob_columns(table, batches, lines):
        _external_sizes(store, table, batch, name, batch_lines)
        given = pc.fill_null(pc.binary_length(_parts(batch, name)[0]), 0).to_pylist()
        check_cells(table, name, batch, [int(size) for size in given], batch_lines)


CELL_LIMIT_ENV = "OMNIGRAPH_BLOB_CELL_MB"
DEFAULT_CELL_MB = 256


def cell_limit() -> int:
    """The per-cell limit in bytes: ``OMNIGRAPH_BLOB_CELL_MB`` MiB (default :data:`DEFAULT_CELL_MB`), read at each write.

    Every Blob cell a write stores is at most this size, in every write mode; a value that is
    not a whole number of MiB of at least 1 is ``bad_request``.
    """
    raw = os.environ.get(CELL_LIMIT_ENV, str(DEFAULT_CELL_MB))
    if not raw.isdigit() or int(raw) < 1:
        raise BadRequest(f"{CELL_LIMIT_ENV}={raw!r}: expected a whole number of MiB, at least 1", {"value": raw})
    return int(raw) * 1024 * 1024


def _cell_over(table: TableDef, name: str, row_id: str, line: int | None, actual: int, limit: int, *, grew: bool = False) -> ResourceLimit:
    where = "" if line is None else f"line {line}: "
    why = "grew while it was copied: " if grew else ""
    needed = -(-actual // (1024 * 1024))
    return ResourceLimit(
        "blob_cell_bytes",
        limit,
        actual,
        f"{where}{table.type_name}.{name} of id {row_id!r} {why}{actual} bytes exceed the per-cell limit of {limit} "
        f"({CELL_LIMIT_ENV}={limit // (1024 * 1024)}); nothing was written. To store it, set {CELL_LIMIT_ENV}={needed} "
        "(or more) and write it again",
        table_key=table.table_key,
        type_name=table.type_name,
        property=name,
        id=row_id,
        **({} if line is None else {"line": line}),
    )


def _cell_sizes(store: GraphStore, table: TableDef, rows: pa.Table | pa.RecordBatch, name: str, lines: pa.Array | None) -> list[int]:
    """Per row the declared size of its ``name`` cell: the bytes given, or the external object's size (0 for null)."""
    data, _ = _parts(rows, name)
    given = pc.fill_null(pc.binary_length(data), 0).to_pylist()
    external = _external_sizes(store, table, rows, name, lines)
    return [int(size) if size is not None else int(length) for length, size in zip(given, external, strict=True)]


def check_cells(table: TableDef, name: str, rows: pa.Table | pa.RecordBatch, sizes: list[int], lines: pa.Array | None = None) -> None:
    """``resource_limit`` for the first cell of ``sizes`` over :func:`cell_limit`."""
    limit = cell_limit()
    index = next((i for i, size in enumerate(sizes) if size > limit), None)
    if index is not None:
        line = None if lines is None else lines[index].as_py()
        raise _cell_over(table, name, rows.column("id")[index].as_py(), line, sizes[index], limit)


class Staging(msgspec.Struct, frozen=True):
    """How a write stages one table's rows against the per-commit Arrow limit ``limit``.

    ``alone`` are the indices (ascending) of the rows staged by themselves: each counts more
    than ``limit`` bytes on its own (its Blob cells by their declared sizes), so it is written
    in a Lance commit of its own, within the same graph commit, and is not counted with the
    others. ``counted`` is what the limit counts of the other rows (:func:`staged_bytes` of them).
    """

    counted: int
    alone: tuple[int, ...]


def plan_staging(store: GraphStore, table: TableDef, rows: pa.Table, limit: int, lines: pa.Array | None = None) -> Staging:
    """The :class:`Staging` of ``rows``, after checking every row can be staged at all.

    Refused first (``resource_limit``, nothing written): a Blob cell over :func:`cell_limit`
    (``blob_cell_bytes``), and a row whose columns other than its Blobs alone exceed ``limit``
    (``arrow_bytes``; no split of the write helps that row). External objects are sized once
    (one metadata request each); no payload is read.
    """
    names = blob_properties(table)
    if not names:
        return Staging(int(rows.nbytes), ())
    per_row = [0] * rows.num_rows
    for name in names:
        sizes = _cell_sizes(store, table, rows, name, lines)
        check_cells(table, name, rows, sizes, lines)
        per_row = [total + size for total, size in zip(per_row, sizes, strict=True)]
    others = rows.drop_columns(names)
    others_total = int(others.nbytes)
    alone: list[int] = []
    for index, blob_bytes in enumerate(per_row):
        if blob_bytes + others_total <= limit:
            continue  # cannot count more than the limit on its own: the other rows' columns are included
        own = int(others.slice(index, 1).nbytes)
        if own > limit:
            line = None if lines is None else lines[index].as_py()
            row_id = rows.column("id")[index].as_py()
            raise ResourceLimit(
                "arrow_bytes",
                limit,
                own,
                f"{'' if line is None else f'line {line}: '}{table.type_name} id {row_id!r}: its properties other than Blobs "
                f"take {own} bytes, over the per-commit limit of {limit} that holds for one row; nothing was written. "
                "Store large values in a Blob property",
                table_key=table.table_key,
                id=row_id,
                **({} if line is None else {"line": line}),
            )
        if own + blob_bytes > limit:
            alone.append(index)
    if not alone:
        return Staging(others_total + sum(per_row), ())
    kept = sorted(set(range(rows.num_rows)) - set(alone))
    counted = int(others.take(pa.array(kept, pa.int64())).nbytes) + sum(per_row[i] for i in kept)
    return Staging(counted, tuple(alone))


def split_alone(rows: pa.Table, staging: Staging) -> tuple[pa.Table, list[pa.Table]]:
    """``rows`` without the rows :class:`Staging` stages alone, and each of those as a table of one row."""
    if not staging.alone:
        return rows, []
    kept = sorted(set(range(rows.num_rows)) - set(staging.alone))
    return rows.take(pa.array(kept, pa.int64())), [rows.slice(index, 1) for index in staging.alone]


class BlobReader:
    """An opened Blob cell of ``size`` bytes, read with :meth:`read` or :meth:`chunks`.

    Close it (or use it as a context manager) when done.
    """

    def __init__(self, cell: lance.BlobFile) -> None:
        self._cell = cell
        self.size = int(cell.size())

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that remain when negative)."""
        return self._cell.read(size)

    def chunks(self, chunk_bytes: int = READ_CHUNK, *, start: int = 0, stop: int | None = None) -> Iterator[bytes]:
        """The bytes from offset ``start`` up to ``stop`` (exclusive; the end when None), ``chunk_bytes`` at a time.

        Closes the cell at the end. The caller keeps ``0 <= start <= stop <= size``.
        """
        try:
            if start:
                self._cell.seek(start)
            left = self.size - start if stop is None else stop - start
            while left > 0 and (chunk := self._cell.read(min(chunk_bytes, left))):
                left -= len(chunk)
                yield chunk
        finally:
            self.close()

    def close(self) -> None:
        """Close the opened cell (:meth:`chunks` closes it once its bytes are read)."""
        self._cell.close()

    def __enter__(self) -> BlobReader:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()


def _table(graph: Graph, type_name: str) -> TableDef:
    uri = graph.store.uri
    for kind in ("node", "edge"):
        if (graph.catalog.has_node if kind == "node" else graph.catalog.has_edge)(type_name):
            return graph.catalog.table(f"{kind}:{type_name}")
    raise NotFound(
        f"the graph has no node or edge type {type_name!r}; `omnigraph schema show {uri}` lists its types",
        {"type_name": type_name},
    )


def _blob_property(table: TableDef, name: str, uri: str) -> None:
    if not table.has_property(name):
        raise NotFound(
            f"{table.type_name} has no property {name!r}; `omnigraph schema show {uri}` lists its properties",
            {"type_name": table.type_name, "property": name},
        )
    ptype = table.property(name).type
    if not isinstance(ptype, BlobType):
        raise BadRequest(
            f"{table.type_name}.{name} is a {ptype}, not a Blob; `omnigraph export --type {table.type_name} {uri}` prints its values",
            {"type_name": table.type_name, "property": name, "type": str(ptype)},
        )


def open_blob(graph: Graph, branch: str, type_name: str, row_id: str, prop: str) -> BlobReader:
    """The cell ``type_name``/``row_id``/``prop`` of ``branch``, opened (see the module docstring)."""
    table = _table(graph, type_name)
    _blob_property(table, prop, graph.store.uri)
    point = read_point(graph.manifest, branch, None)
    where = {"type_name": type_name, "id": row_id, "property": prop, "branch": branch}
    with point.reading(graph.manifest):
        dataset = point.open_images(graph.manifest, [table.table_key])[table.table_key]
        found = dataset.to_table(columns=[prop], filter=pc.field("id") == row_id, with_row_id=True)
        if not found.num_rows:
            raise NotFound(
                f"{type_name} has no id {row_id!r} on branch {branch!r}; `omnigraph export --type {type_name} "
                f"--branch {branch} {graph.store.uri}` lists its rows",
                where,
            )
        descriptor = found.column(prop)[0].as_py()
        if descriptor is None:
            raise NotFound(f"{type_name} {row_id!r} has no {prop} on branch {branch!r} (the cell is null)", where)
        try:
            (cell,) = cells(dataset, prop, [found.column(ROW_ID)[0].as_py()])
        except NotFound as gone:
            raise NotFound(
                f"{type_name} {row_id!r}.{prop} references the external object {whole_reference(descriptor)!r}, which is "
                "gone; restore the object, or load the row again with its bytes (a load in merge mode)",
                {**where, "uri": whole_reference(descriptor)},
            ) from gone
    assert cell is not None
    return BlobReader(cell)
