"""The validated records of one JSONL input, by table, in input order, held for a load.

A load must validate its whole input before it writes anything, so it keeps the validated rows
until the commit. A :class:`RecordSet` holds them in a :class:`RowSpool` (bounded memory,
spilled to temporary files beyond its budget). The columns that checks across rows need are
kept in memory as Arrow arrays: ``id``, the input line of every row, ``src``/``dst`` of edges
and whether their id was generated, and the ``@unique`` properties (composite ``@unique`` members too) (a few tens of bytes per row,
the only memory that grows with the input).

The spool keeps Arrow rows per table in memory while their Arrow size stays within
``budget_bytes`` (all tables together, :data:`SPOOL_BUDGET_BYTES` by default); beyond it, the
oldest in-memory segments are written to Arrow IPC files in a private temporary directory and
dropped from memory. Reading back streams one segment at a time (the last one read is cached,
for the sequential reads a chunked load makes), so memory stays near the budget whatever the
input size. ``close`` removes the files.

Edge endpoint checks on columns (:func:`check_edge_endpoints`): every ``src``/``dst`` must name
a node of the right type. This is the check behind
:func:`omnigraph.engine.records.parse.check_endpoints` and the columnar load: the same refusal
(the first edge by line with a missing endpoint, and the count of every missing reference),
computed with Arrow set membership instead of Python sets.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.records.columnar import TableBatch, compact
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import FLOAT_SCALARS, ScalarType

SPOOL_BUDGET_BYTES = 64 * 1024 * 1024


@dataclass
class _Segment:
    """``rows`` rows of one table: ``table`` while in memory, else the IPC file at ``path``."""

    rows: int
    nbytes: int
    table: pa.Table | None
    path: str | None = None


class RowSpool:
    """Append-only Arrow rows per key, read back by row range or as a stream (module docstring).

    ``budget_bytes`` defaults to :data:`SPOOL_BUDGET_BYTES` (read when the spool is made).
    """

    def __init__(self, budget_bytes: int | None = None) -> None:
        self._budget = SPOOL_BUDGET_BYTES if budget_bytes is None else budget_bytes
        self._segments: dict[str, list[_Segment]] = {}
        self._schemas: dict[str, pa.Schema] = {}
        self._resident: deque[_Segment] = deque()
        self._resident_bytes = 0
        self._directory: str | None = None
        self._cached: tuple[_Segment, pa.Table] | None = None
        self.peak_resident_bytes = 0
        self.spilled_segments = 0

    def append(self, key: str, rows: pa.Table) -> None:
        """Add ``rows`` (the key's schema, fixed by its first append) after the key's rows."""
        if not rows.num_rows:
            return
        self._schemas.setdefault(key, rows.schema)
        segment = _Segment(rows.num_rows, rows.nbytes, rows)
        self._segments.setdefault(key, []).append(segment)
        self._resident.append(segment)
        self._resident_bytes += segment.nbytes
        self.peak_resident_bytes = max(self.peak_resident_bytes, self._resident_bytes)
        while self._resident_bytes > self._budget and self._resident:
            self._spill(self._resident.popleft())

    def _spill(self, segment: _Segment) -> None:
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="omnigraph-load-")
        assert segment.table is not None
        path = os.path.join(self._directory, f"{self.spilled_segments:08d}.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, segment.table.schema) as writer:
            writer.write_table(segment.table)
        segment.path, segment.table = path, None
        self._resident_bytes -= segment.nbytes
        self.spilled_segments += 1

    def _load(self, segment: _Segment) -> pa.Table:
        if segment.table is not None:
            return segment.table
        if self._cached is not None and self._cached[0] is segment:
            return self._cached[1]
        assert segment.path is not None
        with pa.OSFile(segment.path, "rb") as source:
            table = pa.ipc.open_file(source).read_all()
        self._cached = (segment, table)
        return table

    def row_count(self, key: str) -> int:
        """Rows held for ``key`` (0 for a key never added)."""
        return sum(segment.rows for segment in self._segments.get(key, ()))

    def batches(self, key: str, start: int = 0, stop: int | None = None) -> Iterator[pa.RecordBatch]:
        """The key's rows ``[start, stop)`` in order, one segment in memory at a time."""
        stop = self.row_count(key) if stop is None else stop
        position = 0
        for segment in self._segments.get(key, ()):
            low, high = max(start, position), min(stop, position + segment.rows)
            if low < high:
                yield from self._load(segment).slice(low - position, high - low).to_batches()
            position += segment.rows
            if position >= stop:
                return

    def table(self, key: str, start: int, stop: int) -> pa.Table:
        """The key's rows ``[start, stop)`` as one table."""
        return pa.Table.from_batches(list(self.batches(key, start, stop)), schema=self._schemas[key])

    def reader(self, key: str) -> pa.RecordBatchReader:
        """All of the key's rows as a stream (read lazily: for a write of the whole table)."""
        return pa.RecordBatchReader.from_batches(self._schemas[key], self.batches(key))

    def close(self) -> None:
        """Drop every row and remove the spill files."""
        self._segments.clear()
        self._resident.clear()
        self._cached = None
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


CommittedNodeIds = Callable[[str, list[str]], set[str]]
"""``(node_type, sorted ids)`` -> the subset of those ids committed as nodes of that type."""

_NO_IDS = pa.array([], pa.utf8())


class EdgeEnds(msgspec.Struct, frozen=True):
    """One edge table's references: ``src``/``dst`` node ids and each edge's input line."""

    edge_type: str
    from_type: str
    to_type: str
    src: pa.Array
    dst: pa.Array
    lines: pa.Array


def _outside(ids: pa.Array, known: pa.Array) -> pa.Array:
    """The mask of ``ids`` that are not in ``known``."""
    return pc.invert(pc.is_in(ids, value_set=known))


def check_edge_endpoints(
    edges: Sequence[EdgeEnds],
    node_ids: Mapping[str, pa.Array],
    committed_node_ids: CommittedNodeIds,
) -> None:
    """Refuse the first edge (by line, then ``from`` before ``to``) whose endpoint is missing.

    ``node_ids`` holds the node ids of the input by node type. Endpoints not among them are
    looked up with ``committed_node_ids``, called at most once per node type, in type-name
    order, with the sorted distinct ids the input does not hold. The ``BadRequest`` reads
    "line N: missing endpoint: E from|to 'id' is not a T node in the file or the graph";
    ``details["missing_count"]`` counts every missing reference.
    """
    references = []
    for edge in edges:
        references.append((edge.edge_type, "from", edge.from_type, edge.src, edge.lines))
        references.append((edge.edge_type, "to", edge.to_type, edge.dst, edge.lines))
    known = {node_type: ids for node_type, ids in node_ids.items()}
    wanted: dict[str, list[pa.Array]] = {}
    for _, _, node_type, ids, _ in references:
        outside = ids.filter(_outside(ids, known.get(node_type, _NO_IDS)))
        if len(outside):
            wanted.setdefault(node_type, []).append(outside)
    for node_type in sorted(wanted):
        asked = pc.unique(pa.concat_arrays(wanted[node_type])).sort().to_pylist()
        found = sorted(committed_node_ids(node_type, asked) & set(asked))
        known[node_type] = pa.concat_arrays([known.get(node_type, _NO_IDS), pa.array(found, pa.utf8())])
    missing_count = 0
    first: tuple[int, str, str, str, str] | None = None
    for edge_type, end, node_type, ids, lines in references:
        mask = _outside(ids, known.get(node_type, _NO_IDS))
        count = pc.sum(mask).as_py() or 0
        if not count:
            continue
        missing_count += count
        missing_lines, missing_ids = lines.filter(mask), ids.filter(mask)
        at = pc.index(missing_lines, pc.min(missing_lines)).as_py()
        candidate = (missing_lines[at].as_py(), edge_type, end, node_type, missing_ids[at].as_py())
        first = candidate if first is None else min(first, candidate)
    if first is None:
        return
    line, edge_type, end, node_type, node_id = first
    raise BadRequest(
        f"line {line}: missing endpoint: {edge_type} {end} {node_id!r} is not a {node_type} node in the file or the graph",
        {
            "line": line,
            "edge": edge_type,
            "end": end,
            "type_name": node_type,
            "node_id": node_id,
            "missing_count": missing_count,
        },
    )


@dataclass
class _Columns:
    """The in-memory columns of one table (lists of per-batch arrays until :meth:`seal`)."""

    table: TableDef
    parts: dict[str, list[pa.Array]] = field(default_factory=dict)
    sealed: dict[str, pa.ChunkedArray] = field(default_factory=dict)

    def seal(self) -> None:
        """Concatenate each column's arrays into one chunked array (``sealed``) and clear ``parts``."""
        for name, arrays in self.parts.items():
            self.sealed[name] = pa.chunked_array(arrays)
        self.parts.clear()


def _repeats(values: pa.ChunkedArray) -> bool:
    """Whether a value occurs twice in ``values`` (no nulls).

    A strictly increasing column (exported files, generated ids) is settled without hashing.
    """
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
    rows: int = together.num_rows
    return rows > 1 and together.group_by(list(members)).aggregate([]).num_rows != rows


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
            generated = batch.generated if batch.generated is not None else pa.array([False] * batch.rows.num_rows, pa.bool_())
            kept["generated"] = generated
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
        """Rows ``[start, stop)`` of an in-memory column (``id``, ``line``, ``src``, ``dst``, a ``@unique`` member or ``generated``).

        ``generated`` (edge tables) is true where the id was minted because the input named none.

        A copy only when the rows span several input blocks.
        """
        chunked = self._columns[table_key].sealed[name]
        return chunked.slice(start, (len(chunked) if stop is None else stop) - start).combine_chunks()

    def rows(self, table_key: str, start: int, stop: int) -> pa.Table:
        """Rows ``[start, stop)`` of a table, freshly laid out.

        They are laid out as ``pa.array`` lays out exactly these rows (no validity bitmap where
        they hold no null), so that its ``nbytes``, the Arrow size the per-commit limit counts,
        depends on the rows only.
        """
        table = self.spool.table(table_key, start, stop).combine_chunks()
        if table.num_rows:
            table = table.take(pa.array(range(table.num_rows), pa.int64()))
        return pa.Table.from_arrays([compact(column.combine_chunks()) for column in table.columns], schema=table.schema)

    def reader(self, table_key: str) -> pa.RecordBatchReader:
        """Every row of a table as a stream, for a write of the whole table."""
        return self.spool.reader(table_key)

    def has_duplicates(self) -> bool:
        """Whether some table repeats an id, or a non-null ``@unique`` value, single or composite.

        Values compare by key canonical form: numerically equal floats, such as ``-0.0`` and
        ``0.0``, are the same value.
        """
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
