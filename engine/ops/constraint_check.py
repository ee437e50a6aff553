"""The schema's row constraints on a write's result: value rules, composite ``@unique``, ``@card``.

A write is described as :mod:`omnigraph.engine.ops.merge_check` describes it: per table the ids it
inserts, updates (replaces) and deletes (:class:`~omnigraph.engine.ops.merge_diff.TableChanges`) and the
rows it brings in (``incoming``, physical schema), put into the target snapshot's images. Checked
before anything is armed (every caller runs this in its ``prepare``):

* every incoming row keeps its type's ``@range``/``@check`` rules (nulls exempt);
* every composite ``@unique(p, q)`` value an incoming row has (no member null) is used by no other
  row of the resulting table: neither another incoming row nor a committed row the write keeps;
* for every edge type ``E: A -> B @card(min..max)``, every ``A`` node the write touches (an
  incoming ``A`` row, the source of an incoming ``E`` edge, or of a committed ``E`` edge it replaces
  or deletes) that the result keeps is the source of between ``min`` and ``max`` ``E`` edges of the
  result (committed edges kept plus incoming ones). A deleted source node is exempt.

Each failure is one problem document ``{table_key, id, kind, ..., fix}``, ``kind`` one of
``range_violation``, ``check_violation``, ``unique_violation`` (``property`` names the members,
``value`` their values) and ``cardinality_violation`` (``table_key``/``id`` the source node,
``edge``, ``count``, ``cardinality`` and ``via``: the edge ids of the write that touch it); each
also has ``what``, the problem in words after its type and id.
Reads: per constrained table, the committed rows that share a first member value with an
incoming one, and per constrained edge type the committed ``id``/``src`` of the touched sources.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import BranchSnapshot, TableEntry
from omnigraph.engine.ops.merge_diff import TableChanges
from omnigraph.engine.schema.catalog import TableDef
from omnigraph.engine.schema.constraints import table_violations
from omnigraph.engine.storage.lance_io import open_pinned

Problem = dict[str, Any]


def read_matching(graph: Graph, entry: TableEntry, columns: list[str], column: str, values: list[Any]) -> pa.Table:
    """The ``columns`` of the committed rows of ``entry`` whose ``column`` is one of ``values``."""
    dataset = open_pinned(graph.store, entry.image)
    wanted = pa.array(values, dataset.schema.field(column).type)
    return dataset.to_table(columns=columns, filter=pc.field(column).isin(wanted))


def _value_rules(graph: Graph, incoming: dict[str, pa.Table], source: str, target: str) -> list[Problem]:
    problems: list[Problem] = []
    for table_key, rows in incoming.items():
        table = graph.catalog.table(table_key)
        if not table.has_value_rules or rows.num_rows == 0:
            continue
        ids = rows.column("id").to_pylist()
        for violation in table_violations(table, rows):
            row_id = ids[violation.index]
            problems.append(
                {
                    "table_key": table_key,
                    "id": row_id,
                    "kind": violation.kind,
                    "property": violation.rule.property,
                    "value": violation.value,
                    "rule": violation.rule.describe(),
                    "what": violation.describe(),
                    "fix": f"{violation.describe()}: change {violation.rule.property} of {row_id!r} on {source} before it reaches {target}",
                }
            )
    return problems


def _normal(value: Any) -> Any:
    """Numerically equal floats (``-0.0`` and ``0.0``) are one value, as in ``@key`` ids."""
    return value + 0.0 if isinstance(value, float) else value


def _unique_problem(table_key: str, row_id: str, members: tuple[str, ...], values: tuple[Any, ...], other: str, source: str) -> Problem:
    names = ", ".join(members)
    return {
        "table_key": table_key,
        "id": row_id,
        "kind": "unique_violation",
        "property": names,
        "value": list(values),
        "existing_id": other,
        "what": f"({names}) value {list(values)!r} is already used by id {other!r} (@unique)",
        "fix": f"{table_key} {row_id!r} from {source} and {other!r} would both have ({names}) = {list(values)!r}: change one of them",
    }


def _composite_unique(
    graph: Graph, target: BranchSnapshot, changes: dict[str, TableChanges], incoming: dict[str, pa.Table], source: str
) -> list[Problem]:
    problems: list[Problem] = []
    for table_key, rows in incoming.items():
        table = graph.catalog.table(table_key)
        if not table.composite_unique or rows.num_rows == 0:
            continue
        ids = rows.column("id").to_pylist()
        change = changes.get(table_key)
        replaced = set(ids) | (set(change.deletes) if change else set())
        for members in table.composite_unique:
            owners: dict[tuple[Any, ...], str] = {}
            columns = [rows.column(name).to_pylist() for name in members]
            for row_id, values in sorted(zip(ids, zip(*columns, strict=True), strict=True), key=lambda pair: pair[0]):
                if any(value is None for value in values):
                    continue
                normal = tuple(_normal(value) for value in values)
                if normal in owners:
                    problems.append(_unique_problem(table_key, row_id, members, values, owners[normal], source))
                else:
                    owners[normal] = row_id
            if not owners:
                continue
            firsts = sorted({key[0] for key in owners}, key=repr)
            hits = read_matching(graph, target.table(table_key), ["id", *members], members[0], firsts)
            stored = zip(hits.column("id").to_pylist(), zip(*(hits.column(m).to_pylist() for m in members), strict=True), strict=True)
            for existing_id, values in sorted(stored, key=lambda pair: pair[0]):
                owner = owners.get(tuple(_normal(value) for value in values))
                if owner is not None and existing_id not in replaced:
                    problems.append(_unique_problem(table_key, owner, members, values, existing_id, source))
    return problems


def _touched_sources(
    graph: Graph, target: BranchSnapshot, edge: TableDef, change: TableChanges | None, rows: pa.Table | None, node_rows: pa.Table | None
) -> tuple[dict[str, list[str]], set[str]]:
    """The source node ids an edge type's write touches, each with the write's edge ids from it,
    and the ids of committed edges the write removes (replaced or deleted)."""
    via: dict[str, list[str]] = {}
    removed = set(change.deletes) | set(change.updates) if change else set()
    if rows is not None:
        for edge_id, src in zip(rows.column("id").to_pylist(), rows.column("src").to_pylist(), strict=True):
            via.setdefault(src, []).append(edge_id)
            removed.add(edge_id)
    if change and (change.deletes or change.updates):
        old = read_matching(graph, target.table(edge.table_key), ["id", "src"], "id", sorted(set(change.deletes) | set(change.updates)))
        for edge_id, src in zip(old.column("id").to_pylist(), old.column("src").to_pylist(), strict=True):
            via.setdefault(src, []).append(edge_id)
    if node_rows is not None:
        for node_id in node_rows.column("id").to_pylist():
            via.setdefault(node_id, [])
    return via, removed


def _cardinality(
    graph: Graph, target: BranchSnapshot, changes: dict[str, TableChanges], incoming: dict[str, pa.Table], source: str
) -> list[Problem]:
    problems: list[Problem] = []
    for edge in graph.catalog.tables():
        if edge.kind != "edge" or not edge.cardinality.constrains:
            continue
        node_key = f"node:{edge.from_type}"
        rows = incoming.get(edge.table_key)
        via, removed = _touched_sources(graph, target, edge, changes.get(edge.table_key), rows, incoming.get(node_key))
        node_change = changes.get(node_key)
        for node_id in node_change.deletes if node_change else ():
            via.pop(node_id, None)
        if not via:
            continue
        counts: Counter[str] = Counter()
        kept = read_matching(graph, target.table(edge.table_key), ["id", "src"], "src", sorted(via))
        for edge_id, src in zip(kept.column("id").to_pylist(), kept.column("src").to_pylist(), strict=True):
            if edge_id not in removed:
                counts[src] += 1
        if rows is not None:
            counts.update(src for src in rows.column("src").to_pylist() if src in via)
        for node_id in sorted(via):
            count = counts[node_id]
            if edge.cardinality.allows(count):
                continue
            card = edge.cardinality.describe()
            problems.append(
                {
                    "table_key": node_key,
                    "id": node_id,
                    "kind": "cardinality_violation",
                    "edge": edge.type_name,
                    "count": count,
                    "cardinality": card,
                    "via": sorted(via[node_id]),
                    "what": cardinality_text(edge.type_name, count, card),
                    "fix": f"{edge.from_type} {node_id!r} would be the source of {count} {edge.type_name} edge(s), "
                    f"outside @card({card}): add or remove {edge.type_name} edges from it in {source}",
                }
            )
    return problems


def cardinality_text(edge_type: str, count: int, card: str) -> str:
    """How a ``@card`` problem reads after the source node's type and id."""
    return f"would be the source of {count} {edge_type} edge(s), outside @card({card})"


def constraint_problems(
    graph: Graph, target: BranchSnapshot, changes: dict[str, TableChanges], incoming: dict[str, pa.Table], source: str
) -> list[Problem]:
    """Every value-rule, composite-``@unique`` and ``@card`` problem of putting ``changes`` (with
    the rows ``incoming``) into ``target`` (see the module docstring); ``source`` names the change
    in the fixes."""
    return (
        _value_rules(graph, incoming, source, target.branch)
        + _composite_unique(graph, target, changes, incoming, source)
        + _cardinality(graph, target, changes, incoming, source)
    )
