"""Read and validate a whole JSONL input into a :class:`RecordSet`: columnar first, rows if need be.

:func:`read_records` accepts exactly what :func:`omnigraph.engine.records.parse.parse_jsonl` accepts, yields
the same rows, ids (generated ones aside, which are fresh ULIDs in input line order either way)
and line numbers, and refuses with the same error. It reads the input in bounded blocks
(:mod:`omnigraph.engine.records.jsonl_blocks`):

1. each block goes through the columnar fast path (:func:`omnigraph.engine.records.columnar.parse_block`);
2. a block the fast path declines is parsed row by row (:func:`omnigraph.engine.records.parse.parse_lines`);
3. if that refuses a line, or once every block is in, some table repeats an id or an
   ``@unique`` value, the whole input is parsed row by row from its start, which raises the
   first refusal of the file exactly as ``parse_jsonl`` does.

Memory: one block at a time, plus the :class:`RecordSet` (rows spooled within a budget).
"""

from __future__ import annotations

import pyarrow as pa

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.records.columnar import Declined, TableBatch, parse_block
from omnigraph.engine.records.jsonl_blocks import JsonlBlock, JsonlSource, iter_blocks, read_all
from omnigraph.engine.records.parse import EdgeRow, NodeRow, ParsedFile, parse_jsonl, parse_lines, rows_to_arrow
from omnigraph.engine.records.record_set import RecordSet, RowSpool
from omnigraph.engine.schema.catalog import Catalog


def read_records(
    source: JsonlSource,
    catalog: Catalog,
    with_pk: bool,
    *,
    block_bytes: int | None = None,
    spool_budget: int | None = None,
    fallback: bool = True,
) -> RecordSet:
    """The validated records of ``source`` (see the module docstring); the caller closes them.

    ``with_pk`` selects the physical schema (``TableDef.arrow_schema``); ``block_bytes`` is the
    input read at a time (default :data:`omnigraph.engine.records.jsonl_blocks.BLOCK_BYTES`); ``spool_budget``
    bounds the rows held in memory (default :data:`omnigraph.engine.records.record_set.SPOOL_BUDGET_BYTES`). With
    ``fallback=False`` nothing is parsed row by row: where the fast path does not vouch for the
    input, :class:`Declined` is raised instead (this is how the fast path alone is checked
    against the row path).
    """
    records = RecordSet(catalog, RowSpool(spool_budget))
    try:
        line_count = 0
        for block in iter_blocks(source, block_bytes):
            try:
                batches = parse_block(block, catalog, with_pk)
            except Declined:
                if not fallback:
                    raise
                batches = _row_block(source, block, catalog, with_pk)
            for batch in batches:
                records.add(batch)
            line_count = block.first_line + block.line_count - 1
        records.seal(line_count)
        if records.has_duplicates():
            if not fallback:
                raise Declined("a table repeats an id or a @unique value")
            records.close()
            return records_of(_whole_by_rows(source, catalog), catalog, with_pk, spool_budget)
        return records
    except BaseException:
        records.close()
        raise


def _whole_by_rows(source: JsonlSource, catalog: Catalog) -> ParsedFile:
    return parse_jsonl(read_all(source), catalog)


def _row_block(source: JsonlSource, block: JsonlBlock, catalog: Catalog, with_pk: bool) -> list[TableBatch]:
    """The block parsed row by row; a refusal is re-derived from the whole input.

    So the error names the first refused line of the file (a duplicate may start in an earlier
    block).

    A value the row parser accepts but Arrow cannot store (a string with a lone surrogate
    escape) fails the conversion; that failure, too, is re-derived from the whole input: a
    refused line anywhere comes first, then the conversion of the tables in table-key order.
    """
    try:
        parsed = parse_lines(block.lines(), block.first_line, catalog)
    except BadRequest:
        _whole_by_rows(source, catalog)  # raises the file's first refusal
        raise
    try:
        return batches_of(parsed, catalog, with_pk)
    except Exception:
        records_of(_whole_by_rows(source, catalog), catalog, with_pk).close()
        raise


def batches_of(parsed: ParsedFile, catalog: Catalog, with_pk: bool) -> list[TableBatch]:
    """Row-path results as table batches (table-key order)."""
    by_key: dict[str, list[NodeRow] | list[EdgeRow]] = {f"node:{name}": rows for name, rows in parsed.nodes.items()}
    by_key.update({f"edge:{name}": rows for name, rows in parsed.edges.items()})
    batches = []
    for table_key in sorted(by_key):
        table, rows = catalog.table(table_key), by_key[table_key]
        lines = pa.array([row.line for row in rows], pa.int64())
        generated = pa.array([isinstance(row, EdgeRow) and row.generated for row in rows], pa.bool_()) if table.kind == "edge" else None
        batches.append(TableBatch(table_key, rows_to_arrow(table, rows, with_pk), lines, generated))
    return batches


def records_of(parsed: ParsedFile, catalog: Catalog, with_pk: bool, spool_budget: int | None = None) -> RecordSet:
    """A :class:`RecordSet` of row-path results."""
    records = RecordSet(catalog, RowSpool(spool_budget))
    for batch in batches_of(parsed, catalog, with_pk):
        records.add(batch)
    records.seal(parsed.line_count)
    return records
