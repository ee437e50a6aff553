"""``blob get``: one Blob cell of a branch, as a stream of its bytes.

The cell is addressed by type name (node or edge), id and property, on the branch's current
commit. :func:`open_blob` resolves it and opens the cell (no payload read yet); a
:class:`BlobReader` then yields the bytes :data:`omnigraph.engine.storage.blobs.READ_CHUNK` at a time,
so a cell of any size streams in bounded memory. Refusals, each naming what fixes it:
``not_found`` for an unknown type, property or id, a null cell, or a referenced external object
that is gone; ``bad_request`` for a property that is not a Blob.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType

import lance
import pyarrow.compute as pc

from omnigraph.engine.errors import BadRequest, NotFound
from omnigraph.engine.graph import Graph
from omnigraph.engine.schema.catalog import TableDef
from omnigraph.engine.schema.types import BlobType
from omnigraph.engine.storage.blobs import READ_CHUNK, ROW_ID, cells, whole_reference
from omnigraph.engine.storage.lance_io import open_pinned


class BlobReader:
    """An opened Blob cell: ``size`` bytes, read with :meth:`read` or :meth:`chunks`; close it
    (or use it as a context manager) when done."""

    def __init__(self, cell: lance.BlobFile) -> None:
        self._cell = cell
        self.size = int(cell.size())

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that remain when negative)."""
        return self._cell.read(size)

    def chunks(self, chunk_bytes: int = READ_CHUNK) -> Iterator[bytes]:
        """The remaining bytes, ``chunk_bytes`` at a time; closes the cell at the end."""
        try:
            while chunk := self._cell.read(chunk_bytes):
                yield chunk
        finally:
            self.close()

    def close(self) -> None:
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
    snapshot = graph.manifest.snapshot(branch)
    where = {"type_name": type_name, "id": row_id, "property": prop, "branch": branch}
    with graph.manifest.reading(branch):
        dataset = open_pinned(graph.store, snapshot.table(table.table_key).image)
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
