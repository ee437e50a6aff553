"""Resolve interrupted graph commits on a read-write open.

For every armed intent whose writer is not a live process on this host:

* if the commit id appears as the head of its branch at a manifest version after the intent's
  base, the commit was published and only the intent is left: delete it;
* otherwise undo the commit's unpublished effects, all-or-nothing: a fork the manifest does not
  reference is deleted; a table branch whose HEAD moved past the version the manifest pins is
  restored to that version (a new Lance version with the pinned contents) and the manifest is
  republished to point at the restored version without moving the head (Lance refuses writes
  based on a version older than a restore, so the pin must follow).

Each resolution is recorded in ``__recovery/log/`` before the intent is deleted. Intents of live
writers on this host are left alone; the support boundary is one writer process per graph.
"""

from __future__ import annotations

import os
from dataclasses import replace

from engine import intents
from engine.intents import RecoveredTable, RecoveryRecord, WriteIntent
from engine.lance_io import delete_branch_if_present, latest_version, open_dataset
from engine.manifest import Manifest, TableEntry, now_ms
from engine.storage import GraphStore


def _was_published(manifest: Manifest, intent: WriteIntent) -> bool:
    for version in manifest.head_versions(intent.graph_branch):
        if version > intent.base_manifest_version:
            if manifest.snapshot(intent.graph_branch, version).head.commit_id == intent.operation_id:
                return True
    return False


def _roll_back(store: GraphStore, manifest: Manifest, intent: WriteIntent) -> list[RecoveredTable]:
    snapshot = manifest.snapshot(intent.graph_branch)
    outcomes: list[RecoveredTable] = []
    republish: list[TableEntry] = []
    for table in sorted(intent.tables, key=lambda t: t.table_key):
        entry = snapshot.tables.get(table.table_key)
        pinned_here = entry is not None and entry.table_branch == table.target_branch
        if table.fork_planned and not pinned_here:
            deleted = delete_branch_if_present(store, table.table_path, str(table.target_branch))
            action = "fork_deleted" if deleted else "unchanged"
            outcomes.append(RecoveredTable(table_key=table.table_key, action=action, table_branch=table.target_branch))
            continue
        if entry is None:
            continue
        head = latest_version(store, entry.table_path, entry.table_branch)
        if head == entry.table_version:
            outcomes.append(RecoveredTable(table_key=table.table_key, action="unchanged", table_branch=entry.table_branch))
            continue
        dataset = open_dataset(store, entry.table_path, entry.table_branch, entry.table_version)
        dataset.restore()
        restored = latest_version(store, entry.table_path, entry.table_branch)
        republish.append(replace(entry, table_version=restored))
        outcomes.append(
            RecoveredTable(
                table_key=table.table_key,
                action="restored",
                table_branch=entry.table_branch,
                restored_to_version=entry.table_version,
                new_version=restored,
            )
        )
    if republish:
        manifest.publish(snapshot, republish, head=None)
    return outcomes


def _delete_planned_forks(store: GraphStore, intent: WriteIntent) -> list[RecoveredTable]:
    """The intent's branch was deleted: forks it planned are unreferenced and go too."""
    outcomes = []
    for table in sorted(intent.tables, key=lambda t: t.table_key):
        deleted = table.fork_planned and delete_branch_if_present(
            store, table.table_path, str(table.target_branch)
        )
        outcomes.append(
            RecoveredTable(
                table_key=table.table_key,
                action="fork_deleted" if deleted else "unchanged",
                table_branch=table.target_branch,
            )
        )
    return outcomes


def touched_tables(intent: WriteIntent) -> set[tuple[str, str | None]]:
    """(table path, Lance table branch) pairs a commit may change."""
    return {(table.table_path, table.target_branch) for table in intent.tables}


def resolve_intents(store: GraphStore, manifest: Manifest) -> list[RecoveryRecord]:
    """Resolve every interrupted commit (see module docstring); returns what was done.

    An interrupted commit that touched a table a live writer's commit also touches is left for
    a later open: undoing it now could remove the live writer's fork or effects.
    """
    records: list[RecoveryRecord] = []
    live_branches = manifest.branches()
    pending = intents.list_intents(store)
    live = [intent for intent in pending if intents.owner_is_alive(intent)]
    busy = set().union(*(touched_tables(intent) for intent in live)) if live else set()
    for intent in pending:
        if intent in live or touched_tables(intent) & busy:
            continue
        if intent.graph_branch not in live_branches:
            outcome, tables = "branch_gone", _delete_planned_forks(store, intent)
        elif _was_published(manifest, intent):
            outcome, tables = "published", []
        else:
            outcome, tables = "rolled_back", _roll_back(store, manifest, intent)
        record = RecoveryRecord(
            operation_id=intent.operation_id,
            graph_branch=intent.graph_branch,
            outcome=outcome,
            tables=tables,
            resolved_by_host=intents.this_host(),
            resolved_by_pid=os.getpid(),
            resolved_at=now_ms(),
        )
        intents.record_resolution(store, record)
        intents.disarm(store, intent.operation_id)
        records.append(record)
    return records
