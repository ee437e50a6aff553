"""Records: JSONL graph records in and out, validated against the schema, as rows or Arrow tables.

:mod:`~omnigraph.engine.records.parse` is the row-at-a-time reference parser (its typed rows are in
:mod:`~omnigraph.engine.records.rows`), :mod:`~omnigraph.engine.records.read` the load's block reader, which parses
2 MiB blocks columnar (:mod:`~omnigraph.engine.records.columnar`, with the column coercions of
:mod:`~omnigraph.engine.records.columns`) where it can and falls back to the reference parser line by line,
:mod:`~omnigraph.engine.records.jsonl_blocks` splits a file into blocks, :mod:`~omnigraph.engine.records.record_set`
holds a load's validated rows (in memory, or spooled to Arrow files by
:mod:`~omnigraph.engine.records.row_spool`), :mod:`~omnigraph.engine.records.endpoints` checks edge endpoints and
:mod:`~omnigraph.engine.records.arrow` converts rows to Arrow tables and stored tables back to records.
Records import nothing of the engine but :mod:`omnigraph.engine.schema` and :mod:`omnigraph.engine.errors`.
"""

from omnigraph.engine.records.columnar import Declined
from omnigraph.engine.records.endpoints import EdgeEnds, check_edge_endpoints
from omnigraph.engine.records.jsonl_blocks import JsonlSource, iter_blocks
from omnigraph.engine.records.parse import ParsedFile, arrow_to_records, check_endpoints, parse_jsonl, rows_to_arrow
from omnigraph.engine.records.read import read_records, records_of
from omnigraph.engine.records.record_set import RecordSet
from omnigraph.engine.records.rows import EdgeRow, NodeRow

__all__ = [
    "Declined",
    "EdgeEnds",
    "EdgeRow",
    "JsonlSource",
    "NodeRow",
    "ParsedFile",
    "RecordSet",
    "arrow_to_records",
    "check_edge_endpoints",
    "check_endpoints",
    "iter_blocks",
    "parse_jsonl",
    "read_records",
    "records_of",
    "rows_to_arrow",
]
