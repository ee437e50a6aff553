"""Blob cells of rows a keyed write stages (load append/merge, ``.gq`` inserts and updates).

The per-commit Arrow limit (:mod:`omnigraph.engine.ops.limits`) counts a staged table as the Arrow bytes
of its other columns plus the *declared* size of every Blob cell: the length of managed bytes,
the size of an external object (one metadata request each, no payload read). So the limit is
checked before any external payload is read, and blob bytes count once. Then
:func:`copy_external` reads the accepted external objects into the staged cells (Lance's
merge-insert cannot store a reference), and the caller checks the limit again on the copies (an
object may have grown in between). A load overwrite keeps references instead
(:func:`check_references` only proves the objects exist).

A missing external object is ``bad_request`` naming the line (when known), the property, the
id and the URI; nothing has been armed or written at that point. A door that must not read
objects on its caller's behalf (the HTTP server: a URI would make it read its own files or
buckets) refuses every external URI first (:func:`refuse_external`, :data:`BYTES_ONLY`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from lance.blob import Blob, blob_array

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.schema.catalog import TableDef
from omnigraph.engine.schema.types import BlobType
from omnigraph.engine.storage.blobs import ExternalObjectMissing, object_size, read_object

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
    where = {"type_name": table.type_name, "property": name, "id": row_id, "uri": uri}
    if line is not None:
        where["line"] = line
    return BadRequest(
        f"{'' if line is None else f'line {line}: '}{table.type_name}.{name} of id {row_id!r} names the external "
        f'object {uri!r}, which does not exist; upload the object first, or give the bytes inline as "base64:..."',
        where,
    )


def _external_sizes(table: TableDef, rows: pa.Table | pa.RecordBatch, name: str, lines: pa.Array | None) -> list[int | None]:
    """Per row the size of the external object its cell names (None where it names none)."""
    _, uris = _parts(rows, name)
    ids = rows.column("id").to_pylist()
    sizes: list[int | None] = []
    for index, uri in enumerate(uris.to_pylist()):
        if uri is None:
            sizes.append(None)
            continue
        try:
            sizes.append(object_size(uri))
        except ExternalObjectMissing:
            raise _missing(table, name, ids[index], None if lines is None else lines[index].as_py(), uri) from None
    return sizes


def staged_bytes(table: TableDef, rows: pa.Table, lines: pa.Array | None = None) -> int:
    """The bytes the per-commit limit counts for ``rows`` (module docstring); ``lines`` (the input
    line of each row, when there is one) words a missing object."""
    names = blob_properties(table)
    total = rows.drop_columns(names).nbytes if names else rows.nbytes
    for name in names:
        data, _ = _parts(rows, name)
        total += int(pc.sum(pc.binary_length(data)).as_py() or 0)
        total += sum(size for size in _external_sizes(table, rows, name, lines) if size is not None)
    return total


def copy_external(table: TableDef, rows: pa.Table, lines: pa.Array | None = None) -> pa.Table:
    """``rows`` with every external Blob cell replaced by the object's bytes (module docstring)."""
    ids = rows.column("id").to_pylist()
    for name in blob_properties(table):
        data, uris = _parts(rows, name)
        if uris.null_count == len(uris):
            continue
        values: list[Blob | None] = []
        for index, (payload, uri) in enumerate(zip(data.to_pylist(), uris.to_pylist(), strict=True)):
            if uri is None:
                values.append(None if payload is None else Blob.from_bytes(payload))
                continue
            try:
                values.append(Blob.from_bytes(read_object(uri)))
            except ExternalObjectMissing:
                raise _missing(table, name, ids[index], None if lines is None else lines[index].as_py(), uri) from None
        rows = rows.set_column(rows.schema.get_field_index(name), rows.schema.field(name), blob_array(values))
    return rows


def check_references(table: TableDef, batches: Iterable[pa.RecordBatch], lines: pa.Array | None = None) -> None:
    """Every external object the rows name exists (an overwrite stores the references as they are)."""
    for batch, name, batch_lines in _blob_columns(table, batches, lines):
        _external_sizes(table, batch, name, batch_lines)
