"""Graph branches: create (forks only ``__manifest``), list, delete.

A new branch forks ``__manifest`` from exactly the source branch's current manifest version; its
table rows keep pointing at the source's images (lazy inheritance) until its first write to a
table forks that table. Deleting a branch removes its ``__manifest`` branch first (the graph
branch is gone atomically) and then its own table forks; a branch that another branch was
forked from cannot be deleted.

Both hold the branch's lease (:mod:`omnigraph.engine.reconcile.branch_lease`), so no two processes
create, delete, write or recover one branch name at once: either refuses (``read_set_conflict``,
naming the holder) while a live holder keeps it. The intents of writers no longer in flight on a
deleted branch are resolved with it: their effects were on the branch's own table forks, which go
with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from omnigraph.engine.errors import BadRequest, BranchExists, NotFound, ReadSetConflict
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import MAIN, GraphBranch
from omnigraph.engine.reconcile import branch_lease, recovery
from omnigraph.engine.storage.lance_io import delete_branch_if_present

BRANCH_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _valid_name(name: str) -> bool:
    """Letters, digits, '.', '_', '-'; not 'main'; and what Lance refs refuse: '..', '.lock' ends."""
    return bool(BRANCH_NAME.fullmatch(name)) and name != MAIN and ".." not in name and not name.endswith((".lock", "."))


def is_branch_name(name: str) -> bool:
    """True when ``name`` can name a graph branch: ``main``, or a name :func:`create_branch` accepts.

    Checked before a name reaches storage, so a name that cannot exist (a NUL, a ``/``, a control
    character, more than 100 characters) is refused as what it is, not by the file system.
    """
    return name == MAIN or _valid_name(name)


def _table_paths(graph: Graph) -> list[str]:
    return sorted(entry.table_path for entry in graph.manifest.snapshot(MAIN).tables.values())


def _completer(graph: Graph) -> Callable[[branch_lease.Lease, branch_lease.LeaseRecord], None]:
    return lambda _lease, record: recovery.take_over(graph.store, graph.manifest, record)


def _require_creatable(graph: Graph, name: str, source: str) -> None:
    branches = graph.manifest.branches()
    if name in branches:
        raise BranchExists(f"branch {name!r} already exists: choose another name, or delete that branch first", {"branch": name})
    if source not in branches:
        raise NotFound(f"source branch {source!r} does not exist", {"branch": source})


def create_branch(graph: Graph, name: str, source: str = MAIN) -> GraphBranch:
    """Create graph branch ``name`` from the current state of ``source``."""
    if not _valid_name(name):
        raise BadRequest(
            f"invalid branch name {name!r}: use letters, digits, '.', '_' and '-' (no '..', not ending in '.' or '.lock'), and not 'main'",
            {"branch": name},
        )
    _require_creatable(graph, name, source)  # refused before the lease is taken: nothing written
    with branch_lease.holding(graph.store, name, "create", f"creating branch {name!r}", on_taken_over=_completer(graph)) as lease:
        failpoint("branch.after_lease")
        _require_creatable(graph, name, source)
        for path in _table_paths(graph):
            delete_branch_if_present(graph.store, path, name)  # left by a delete that was interrupted
        failpoint("branch.before_create")
        graph.manifest.create_branch(name, graph.manifest.snapshot(source))
        if graph.profile.router.with_pk:
            _reach_accepted_schema(graph, name, lease)
        return graph.manifest.branches()[name]


def _reach_accepted_schema(graph: Graph, name: str, lease: branch_lease.Lease) -> None:
    """A branch forked from one a schema change has not reached yet gets the change now; if it cannot, the create is undone."""
    from omnigraph.engine.ops import schema_change

    try:
        schema_change.upgrade_new_branch(graph, name, lease)
    except BadRequest:
        paths = _table_paths(graph)
        graph.manifest.delete_branch(name)
        for path in paths:
            delete_branch_if_present(graph.store, path, name)
        raise


def delete_branch(graph: Graph, name: str) -> None:
    """Delete graph branch ``name`` and its own table forks."""
    if name == MAIN:
        raise BadRequest("the main branch cannot be deleted")
    branches = graph.manifest.branches()
    if name not in branches:
        raise NotFound(f"branch {name!r} does not exist", {"branch": name})
    children = sorted(b.name for b in branches.values() if b.parent_branch == name)
    if children:
        raise BadRequest(
            f"branch {name!r} cannot be deleted: {', '.join(children)} were forked from it; delete them first",
            {"branch": name, "children": children},
        )
    _refuse_while_writing(graph, name)
    with branch_lease.holding(graph.store, name, "delete", f"deleting branch {name!r}", on_taken_over=_completer(graph)):
        failpoint("branch.after_lease")
        if name not in graph.manifest.branches():
            raise NotFound(f"branch {name!r} does not exist", {"branch": name})
        on_branch = [intent for intent in recovery.list_intents(graph.store) if intent.graph_branch == name]
        live = [intent for intent in on_branch if recovery.owner_is_alive(graph.store, intent)]
        if live:
            raise _write_in_flight(name, live[0])
        paths = _table_paths(graph)
        graph.manifest.delete_branch(name)
        failpoint("branch.after_delete")
        for path in paths:
            delete_branch_if_present(graph.store, path, name)
        recovery.discard_for_deletion(graph.store, on_branch)


def _refuse_while_writing(graph: Graph, name: str) -> None:
    """Refuse the delete of ``name`` naming the write in flight, if a live write holds its lease with an armed intent."""
    holder = branch_lease.live_holder(graph.store, name)
    if holder is None or holder.operation != "write":
        return
    for intent in recovery.list_intents(graph.store):
        if intent.graph_branch == name and intent.lease_token == holder.sequence:
            raise _write_in_flight(name, intent)


def _write_in_flight(name: str, intent: recovery.WriteIntent) -> ReadSetConflict:
    return ReadSetConflict(
        f"branch {name!r} was not deleted: write {intent.operation_id} to it is in flight (pid {intent.pid} on "
        f"{intent.host}, started by {intent.actor}); retry the delete when that write has finished",
        {
            "member": f"branch {name}",
            "expected": "no write in flight",
            "actual": f"write {intent.operation_id}",
            "operation_id": intent.operation_id,
        },
    )


def branch_documents(graph: Graph) -> list[dict[str, Any]]:
    """Every branch with its parent and incarnation, main first then by name."""
    documents = []
    branches = graph.manifest.branches()
    for name, snapshot in graph.manifest.snapshots().items():
        branch = branches[name]
        documents.append(
            {
                "name": branch.name,
                "parent_branch": branch.parent_branch,
                "parent_manifest_version": branch.parent_version,
                "incarnation": branch.incarnation,
                "manifest_version": snapshot.manifest_version,
                "head": snapshot.head.commit_id,
            }
        )
    return documents
