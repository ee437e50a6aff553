"""Step 4 of the write protocol: publish one graph commit (table rows + head row) to ``__manifest``.

The commit publishes from the snapshot its plan was prepared on. A publish that loses to a
concurrent publish (two writers passed the pin check together) is rebased onto the new head when
every table it touched only gained Update/Append commits in between (its rows are then contained
in the newer version): the head's first parent and message come from the plan again
(:meth:`~omnigraph.engine.ops.write_plan.CommitPlan.head_on`). Otherwise, or after
:data:`PUBLISH_ATTEMPTS` lost publishes, it is ``recovery_required`` with the intent kept. A
stamp-5 commit never builds on a head a format-4 writer published after the stamp
(:func:`refuse_foreign_base`).
"""

from __future__ import annotations

from dataclasses import replace

from omnigraph.engine.access import writer_audit
from omnigraph.engine.door.table_store import CommitConflict
from omnigraph.engine.errors import RecoveryRequired
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import BranchSnapshot, HeadEntry, TableEntry, now_ms
from omnigraph.engine.ops.write_plan import CommitPlan, CommitResult
from omnigraph.engine.reconcile import drift
from omnigraph.engine.storage.lance_io import open_dataset
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5

PUBLISH_ATTEMPTS = 64
_REBASE_SAFE_OPERATIONS = frozenset({"Update", "Append"})


def refuse_foreign_base(graph: Graph, snapshot: BranchSnapshot) -> None:
    """A stamp-5 commit never builds on a head a format-4 writer published after the stamp."""
    if graph.stamp != FORMAT_5 or snapshot.head.writer_format != FORMAT_4:
        return
    foreign = writer_audit.foreign_head(snapshot, graph.manifest.read_fenced_heads())
    if foreign is not None:
        raise writer_audit.foreign_refusal(graph.store.uri, [foreign])


def publish(
    graph: Graph, snapshot: BranchSnapshot, entries: list[TableEntry], operation_id: str, plan: CommitPlan[object], actor: str
) -> CommitResult:
    """Publish ``entries`` and the plan's head as commit ``operation_id`` (see the module docstring)."""
    parents, message = plan.head_on(snapshot.head.commit_id)
    head = HeadEntry(
        operation_id,
        parents,
        actor,
        message,
        now_ms(),
        writer_program=graph.profile.program,
        writer_format=graph.profile.init_stamp,
    )
    base = snapshot
    for _ in range(PUBLISH_ATTEMPTS):
        try:
            version = graph.manifest.publish(base, entries, head)
        except CommitConflict:
            base = graph.manifest.snapshot(snapshot.branch)
            refuse_foreign_base(graph, base)
            entries = [_rebase_entry(graph, ours, base, operation_id) for ours in entries]
            parents, message = plan.head_on(base.head.commit_id)
            head = replace(head, parents=parents, message=message)
            continue
        return CommitResult(operation_id, snapshot.branch, version, entries, head.parents)
    raise RecoveryRequired(
        operation_id,
        f"publishing to branch {snapshot.branch!r} kept losing to concurrent publishes; resolve the "
        f"commit with `{drift.recover_command(graph.store.uri)}`",
    )


def _rebase_entry(graph: Graph, ours: TableEntry, fresh: BranchSnapshot, operation_id: str) -> TableEntry:
    """Our entry for a table, to publish on top of ``fresh``: the newer of the two versions when
    every commit between them is an Update or an Append, else ``recovery_required``."""
    theirs = fresh.table(ours.table_key)
    if theirs.table_branch != ours.table_branch:
        # The fresh manifest still pins the inherited image: our fork is the branch's first own image.
        return ours
    low, high = sorted((ours.table_version, theirs.table_version))
    dataset = open_dataset(graph.store, ours.table_path, ours.table_branch)
    for version in range(low + 1, high + 1):
        operation = drift.operation_name(dataset, version)
        if operation not in _REBASE_SAFE_OPERATIONS:
            raise RecoveryRequired(
                operation_id,
                f"{ours.table_key} gained a {operation} commit (v{version}) during this commit; its "
                "rows may not be visible, so the commit was not published; resolve it with "
                f"`{drift.recover_command(graph.store.uri)}`",
                table_key=ours.table_key,
            )
    return ours if ours.table_version >= theirs.table_version else theirs
