"""Validation of a merged result before it is published: edge endpoints, ``@unique`` and the
schema's other row constraints.

The merged image of a table is the target's image with the merge's deletes removed and the
source rows it takes (inserts and updates) put in. Checked, against that image only:

* every edge the merge brings in has its ``src``/``dst`` node in the merged node tables;
* no edge the target keeps points at a node the merge deletes;
* every ``@unique`` value the merge brings in is used by no other row of the merged table;
* the value rules, composite ``@unique`` and ``@card`` (:mod:`omnigraph.engine.ops.constraint_check`).

Each failure is one problem document ``{table_key, id, kind, ..., fix}`` (``kind``
``missing_endpoint``, ``unique_violation`` or one of :mod:`omnigraph.engine.ops.constraint_check`'s;
for a merge, ``fix`` says, naming the branches, what change on which branch removes it); all are
returned, sorted.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import BranchSnapshot
from omnigraph.engine.ops.constraint_check import constraint_problems, read_matching
from omnigraph.engine.ops.merge_diff import TableChanges

Problem = dict[str, Any]


def _node_present(graph: Graph, target: BranchSnapshot, changes: dict[str, TableChanges], node_type: str, ids: set[str]) -> set[str]:
    table_key = f"node:{node_type}"
    change = changes.get(table_key)
    brought = set(change.inserts) | set(change.updates) if change else set()
    removed = set(change.deletes) if change else set()
    present = ids & brought
    lookup = sorted(ids - brought - removed)
    if lookup:
        found = read_matching(graph, target.table(table_key), ["id"], "id", lookup)
        present |= set(found.column("id").to_pylist())
    return present


def _incoming_endpoints(
    graph: Graph, target: BranchSnapshot, changes: dict[str, TableChanges], incoming: dict[str, pa.Table], source: str
) -> list[Problem]:
    problems: list[Problem] = []
    for table_key, rows in incoming.items():
        table = graph.catalog.table(table_key)
        if table.kind != "edge" or rows.num_rows == 0:
            continue
        for column, node_type in (("src", str(table.from_type)), ("dst", str(table.to_type))):
            values = rows.column(column).to_pylist()
            present = _node_present(graph, target, changes, node_type, set(values))
            for edge_id, endpoint in zip(rows.column("id").to_pylist(), values, strict=True):
                if endpoint not in present:
                    problems.append(
                        {
                            "table_key": table_key,
                            "id": edge_id,
                            "kind": "missing_endpoint",
                            "column": column,
                            "node_type": node_type,
                            "node_id": endpoint,
                            "fix": f"{source} brings edge {edge_id} whose {column} is {node_type} {endpoint!r}, which "
                            f"{target.branch} does not have after the merge: insert that node on {target.branch} "
                            f"(or on {source}), or delete the edge on {source}",
                        }
                    )
    return problems


def _kept_edges_to_deleted_nodes(graph: Graph, target: BranchSnapshot, changes: dict[str, TableChanges], source: str) -> list[Problem]:
    problems: list[Problem] = []
    for edge_key in graph.catalog.table_keys():
        table = graph.catalog.table(edge_key)
        if table.kind != "edge":
            continue
        edge_change = changes.get(edge_key)
        replaced = set(edge_change.deletes) | set(edge_change.updates) if edge_change else set()
        for column, node_type in (("src", str(table.from_type)), ("dst", str(table.to_type))):
            node_change = changes.get(f"node:{node_type}")
            if node_change is None or not node_change.deletes:
                continue
            hits = read_matching(graph, target.table(edge_key), ["id", column], column, node_change.deletes)
            for edge_id, endpoint in zip(hits.column("id").to_pylist(), hits.column(column).to_pylist(), strict=True):
                if edge_id not in replaced:
                    problems.append(
                        {
                            "table_key": edge_key,
                            "id": edge_id,
                            "kind": "missing_endpoint",
                            "column": column,
                            "node_type": node_type,
                            "node_id": endpoint,
                            "fix": f"edge {edge_id} on {target.branch} has {column} {node_type} {endpoint!r}, which "
                            f"{source} deletes: delete the edge on {target.branch}, or undo the delete on {source}",
                        }
                    )
    return problems


def _unique_fix(table_key: str, row_id: str, prop: str, value: Any, existing_id: str, source: str, target: str) -> str:
    return (
        f"{table_key} {row_id!r} from {source} and {existing_id!r} would both have {prop} {value!r}: change "
        f"{prop} of one of them (on {source} or {target})"
    )


def _unique_values(
    graph: Graph, target: BranchSnapshot, changes: dict[str, TableChanges], incoming: dict[str, pa.Table], source: str
) -> list[Problem]:
    problems: list[Problem] = []
    for table_key, rows in incoming.items():
        table = graph.catalog.table(table_key)
        change = changes[table_key]
        replaced = set(change.deletes) | set(change.inserts) | set(change.updates)
        ids = rows.column("id").to_pylist()
        for prop in table.unique:
            owners: dict[Any, str] = {}
            for row_id, value in sorted(zip(ids, rows.column(prop).to_pylist(), strict=True), key=lambda pair: pair[0]):
                if value is None:
                    continue
                if value in owners:
                    problems.append(
                        {
                            "table_key": table_key,
                            "id": row_id,
                            "kind": "unique_violation",
                            "property": prop,
                            "value": value,
                            "existing_id": owners[value],
                            "fix": _unique_fix(table_key, row_id, prop, value, owners[value], source, target.branch),
                        }
                    )
                else:
                    owners[value] = row_id
            if not owners:
                continue
            hits = read_matching(graph, target.table(table_key), ["id", prop], prop, list(owners))
            for existing_id, value in zip(hits.column("id").to_pylist(), hits.column(prop).to_pylist(), strict=True):
                if existing_id not in replaced:
                    problems.append(
                        {
                            "table_key": table_key,
                            "id": owners[value],
                            "kind": "unique_violation",
                            "property": prop,
                            "value": value,
                            "existing_id": existing_id,
                            "fix": _unique_fix(table_key, owners[value], prop, value, existing_id, source, target.branch),
                        }
                    )
    return problems


def check_merged(
    graph: Graph,
    target: BranchSnapshot,
    changes: dict[str, TableChanges],
    incoming: dict[str, pa.Table],
    source: str | None = None,
) -> list[Problem]:
    """Every endpoint and constraint problem of putting ``changes`` into ``target``, sorted (empty =
    valid). For a merge of branch ``source`` each problem carries its ``fix`` (a mutation's caller,
    which passes no source, words its own refusal); ids in conflict are not in ``changes``, so
    they are checked as the target has them."""
    named = source or "the change"
    problems = (
        _incoming_endpoints(graph, target, changes, incoming, named)
        + _kept_edges_to_deleted_nodes(graph, target, changes, named)
        + _unique_values(graph, target, changes, incoming, named)
        + constraint_problems(graph, target, changes, incoming, named)
    )
    if source is None:
        problems = [{key: value for key, value in p.items() if key != "fix"} for p in problems]
    return sorted(problems, key=lambda p: (p["table_key"], p["id"], p["kind"], str(p.get("column", p.get("property")))))
