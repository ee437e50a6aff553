"""``optimize``: compaction, index building and version cleanup, owned by the engine.

Compaction (``compact_files``) and index building (a BTREE on a named column,
``create_scalar_index(..., replace=True)``, and the indexes the schema's ``@index`` declarations
ask for, :mod:`omnigraph.engine.maintenance.declared_indexes`) run on the tables a graph branch
owns, at the version the branch pins, and are then published as one graph commit (``optimized
<operations> vA..vB on <table>``) after the same classification an out-of-band commit gets
(:mod:`omnigraph.engine.reconcile.drift`): the new versions must change no row, which is
checked, not assumed. The key indexes (BTREE on ``id``, and on ``src``/``dst`` of an edge table:
:mod:`omnigraph.engine.storage.key_indexes`) are built where missing and refreshed where rows
were written since (``key_indexes``), after any compaction, in the same graph commit. A crash
between the Lance commit and the publish (failpoint ``optimize.before_publish``) leaves an
adoptable span that the next read-write open adopts. Tables inherited from another branch, covered by a commit
in flight, or with unresolved drift are skipped and reported. Indexes change nothing about
writes: the fenced door always merges with ``use_index(False)``.

Version cleanup deletes, per (table, Lance branch), only versions older than the cutoff that no
one may still read: every version pinned by any ``__manifest`` version of any live graph branch
(current pins, lazy branches' inherited images, and every commit reachable from a branch head),
every Lance fork point and each Lance branch's first version, every version an armed recovery
intent records, the caller's extra pins (migration sidecars), and every version at or above the
highest pin on that Lance branch (unadopted out-of-band commits and commits in flight). It asks
Lance to delete exactly that list (``cleanup_old_versions(versions=...)``). ``__manifest`` itself
is never cleaned: its versions are the commit history. Lance branches no graph branch pins are
left alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, cast

from omnigraph.engine.door.table_store import CommitConflict
from omnigraph.engine.errors import BadRequest, NotFound
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.graph import Graph
from omnigraph.engine.maintenance import declared_indexes as declared_index
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import TableEntry, lance_branch_name
from omnigraph.engine.progress import Progress
from omnigraph.engine.reconcile import branch_lease, drift, recovery
from omnigraph.engine.storage import key_indexes as key_index
from omnigraph.engine.storage.lance_io import latest_version, list_branches, open_dataset, open_pinned
from omnigraph.engine.storage.store import GraphStore

ImageRef = tuple[str, str | None, int]
"""(table path, Lance branch or None for main, version)."""


@dataclass
class OptimizeReport:
    """What ``optimize`` did (or, with ``dry_run``, would do), in table-key / path order."""

    branch: str
    dry_run: bool
    tables: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    cleanup: list[dict[str, Any]] = field(default_factory=list)
    manifest_version: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The report's JSON document: branch, dry run, tables, skipped, cleanup and manifest version."""
        return {
            "branch": self.branch,
            "dry_run": self.dry_run,
            "tables": self.tables,
            "skipped": self.skipped,
            "cleanup": self.cleanup,
            "manifest_version": self.manifest_version,
        }


def _owned_tables(graph: Graph, branch: str, report: OptimizeReport) -> list[tuple[str, TableEntry]]:
    """Tables ``branch`` owns whose HEAD is at its pin; the rest go to ``report.skipped``."""
    own = lance_branch_name(branch)
    busy = {(t.table_path, t.target_branch) for i in recovery.list_intents(graph.store) for t in i.tables}
    drifted = {r.table_key: r for r in drift.out_of_band(graph.store, graph.manifest, branch)}
    ready = []
    for table_key, entry in graph.manifest.snapshot(branch).tables.items():
        if entry.table_branch != own:
            reason = f"inherited from table branch {entry.table_branch or 'main'}; optimize the branch that owns it"
            report.skipped.append({"table_key": table_key, "reason": reason})
        elif (entry.table_path, own) in busy:
            report.skipped.append({"table_key": table_key, "reason": "a commit is in flight on it"})
        elif table_key in drifted:
            command = drift.commands_for(graph.store.uri, drifted[table_key])["show"]
            report.skipped.append({"table_key": table_key, "reason": f"out-of-band commits are not resolved; see `{command}`"})
        else:
            ready.append((table_key, entry))
    return ready


def _rewrite(
    graph: Graph, entry: TableEntry, compact: bool, index_column: str | None, declared_indexes: bool, key_indexes: bool, dry_run: bool
) -> dict[str, Any] | None:
    dataset = open_pinned(graph.store, entry.image)
    fragments = len(dataset.get_fragments())
    actions = []
    if compact and fragments > 1:
        actions.append("compact")
    if index_column is not None and index_column in dataset.schema.names:
        actions.append(f"index {index_column}")
    wanted = declared_index.declared(graph.catalog.table(entry.table_key)) if declared_indexes else []
    building = [(column, kind) for column, kind in wanted if column != index_column and declared_index.buildable(dataset, column, kind)]
    actions += [f"{kind} index {column}" for column, kind in building]
    # The key indexes are planned on the pinned image; after a compaction (which keeps every index
    # covering what it covered) they are planned again on the compacted version.
    skip = frozenset({index_column} if index_column is not None else ())
    keyed = key_index.plan(dataset, skip) if key_indexes else []
    actions += [step.describe() for step in keyed]
    if not actions:
        return None
    if not dry_run:
        if "compact" in actions:
            dataset.optimize.compact_files()
        if index_column is not None and f"index {index_column}" in actions:
            open_dataset(graph.store, entry.table_path, entry.table_branch).create_scalar_index(index_column, "BTREE", replace=True)
        for column, kind in building:
            declared_index.build(open_dataset(graph.store, entry.table_path, entry.table_branch), column, kind)
        if key_indexes:
            latest = open_dataset(graph.store, entry.table_path, entry.table_branch)
            key_index.apply(latest, key_index.plan(latest, skip))
    return {"table_key": entry.table_key, "actions": actions, "fragments_before": fragments}


def optimize(
    graph: Graph,
    branch: str,
    *,
    compact: bool,
    index_column: str | None,
    cleanup_older_than: dt.timedelta | None,
    dry_run: bool,
    actor: str,
    progress: Progress,
    extra_pins: Iterable[ImageRef] = (),
    declared_indexes: bool = False,
    key_indexes: bool = False,
) -> OptimizeReport:
    """Run the requested maintenance on ``graph`` (see the module docstring).

    ``key_indexes``: build and refresh the key indexes (:mod:`omnigraph.engine.storage.key_indexes`).
    """
    graph.manifest.require_branch(branch)
    if index_column is not None and not any(
        index_column in graph.catalog.table(key).arrow_schema(with_pk=False).names for key in graph.catalog.table_keys()
    ):
        raise BadRequest(f"no table of the schema has a column {index_column!r} to index", {"column": index_column})
    report = OptimizeReport(branch, dry_run)
    if compact or index_column is not None or declared_indexes or key_indexes:
        # Compaction and indexing commit to the branch's tables: under its lease, like a write.
        lease = (
            nullcontext()
            if dry_run
            else recovery.holding_branch(graph.store, graph.manifest, branch, "optimize", wait_seconds=branch_lease.WAIT_SECONDS)
        )
        with lease:
            _optimize_tables(graph, branch, compact, index_column, declared_indexes, key_indexes, report, progress, actor)
    if cleanup_older_than is not None:
        report.cleanup = cleanup(graph, cleanup_older_than, dry_run=dry_run, progress=progress, extra_pins=extra_pins)
    return report


def _optimize_tables(
    graph: Graph,
    branch: str,
    compact: bool,
    index_column: str | None,
    declared_indexes: bool,
    key_indexes: bool,
    report: OptimizeReport,
    progress: Progress,
    actor: str,
) -> None:
    """Compact and index the tables ``branch`` owns, then publish them (unless a dry run) in ``report``."""
    ready = _owned_tables(graph, branch, report)
    progress.start("optimizing tables", len(ready))
    for _, entry in ready:
        done = _rewrite(graph, entry, compact, index_column, declared_indexes, key_indexes, report.dry_run)
        if done is not None:
            report.tables.append(done)
        progress.advance()
    progress.finish()
    if report.tables and not report.dry_run:
        failpoint("optimize.before_publish")
        report.manifest_version = _publish(graph, branch, [t["table_key"] for t in report.tables], actor)


def _publish(graph: Graph, branch: str, table_keys: list[str], actor: str) -> int | None:
    """Publish the optimized tables in one graph commit; its manifest version, None if nothing is left to publish.

    A concurrent writer that adopted them first is fine (they are then pinned already).
    """
    store, manifest = graph.store, graph.manifest
    reports = drift.out_of_band(store, manifest, branch, table_keys)
    drifted = [r for r in reports if r.verdict == "drift"]
    if drifted:
        raise drift.drift_error(store.uri, drifted)
    if not reports:
        return None
    try:
        return drift.adopt(store, manifest, branch, reports, actor=actor, require_fencing=graph.profile.router.with_pk, verb="optimized")
    except CommitConflict:
        drift.settle(store, manifest, branch, actor=actor, require_fencing=graph.profile.router.with_pk, table_keys=table_keys)
        return int(manifest.dataset(branch).version)


def protected_images(store: GraphStore, manifest: Manifest, extra_pins: Iterable[ImageRef] = ()) -> set[ImageRef]:
    """Every table version someone may still read (see the module docstring), fork points aside."""
    protected: set[ImageRef] = set(extra_pins)
    refs = []
    for branch in manifest.branches():
        versions = [*manifest.head_versions(branch), int(manifest.dataset(branch).version)]
        refs += [(branch, version) for version in sorted(set(versions))]
    with ThreadPoolExecutor(max_workers=drift.HEAD_READERS) as pool:
        snapshots = list(pool.map(lambda ref: manifest.snapshot(*ref), refs))
    for snapshot in snapshots:
        for entry in snapshot.tables.values():
            protected.add((entry.table_path, entry.table_branch, entry.table_version))
    for intent in recovery.list_intents(store):
        for table in intent.tables:
            protected.add((table.table_path, table.branch_before, table.version_before))
    return protected


def _version_times(store: GraphStore, path: str, branch: str | None) -> list[tuple[int, dt.datetime]]:
    dataset = open_dataset(store, path, branch)
    # Lance's Version types ``timestamp`` as int | datetime; versions() converts every one to a datetime.
    return sorted((int(v["version"]), cast(dt.datetime, v["timestamp"])) for v in dataset.versions())


def cleanup(
    graph: Graph,
    older_than: dt.timedelta,
    *,
    dry_run: bool,
    progress: Progress,
    extra_pins: Iterable[ImageRef] = (),
) -> list[dict[str, Any]]:
    """Delete unprotected table versions older than ``older_than``; one entry per (path, branch)."""
    store = graph.store
    protected = protected_images(store, graph.manifest, extra_pins)
    highest: dict[tuple[str, str | None], int] = {}
    for path, branch, version in protected:
        highest[(path, branch)] = max(highest.get((path, branch), 0), version)
    for path in sorted({path for path, _ in highest}):
        for fork in list_branches(open_dataset(store, path)).values():
            protected.add((path, fork.parent_branch, fork.parent_version))
            protected.add((path, fork.name, fork.parent_version))
    cutoff = dt.datetime.now() - older_than
    results = []
    targets = sorted(highest.items(), key=lambda item: (item[0][0], item[0][1] or ""))
    progress.start("cleaning up versions", len(targets))
    for (path, branch), top in targets:
        times = _version_times(store, path, branch)
        head = latest_version(store, path, branch)
        doomed = [
            version
            for version, stamp in times
            if version < top and version != head and stamp < cutoff and (path, branch, version) not in protected
        ]
        kept = [version for version, _ in times if version not in doomed]
        if doomed and not dry_run:
            open_dataset(store, path, branch).cleanup_old_versions(versions=doomed)
        results.append({"table_path": path, "table_branch": branch, "deleted_versions": doomed, "kept_versions": kept})
        progress.advance()
    progress.finish()
    return results


def index_keys(graph: Graph, *, actor: str, progress: Progress) -> dict[str, OptimizeReport]:
    """Build or refresh the key indexes of the tables each branch owns: one ``optimize`` per branch, main first, then by name.

    What the migrator runs once a graph is at format 5 (the last step of a migration or a
    rebuild). Each branch's indexes are published as one graph commit under its lease, as
    ``optimize`` publishes them; a branch with nothing to do publishes nothing, and one deleted
    meanwhile is left out.
    """
    reports = {}
    for branch in graph.manifest.branches():
        try:
            reports[branch] = optimize(
                graph,
                branch,
                compact=False,
                index_column=None,
                cleanup_older_than=None,
                dry_run=False,
                actor=actor,
                progress=progress,
                key_indexes=True,
            )
        except NotFound:
            continue
    return reports
