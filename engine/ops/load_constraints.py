"""A load's checks of the schema's row constraints against committed state, inside ``prepare``.

The value rules (``@range``/``@check``) and in-file duplicates of composite ``@unique`` values
are refused while the file is read (:mod:`omnigraph.engine.records`). What needs committed state is
checked here, per commit:

* strict insert / upsert chunks: composite ``@unique`` against the committed rows the chunk keeps
  and ``@card`` of every source node the chunk touches (:mod:`omnigraph.engine.ops.constraint_check`; an
  upsert's ids count as replacing committed rows of the same id);
* overwrite: ``@card`` of every source node of the result, when the file replaces the edge
  type's table or its source node table (the other side is read from the snapshot).

A refusal is ``bad_request`` "line N: ...; nothing was written" naming the type, the property (or
edge type), the id and the input line (for a ``@card`` problem of a node the file does not
hold: the line of the first of its edges in the file), with every problem in
``details["problems"]``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import BranchSnapshot
from omnigraph.engine.ops.constraint_check import Problem, cardinality_text, constraint_problems
from omnigraph.engine.ops.merge_diff import TableChanges
from omnigraph.engine.records.record_set import RecordSet
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.storage.lance_io import open_pinned

_LOAD = "the load"


def _constrained(catalog: Catalog, table_keys: set[str]) -> bool:
    """Whether a write to ``table_keys`` can break a composite ``@unique`` or a ``@card``."""
    for table in catalog.tables():
        if table.table_key in table_keys and table.composite_unique:
            return True
        if table.kind == "edge" and table.cardinality.constrains and {table.table_key, f"node:{table.from_type}"} & table_keys:
            return True
    return False


def check_chunk_constraints(
    graph: Graph,
    snapshot: BranchSnapshot,
    records: RecordSet,
    ranges: dict[str, tuple[int, int]],
    incoming: dict[str, pa.Table],
    *,
    upsert: bool,
) -> None:
    """Refuse a strict-insert or upsert chunk (rows ``ranges`` of ``records``, as ``incoming``)
    that breaks a composite ``@unique`` or a ``@card`` (see the module docstring)."""
    if not _constrained(graph.catalog, set(incoming)):
        return
    changes = {}
    for table_key, rows in incoming.items():
        ids = rows.column("id").to_pylist()
        changes[table_key] = TableChanges(table_key, updates=ids) if upsert else TableChanges(table_key, inserts=ids)
    problems = constraint_problems(graph, snapshot, changes, incoming, _LOAD)
    if problems:
        raise _refusal(problems, records, ranges)


def check_overwrite_constraints(graph: Graph, snapshot: BranchSnapshot, records: RecordSet) -> None:
    """Refuse an overwrite whose result leaves a source node outside its edge type's ``@card``."""
    in_file = set(records.table_keys())
    problems: list[Problem] = []
    for edge in graph.catalog.tables():
        node_key = f"node:{edge.from_type}"
        if edge.kind != "edge" or not edge.cardinality.constrains or not {edge.table_key, node_key} & in_file:
            continue
        nodes = _ids(graph, snapshot, records, node_key, "id", in_file)
        sources = _ids(graph, snapshot, records, edge.table_key, "src", in_file)
        counts = Counter(sources)
        card = edge.cardinality.describe()
        for node_id in sorted(nodes):
            if not edge.cardinality.allows(counts[node_id]):
                problems.append(
                    {
                        "table_key": node_key,
                        "id": node_id,
                        "kind": "cardinality_violation",
                        "edge": edge.type_name,
                        "count": counts[node_id],
                        "cardinality": card,
                        "via": [],
                        "what": cardinality_text(edge.type_name, counts[node_id], card),
                    }
                )
    if problems:
        ranges = {key: (0, records.num_rows(key)) for key in records.table_keys()}
        raise _refusal(problems, records, ranges)


def _ids(graph: Graph, snapshot: BranchSnapshot, records: RecordSet, table_key: str, column: str, in_file: set[str]) -> list[str]:
    """One column of a table of the result: the file's when it replaces the table, else the snapshot's."""
    if table_key in in_file:
        return list(records.column(table_key, column).to_pylist())
    dataset = open_pinned(graph.store, snapshot.table(table_key).image)
    return list(dataset.to_table(columns=[column]).column(column).to_pylist())


def _line_of(records: RecordSet, ranges: dict[str, tuple[int, int]], table_key: str, column: str, value: str) -> int | None:
    """The input line of the first row of the loaded span of ``table_key`` whose ``column`` is ``value``."""
    if table_key not in ranges:
        return None
    values = records.column(table_key, column, *ranges[table_key])
    at = pc.index(values, pa.scalar(value, pa.utf8())).as_py()
    if at < 0:
        return None
    return int(records.column(table_key, "line", *ranges[table_key])[at].as_py())


def _line(problem: Problem, records: RecordSet, ranges: dict[str, tuple[int, int]]) -> int | None:
    line = _line_of(records, ranges, problem["table_key"], "id", problem["id"])
    if line is None and problem["kind"] == "cardinality_violation":
        line = _line_of(records, ranges, f"edge:{problem['edge']}", "src", problem["id"])
    return line


def _what(problem: Problem) -> str:
    return f"{problem['table_key'].split(':', 1)[1]} {problem['id']!r}: {problem['what']}"


def _refusal(problems: list[Problem], records: RecordSet, ranges: dict[str, tuple[int, int]]) -> BadRequest:
    documented: list[dict[str, Any]] = []
    for problem in problems:
        kept = {key: value for key, value in problem.items() if key != "fix"}
        documented.append({**kept, "line": _line(problem, records, ranges)})
    documented.sort(key=lambda p: (p["line"] is None, p["line"] or 0, p["table_key"], p["id"]))
    first = documented[0]
    more = f" (and {len(documented) - 1} more problems)" if len(documented) > 1 else ""
    where = f"line {first['line']}: " if first["line"] is not None else ""
    details = {
        "line": first["line"],
        "type_name": first["table_key"].split(":", 1)[1],
        "id": first["id"],
        "kind": first["kind"],
        "property": first.get("property", first.get("edge")),
        "problems": json.loads(json.dumps(documented, default=str)),
    }
    return BadRequest(f"{where}{_what(first)}{more}; nothing was written", details)
