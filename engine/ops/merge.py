"""``branch merge SRC --into B``: a three-way merge of two graph branches as one graph commit.

The merge base is the nearest common ancestor of the two heads in the commit graph
(:mod:`omnigraph.engine.manifest.commit_graph`). Outcomes:

* ``up_to_date``: the heads are equal or the base is the source head; nothing is written;
* ``fast_forward``: the base is the target head. The source's changes are applied to the
  target's own tables (the target never pins the source's table branches, which
  ``branch delete SRC`` removes) and recorded as one commit, message ``... (fast-forward)``, whose
  parents are the target head and the source head: the target's own history stays reachable
  after the source branch is deleted (its commits' manifests go with it). A fast-forward is
  recorded even when no row differs (the source's commits cancel out, or the source is itself a
  fast-forward of the target): the commit moves no table and names both heads, so the source's
  lineage is merged and the next merge is ``up_to_date``;
* ``merged``: one commit with two parents (target head, source head), recorded even when no row
  differs (both sides made the same changes), so the next merge starts from this one.

Per table and id the rules of :mod:`omnigraph.engine.ops.merge_diff` apply. The merged result is
then checked (:func:`check_merged`, with the ids in conflict as the target has them). The merged
image of a table is the target's image with the merge's deletes removed and the source rows it
takes (inserts and updates) put in. Checked, against that image only:

* every edge the merge brings in has its ``src``/``dst`` node in the merged node tables;
* no edge the target keeps points at a node the merge deletes;
* every ``@unique`` value the merge brings in is used by no other row of the merged table;
* the value rules, composite ``@unique`` and ``@card``
  (:func:`omnigraph.engine.ops.constraints.constraint_problems`).

Each failure is one problem document ``{table_key, id, kind, ..., fix}`` (``kind``
``missing_endpoint``, ``unique_violation`` or one of :mod:`omnigraph.engine.ops.constraints`'s;
for a merge, ``fix`` says, naming the branches, what change on which branch removes it); all are
returned, sorted. A ``.gq`` mutation runs the same checks on its result, without fixes.

Row conflicts and problems of the merged result are one ``merge_conflict`` (409) that lists them
all (the conflicts sorted, then the problems sorted, each problem with its fix), before anything
is written, so one answer names everything to fix.

Writes go through the write protocol (:func:`omnigraph.engine.ops.write.commit`: intent,
effects, publish): per table one router ``merge`` (:class:`omnigraph.engine.door.routing.MergeRows`:
new rows by the fenced strict insert, updated rows by the fenced upsert, deleted ids by the
door's delete), each a chain of commits of at most 8,192 rows and 32 MiB
(:func:`omnigraph.engine.door.table_store.merge_rows`), all under the one intent and published by
the one manifest commit: a merge of any size is all-or-nothing, and recovery restores every
table it touched. A table the target still inherits is forked first. The commit plan's payload
is the merge's outcome. Everything is prepared again from fresh snapshots when a concurrent
writer conflicts before any effect.

Memory: the three-way comparison runs in DuckDB under a memory limit, spilling beyond it
(:mod:`omnigraph.engine.ops.merge_diff`); Python holds the ids the merge changes and, as Arrow,
the source rows it takes (Blob cells as their payloads), one table at a time while they are
compared and checked, then every table's until the commit is written (``bench/merge_bench.py``
measures it).
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.errors import BadRequest, Internal, MergeConflict, ReadSetConflict
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.commit_graph import commit_snapshot, load_commit_graph
from omnigraph.engine.manifest.rows import BranchSnapshot
from omnigraph.engine.ops.constraints import constraint_problems, read_matching
from omnigraph.engine.ops.merge_diff import TableChanges, compare_table
from omnigraph.engine.ops.write import CommitPlan, TableWrite, commit
from omnigraph.engine.reconcile import drift
from omnigraph.engine.results import MergeResult
from omnigraph.engine.storage.blobs import blob_names, materialize
from omnigraph.engine.storage.lance_io import open_pinned

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
    """Every endpoint and constraint problem of putting ``changes`` into ``target``, sorted.

    Empty means valid. For a merge of branch ``source`` each problem carries its ``fix`` (a
    mutation's caller, which passes no source, words its own refusal); ids in conflict are not in
    ``changes``, so they are checked as the target has them.
    """
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


MergeOutcome = Literal["up_to_date", "fast_forward", "merged"]
_LOOKUP_IDS = 8192
"""Up to this many taken ids are looked up with a Lance filter; more are a filtered scan."""
_SCAN_BATCH_ROWS = 65_536


class _Plan(msgspec.Struct, frozen=True):
    """What a merge of the source into one target snapshot does (the payload of its commit plan)."""

    outcome: MergeOutcome
    base: str
    source_head: str
    target_head: str
    changes: dict[str, TableChanges]
    writes: tuple[TableWrite, ...]


def _plan(graph: Graph, source: str, target: BranchSnapshot) -> _Plan:
    """The merge of ``source`` into ``target``.

    A fast-forward (the base is the target's head) is recorded even when it changes no row (the
    source's edits cancel out), so the source's lineage is merged and the next merge starts from
    it.
    """
    source_snapshot = graph.manifest.snapshot(source)
    source_head, target_head = source_snapshot.head.commit_id, target.head.commit_id
    if source_head == target_head:
        return _Plan("up_to_date", source_head, source_head, target_head, {}, ())
    dag = load_commit_graph(graph.manifest)
    base_id = dag.merge_base(source_head, target_head)
    if base_id is None:
        raise Internal(f"branches {source!r} and {target.branch!r} share no commit; their histories are unreadable")
    if base_id == source_head:
        return _Plan("up_to_date", base_id, source_head, target_head, {}, ())
    outcome: MergeOutcome = "fast_forward" if base_id == target_head else "merged"
    base = commit_snapshot(graph.manifest, dag, base_id)
    _require_same_schema(graph, source_snapshot, target)
    chain = graph.schemas.chain(base.head.schema_id, target.head.schema_id)
    changes: dict[str, TableChanges] = {}
    for table_key in graph.catalog_for(target).table_keys():
        base_key = chain.old_key(table_key) if chain.links else table_key
        changes[table_key] = compare_table(
            graph.store,
            table_key,
            None if base_key is None else base.tables.get(base_key),
            source_snapshot.tables.get(table_key),
            target.tables.get(table_key),
            None if not chain.links or base_key is None else functools.partial(chain.adapt, base_key),
        )
    conflicts = sorted((c for change in changes.values() for c in change.conflicts), key=lambda c: (c.table_key, c.id))
    incoming = {key: _incoming_rows(graph, source_snapshot, change) for key, change in changes.items() if change.count}
    problems = check_merged(graph, target, changes, incoming, source)
    if conflicts or problems:
        raise _refusal(source, target.branch, base_id, [c.document() for c in conflicts], problems)
    writes = tuple(
        TableWrite(
            key,
            "merge",
            incoming[key].filter(pc.field("id").isin(pa.array(changes[key].inserts, pa.utf8()))),
            delete_ids=tuple(changes[key].deletes),
            upsert_rows=incoming[key].filter(pc.field("id").isin(pa.array(changes[key].updates, pa.utf8()))),
        )
        for key in sorted(incoming)
    )
    return _Plan(outcome, base_id, source_head, target_head, changes, writes)


def _require_same_schema(graph: Graph, source: BranchSnapshot, target: BranchSnapshot) -> None:
    """Both branches must be at one schema version (a schema change reaches every branch)."""
    theirs, ours = graph.schemas.resolve(source.head.schema_id), graph.schemas.resolve(target.head.schema_id)
    if theirs != ours:
        raise ReadSetConflict(
            f"branches {source.branch!r} and {target.branch!r} are at different schema versions ({theirs[:12]}, {ours[:12]}): a "
            "schema change has not reached both yet; nothing was written. "
            f"Run `{drift.recover_command(graph.store.uri)}`, then merge again",
            {"member": "schema", "expected": ours, "actual": theirs},
        )


def _refusal(source: str, target: str, base: str, conflicts: list[dict[str, str]], problems: list[dict[str, Any]]) -> MergeConflict:
    """One ``merge_conflict`` listing every problem at once.

    First the ids changed differently on both branches, then the rows the merged result would
    leave invalid (checked with the conflicting ids as the target has them), each with its fix.
    """
    parts = []
    if conflicts:
        parts.append(
            f"{len(conflicts)} id(s) changed differently on both branches since their merge base {base} (make each "
            "listed row equal on both branches, or undo one side's change)"
        )
    if problems:
        parts.append(
            f"{len(problems)} row(s) the merged result would leave invalid: a missing edge endpoint, a repeated "
            "@unique value, a value outside @range/@check or a source outside @card (each lists its fix)"
        )
    return MergeConflict(
        f"merging {source!r} into {target!r}: nothing was written; " + "; and ".join(parts) + ". Fix every listed row, then merge again",
        {"conflicts": conflicts + problems, "base": base},
    )


def _incoming_rows(graph: Graph, source: BranchSnapshot, change: TableChanges) -> pa.Table:
    """The source rows the merge takes for one table, in the catalog schema, sorted by id."""
    schema = graph.catalog.table(change.table_key).arrow_schema(with_pk=True)
    taken = change.inserts + change.updates
    if not taken:
        return schema.empty_table()
    entry = source.table(change.table_key)
    dataset = open_pinned(graph.store, entry.image)
    blobs = blob_names(schema)
    if len(taken) <= _LOOKUP_IDS:
        rows = dataset.to_table(columns=schema.names, filter=pc.field("id").isin(pa.array(taken, pa.utf8())), with_row_id=bool(blobs))
    else:  # a scan filtered here: Lance would compile a filter of that many literals first
        wanted = pa.array(taken, pa.utf8())
        # batches at least as large as the id set, so the set's hash table is built a few times only
        scanner = dataset.scanner(columns=schema.names, batch_size=max(_SCAN_BATCH_ROWS, len(taken)), with_row_id=bool(blobs))
        rows = pa.Table.from_batches(
            [batch.filter(pc.is_in(batch.column("id"), value_set=wanted)) for batch in scanner.to_batches()],
            schema=scanner.projected_schema,
        )
    if blobs:  # the payloads, copied: the fenced merge-insert stores bytes, not descriptors
        rows = materialize(dataset, rows, blobs)
    return rows.cast(schema).sort_by("id")


def merge_branch(graph: Graph, source: str, into: str, *, actor: str) -> MergeResult:
    """Merge branch ``source`` into branch ``into`` (see the module docstring)."""
    if source == into:
        raise BadRequest(f"cannot merge branch {source!r} into itself", {"branch": source})
    graph.manifest.require_branch(source)
    graph.manifest.require_branch(into)

    def prepare(target: BranchSnapshot, _previous: CommitPlan[_Plan] | None) -> CommitPlan[_Plan]:
        incarnation = graph.manifest.require_incarnation(source)
        with graph.manifest.reading(source, incarnation):  # the source deleted under the merge: a typed error
            plan = _plan(graph, source, target)
            graph.manifest.confirm(source, incarnation)  # every image of the source read was of one incarnation
        message = f"merge {source} into {into}"
        return CommitPlan(
            plan.writes,
            (target.head.commit_id, plan.source_head),
            message + (" (fast-forward)" if plan.outcome == "fast_forward" else ""),
            plan,
            publish_empty=plan.outcome != "up_to_date",
            rebased_message=message,
        )

    done = commit(graph, into, prepare, actor=actor)
    plan = done.plan.payload
    published = done.published if plan.outcome != "up_to_date" else None
    return MergeResult(
        outcome=plan.outcome,
        source=source,
        into=into,
        base=plan.base,
        source_head=plan.source_head,
        target_head=plan.target_head,
        commit=published.commit_id if published else None,
        parents=published.parents if published else (),
        changes={
            key: {"inserted": len(c.inserts), "updated": len(c.updates), "deleted": len(c.deletes)}
            for key, c in sorted(plan.changes.items())
            if c.count and published
        },
    )
