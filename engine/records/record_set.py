"""The validated records of one JSONL input, by table, in input order, held for a load.

Rows live in a :class:`omnigraph.engine.records.row_spool.RowSpool` (bounded memory, spilled to temporary files
beyond its budget). The columns that checks across rows need are kept in memory as Arrow
arrays: ``id``, the input line of every row, ``src``/``dst`` of edges and the ``@unique``
properties (composite ``@unique`` members too) (a few tens of bytes per row, the only memory that grows with the input).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import TracebackType

import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.records.columnar import TableBatch
from omnigraph.engine.records.columns import compact
from omnigraph.engine.records.row_spool import RowSpool
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import FLOAT_SCALARS, ScalarType


@dataclass
class _Columns:
    """The in-memory columns of one table (lists of per-batch arrays until :meth:`seal`)."""

    table: TableDef
    parts: dict[str, list[pa.Array]] = field(default_factory=dict)
    sealed: dict[str, pa.ChunkedArray] = field(default_factory=dict)

    def seal(self) -> None:
        for name, arrays in self.parts.items():
            self.sealed[name] = pa.chunked_array(arrays)
        self.parts.clear()


def _repeats(values: pa.ChunkedArray) -> bool:
    """Whether a value occurs twice in ``values`` (no nulls); a strictly increasing column
    (exported files, generated ids) is settled without hashing."""
    if len(values) < 2:
        return False
    if pc.all(pc.greater(values[1:], values[:-1])).as_py():
        return False
    return len(pc.unique(values)) != len(values)


def _repeats_together(columns: _Columns, members: tuple[str, ...]) -> bool:
    """Whether two rows share the values of every member (rows with a null member are exempt)."""
    parts = {}
    for name in members:
        values = columns.sealed[name]
        if name in columns.table.system_columns:
            parts[name] = values
            continue
        ptype = columns.table.property(name).type
        if isinstance(ptype, ScalarType) and ptype.name in FLOAT_SCALARS:
            values = pc.add(values, pa.scalar(0.0, values.type))
        parts[name] = values
    together = pa.table(parts).drop_null()
    return together.num_rows > 1 and together.group_by(list(members)).aggregate([]).num_rows != together.num_rows


class RecordSet:
    """Validated rows by table key; add with :meth:`add`, then :meth:`seal` before reading.

    A context manager: leaving it (or :meth:`close`) drops the rows and their spill files.
    """

    def __init__(self, catalog: Catalog, spool: RowSpool) -> None:
        self.catalog = catalog
        self.spool = spool
        self.line_count = 0
        self._columns: dict[str, _Columns] = {}

    def add(self, batch: TableBatch) -> None:
        """Append one batch of validated rows (batches of a table arrive in input order)."""
        table = self.catalog.table(batch.table_key)
        columns = self._columns.setdefault(batch.table_key, _Columns(table))
        kept = {"id": batch.rows.column("id"), "line": batch.lines}
        if table.kind == "edge":
            kept["src"], kept["dst"] = batch.rows.column("src"), batch.rows.column("dst")
        for name in table.unique + tuple(m for members in table.composite_unique for m in members):
            kept[name] = batch.rows.column(name)
        for name, column in kept.items():
            array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            columns.parts.setdefault(name, []).append(array)
        self.spool.append(batch.table_key, batch.rows)

    def seal(self, line_count: int) -> None:
        """Finish adding; ``line_count`` is the number of lines of the input."""
        self.line_count = line_count
        for columns in self._columns.values():
            columns.seal()

    def table_keys(self) -> list[str]:
        """Keys of the tables with rows, sorted (byte order)."""
        return sorted(self._columns)

    def load_order(self) -> list[str]:
        """Keys of the tables with rows: node tables by type name, then edge tables by type name."""
        keys = self.table_keys()
        return [k for k in keys if k.startswith("node:")] + [k for k in keys if k.startswith("edge:")]

    def num_rows(self, table_key: str) -> int:
        """Rows of ``table_key`` (sealed records only)."""
        return len(self._columns[table_key].sealed["id"])

    def column(self, table_key: str, name: str, start: int = 0, stop: int | None = None) -> pa.Array:
        """An in-memory column (``id``, ``line``, ``src``, ``dst`` or a ``@unique`` member),
        rows ``[start, stop)`` (a copy only when they span several input blocks)."""
        chunked = self._columns[table_key].sealed[name]
        return chunked.slice(start, (len(chunked) if stop is None else stop) - start).combine_chunks()

    def rows(self, table_key: str, start: int, stop: int) -> pa.Table:
        """Rows ``[start, stop)`` of a table, freshly laid out as ``pa.array`` lays out exactly
        these rows (no validity bitmap where they hold no null), so that its ``nbytes``, the
        Arrow size the per-commit limit counts, depends on the rows only."""
        table = self.spool.table(table_key, start, stop).combine_chunks()
        if table.num_rows:
            table = table.take(pa.array(range(table.num_rows), pa.int64()))
        return pa.Table.from_arrays([compact(column.combine_chunks()) for column in table.columns], schema=table.schema)

    def reader(self, table_key: str) -> pa.RecordBatchReader:
        """Every row of a table as a stream, for a write of the whole table."""
        return self.spool.reader(table_key)

    def has_duplicates(self) -> bool:
        """Whether some table repeats an id, or a non-null ``@unique`` value, single or composite
        (by key canonical form: numerically equal floats, such as ``-0.0`` and ``0.0``, are the
        same value)."""
        for columns in self._columns.values():
            if _repeats(columns.sealed["id"]):
                return True
            for name in columns.table.unique:
                values = columns.sealed[name].drop_null()
                ptype = columns.table.property(name).type
                if isinstance(ptype, ScalarType) and ptype.name in FLOAT_SCALARS:
                    values = pc.add(values, pa.scalar(0.0, values.type))
                if _repeats(values):
                    return True
            for members in columns.table.composite_unique:
                if _repeats_together(columns, members):
                    return True
        return False

    def close(self) -> None:
        """Drop every row and remove the spill files."""
        self._columns.clear()
        self.spool.close()

    def __enter__(self) -> RecordSet:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()
