"""Resolving out-of-band commits: adopt them (re-pin HEAD), revert them, or settle a branch.

A span made only of steps that change no row and row-preserving rewrites (verdict
``adoptable``, :mod:`omnigraph.engine.reconcile.drift.detect`) is adopted by :func:`settle`: the engine
re-pins HEAD with a recorded graph commit whose message is ``adopted <operations> vA..vB on
<table>``, after the fencing checks on a fenced graph (:func:`fencing_problems`: PK exactly
``[id]``, ids unique and non-null). Anything else is drift, which an operator resolves with
``omnigraph drift adopt`` (:func:`adopt`: the same fencing checks, then re-pin HEAD) or
``omnigraph drift revert`` (:func:`revert`: restore the pinned version's content as a new
version and re-pin it, or delete an unpublished fork). Every resolution publishes one graph
commit and raises :class:`~omnigraph.engine.door.CommitConflict` when a pin moved meanwhile; nothing here
runs inside another commit's attempt (the write path settles between two of its attempts).
"""

from __future__ import annotations

import lance
import pyarrow.compute as pc

from omnigraph.engine.door.table_store import KEY_COLUMN, CommitConflict
from omnigraph.engine.errors import NotFound, ValidationFailed
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import HeadEntry, now_ms, with_version
from omnigraph.engine.reconcile.drift.detect import in_flight_tables, out_of_band
from omnigraph.engine.reconcile.drift.report import TableDriftReport, commands_for
from omnigraph.engine.schema.ids import new_ulid
from omnigraph.engine.storage.image import ImageRef, open_pinned
from omnigraph.engine.storage.lance_io import delete_branch_if_present, latest_version, primary_key
from omnigraph.engine.storage.store import GraphStore

ADOPT_ATTEMPTS = 8


def fencing_problems(dataset: lance.LanceDataset, where: str) -> list[str]:
    """What keeps an image from being a fenced table: PK not exactly ``[id]``, null or duplicate ids."""
    problems = []
    pk = primary_key(dataset.schema)
    if pk != [KEY_COLUMN]:
        problems.append(f"{where} has primary key {pk}, not ['{KEY_COLUMN}']")
    ids = dataset.to_table(columns=[KEY_COLUMN]).column(KEY_COLUMN)
    if ids.null_count:
        problems.append(f"{where} has {ids.null_count} row(s) with a null id")
    distinct = int(pc.count_distinct(ids, mode="only_valid").as_py())
    duplicates = len(ids) - ids.null_count - distinct
    if duplicates:
        problems.append(f"{where} has {duplicates} row(s) whose id another row also has")
    return problems


def _commit_message(verb: str, reports: list[TableDriftReport]) -> str:
    return "; ".join(f"{verb} {'+'.join(r.operations)} {r.span} on {r.table_key}" for r in reports)


def adopt(
    store: GraphStore,
    manifest: Manifest,
    graph_branch: str,
    reports: list[TableDriftReport],
    *,
    actor: str,
    require_fencing: bool,
    verb: str = "adopted",
) -> int:
    """Re-pin each report's HEAD on ``graph_branch`` in one graph commit; returns its manifest version.

    ``require_fencing`` (fenced graphs) refuses, with ``validation_failed`` and nothing written,
    an image whose PK is not ``[id]`` or whose ids are null or duplicated. Raises
    :class:`~omnigraph.engine.door.table_store.CommitConflict` if a pin moved since the reports were made or a
    concurrent publish won.
    """
    snapshot = manifest.snapshot(graph_branch)
    entries = []
    for report in reports:
        entry = snapshot.table(report.table_key)
        if (entry.table_branch, entry.table_version) != (report.pinned_table_branch, report.pinned_version):
            raise CommitConflict(f"{report.table_key} was re-pinned meanwhile")
        image = open_pinned(store, ImageRef(entry.table_path, report.table_branch, report.head_version))
        if require_fencing:
            problems = fencing_problems(image, f"{report.table_key} at v{report.head_version}")
            if problems:
                revert = commands_for(store.uri, report)["revert"]
                raise ValidationFailed(
                    f"{'; '.join(problems)}: it cannot be adopted into a fenced graph. Restore the "
                    f"rows of v{report.pinned_version} with `{revert}`",
                    {"table_key": report.table_key, "problems": problems, "command": revert},
                )
        entries.append(with_version(entry, report.table_branch, report.head_version, image.count_rows()))
    head = HeadEntry(new_ulid(), (snapshot.head.commit_id,), actor, _commit_message(verb, reports), now_ms())
    return manifest.publish(snapshot, entries, head)


def revert(store: GraphStore, manifest: Manifest, report: TableDriftReport, *, actor: str) -> int:
    """Undo one table's out-of-band commits in a graph commit; returns the manifest version.

    An owned table gets the pinned version's content restored as a new version, which is pinned;
    an unpublished fork is deleted (the branch's next write forks again from its pin). Re-running
    it after a crash between the two steps reverts again.
    """
    snapshot = manifest.snapshot(report.graph_branch)
    entry = snapshot.table(report.table_key)
    if (entry.table_branch, entry.table_version) != (report.pinned_table_branch, report.pinned_version):
        raise CommitConflict(f"{report.table_key} was re-pinned meanwhile")
    if report.unpinned_fork is not None:
        delete_branch_if_present(store, entry.table_path, report.unpinned_fork.name)
        message = _commit_message("reverted", [report]) + f" (deleted the unpublished fork {report.unpinned_fork.name!r})"
        head = HeadEntry(new_ulid(), (snapshot.head.commit_id,), actor, message, now_ms())
        return manifest.publish(snapshot, [], head)
    open_pinned(store, entry.image).restore()
    restored = latest_version(store, entry.table_path, entry.table_branch)
    message = _commit_message("reverted", [report]) + f" (v{report.pinned_version} restored as v{restored})"
    head = HeadEntry(new_ulid(), (snapshot.head.commit_id,), actor, message, now_ms())
    return manifest.publish(snapshot, [with_version(entry, entry.table_branch, restored, entry.row_count)], head)


def settle(
    store: GraphStore,
    manifest: Manifest,
    graph_branch: str,
    *,
    actor: str,
    require_fencing: bool,
    table_keys: list[str] | None = None,
    in_flight: set[tuple[str, str | None]] | None = None,
    include_forks: bool = False,
) -> tuple[list[TableDriftReport], list[TableDriftReport]]:
    """Adopt every adoptable out-of-band span of ``graph_branch``; returns (adopted, drifted).

    A concurrent publish makes it look again (bounded); a span someone else adopted meanwhile is
    then simply gone.
    """
    for _ in range(ADOPT_ATTEMPTS):
        reports = out_of_band(store, manifest, graph_branch, table_keys, in_flight=in_flight, include_forks=include_forks)
        adoptable = [r for r in reports if r.verdict == "adoptable"]
        drifted = [r for r in reports if r.verdict == "drift"]
        if not adoptable:
            return [], drifted
        try:
            adopt(store, manifest, graph_branch, adoptable, actor=actor, require_fencing=require_fencing)
        except CommitConflict:
            continue
        return adoptable, drifted
    raise CommitConflict(f"adopting out-of-band commits on branch {graph_branch!r} kept conflicting")


def settle_all(store: GraphStore, manifest: Manifest, *, actor: str, require_fencing: bool) -> list[TableDriftReport]:
    """:func:`settle` on every live graph branch (main first, then by name); returns what was adopted."""
    adopted: list[TableDriftReport] = []
    covered = in_flight_tables(store)
    for branch in manifest.branches():
        try:
            adopted += settle(store, manifest, branch, actor=actor, require_fencing=require_fencing, in_flight=covered)[0]
        except (NotFound, ValueError, OSError):
            if manifest.incarnation(branch) is not None:
                raise
            # deleted while the graph was opened: nothing of it is left to settle
    return adopted
