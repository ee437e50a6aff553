"""Rows to physical Arrow tables, and stored Arrow tables back to JSONL records."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from lance.blob import BlobType as LanceBlobType
from lance.blob import blob_array

from omnigraph.engine.records.rows import EdgeRow, NodeRow
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.values import export_value


def rows_to_arrow(table: TableDef, rows: list[NodeRow] | list[EdgeRow], with_pk: bool) -> pa.Table:
    """A table with schema ``table.arrow_schema(with_pk)`` holding ``rows`` in the given order."""
    schema = table.arrow_schema(with_pk)
    columns: dict[str, list[Any]] = {"id": [row.id for row in rows]}
    if table.kind == "edge":
        columns["src"] = [row.src for row in rows]  # type: ignore[union-attr]
        columns["dst"] = [row.dst for row in rows]  # type: ignore[union-attr]
    for prop in table.properties:
        columns[prop.name] = [row.values[prop.name] for row in rows]
    arrays = [_array(columns[field.name], field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _array(values: list[Any], arrow_type: pa.DataType) -> pa.Array:
    """One column of coerced values (a Blob column from ``lance.blob.Blob`` values)."""
    return blob_array(values) if isinstance(arrow_type, LanceBlobType) else pa.array(values, type=arrow_type)


def arrow_to_records(table: TableDef, arrow_table: pa.Table) -> list[str]:
    """One JSON line (no newline) per row of ``arrow_table``, in its order.

    Nodes: ``{"type": T, "data": {...}}``; edges: ``{"edge": E, "from": src, "to": dst,
    "data": {...}}``. ``data`` holds ``id`` first, then the non-null properties in declaration
    order, as :func:`omnigraph.engine.schema.values.export_value` spells them (a Blob column holds its
    cells' spellings already, as Utf8). Columns are read by name.
    """
    ids = arrow_table.column("id").to_pylist()
    props = [(prop, arrow_table.column(prop.name).to_pylist()) for prop in table.properties]
    if table.kind == "edge":
        sources = arrow_table.column("src").to_pylist()
        targets = arrow_table.column("dst").to_pylist()
    lines: list[str] = []
    for index, row_id in enumerate(ids):
        data: dict[str, Any] = {"id": row_id}
        for prop, column in props:
            if column[index] is not None:
                data[prop.name] = export_value(prop.type, column[index])
        if table.kind == "node":
            record: dict[str, Any] = {"type": table.type_name, "data": data}
        else:
            record = {"edge": table.type_name, "from": sources[index], "to": targets[index], "data": data}
        lines.append(json.dumps(record, ensure_ascii=False))
    return lines
