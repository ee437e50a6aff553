"""Step 3 of the write protocol: the table effects of one armed graph commit.

Per table, in table-key order: fork the table if the branch inherits it (from exactly the pinned
version, named after the graph branch), open it at the pin on the target branch, check it is
writable (the profile's ``check_writable``), then one router operation
(:class:`omnigraph.engine.door.TableRouter`: strict insert, upsert, overwrite, merge, repair). Returns the
manifest entries that pin the new versions.

Failures, by what had landed: a storage conflict on the first table (nothing landed) disarms
the intent and is :class:`~omnigraph.engine.ops.write_plan.NoEffectConflict` (the commit is prepared
again); a conflict on a later table, or a multi-commit effect that failed after its first
commit (``EffectLanded``), is ``recovery_required`` with the intent kept. A fork blocked by
another writer's (interrupted inside Lance, or of the same name from another image) is
``recovery_required`` naming ``omnigraph recover``, with the intent withdrawn first if nothing
had landed. Failpoints:
``write.after_fork``, ``write.after_merge_step`` (after each commit of a merge),
``write.after_effect``.
"""

from __future__ import annotations

import lance

from omnigraph.engine.door.profiles import MergeRows
from omnigraph.engine.door.table_store import CommitConflict, EffectLanded, ExistingKeys
from omnigraph.engine.errors import RecoveryRequired
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import BranchSnapshot, TableEntry, with_version
from omnigraph.engine.ops.write_plan import NoEffectConflict, TableWrite
from omnigraph.engine.reconcile import drift, recovery
from omnigraph.engine.reconcile.recovery import IntentTable
from omnigraph.engine.storage.lance_io import ForeignFork, ForkInterrupted, fork_or_adopt, open_pinned


def apply_effects(
    graph: Graph, snapshot: BranchSnapshot, writes: list[TableWrite], tables: list[IntentTable], operation_id: str
) -> list[TableEntry]:
    """Write every table of ``writes`` (``tables`` is the intent's record of each, same order)."""
    store = graph.store
    entries: list[TableEntry] = []
    for write, table in zip(writes, tables, strict=True):
        entry = snapshot.table(write.table_key)
        try:
            if table.fork_planned:
                _fork(graph, entry, str(table.target_branch), operation_id, landed=bool(entries))
                failpoint("write.after_fork")
            dataset = open_pinned(store, entry.image.on(table.target_branch))
            version = _write_table(graph, dataset, entry.table_path, write)
        except EffectLanded as landed:
            raise RecoveryRequired(
                operation_id,
                f"{write.table_key}: {landed}; resolve the commit with `{drift.recover_command(store.uri)}`",
                table_key=write.table_key,
            ) from landed
        except (CommitConflict, ExistingKeys) as conflict:
            if entries:
                raise RecoveryRequired(
                    operation_id,
                    f"a concurrent commit conflicted on {write.table_key} after earlier tables of this "
                    f"commit landed; resolve it with `{drift.recover_command(store.uri)}` before retrying",
                    table_key=write.table_key,
                ) from conflict
            recovery.disarm(store, operation_id)
            raise NoEffectConflict(str(conflict)) from conflict
        # Merges advance the dataset object in place; writers that return a new dataset do not.
        written = dataset if dataset.version == version else open_pinned(store, entry.image.on(table.target_branch).at(version))
        rows = written.count_rows()
        entries.append(with_version(entry, table.target_branch, version, rows))
        failpoint("write.after_effect")
    return entries


def _fork(graph: Graph, entry: TableEntry, branch: str, operation_id: str, *, landed: bool) -> None:
    """Fork (or adopt) the table branch the write targets; ``recovery_required`` naming
    ``omnigraph recover`` when another writer's fork is in the way: one interrupted inside Lance
    (data without a ref) or one of the same name from another image. Before any table of the
    commit landed this write's intent is withdrawn first, so the read-write open of the recovery
    (or of this process's next write) resolves the dead writer's intent that planned that fork,
    with no live intent of this process holding the table."""
    store = graph.store
    try:
        fork_or_adopt(store, entry.table_path, branch, entry.table_branch, entry.table_version)
    except (ForkInterrupted, ForeignFork) as blocked:
        fix = f"`{drift.recover_command(store.uri)}`"
        if landed:
            raise RecoveryRequired(
                operation_id,
                f"{blocked}; earlier tables of this commit landed: resolve it with {fix}",
                table_path=entry.table_path,
                branch=branch,
            ) from blocked
        recovery.disarm(store, operation_id)
        raise RecoveryRequired(
            None,
            f"{blocked}: another writer's fork of this table was interrupted. Nothing of this write was "
            f"written; run {fix} (it resolves that writer's commit), then retry",
            table_path=entry.table_path,
            branch=branch,
        ) from blocked


def _write_table(graph: Graph, dataset: lance.LanceDataset, table_path: str, write: TableWrite) -> int:
    """The one router operation ``write`` asks for, on the table opened for it; its version."""
    router = graph.profile.router
    if router.check_writable is not None:
        router.check_writable(dataset, table_path)
    if write.kind == "insert":
        return router.strict_insert(dataset, write.rows)
    if write.kind == "upsert":
        return router.upsert(dataset, write.rows)
    if write.kind == "merge":
        changes = MergeRows(write.table_key, write.rows, write.upsert_rows, write.delete_ids)
        return router.merge(dataset, changes, lambda: failpoint("write.after_merge_step"))
    if write.kind == "repair":
        return router.repair(dataset, list(write.delete_ids), write.delete_null_ids, write.rows)
    schema = graph.catalog.table(write.table_key).arrow_schema(with_pk=router.with_pk)
    return router.overwrite(dataset, write.rows, schema)
