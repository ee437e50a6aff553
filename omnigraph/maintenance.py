"""Routine Lance maintenance of a graph: out-of-band table commits (drift), recovery, optimize.

What ``omnigraph drift show|adopt|revert``, ``omnigraph recover`` and ``omnigraph optimize`` do,
from Python. Each works on format-5 graphs and on format-4 graphs (maintenance changes no row
through the write door, and a format-4 graph must be maintainable before its migration); a graph
under a migration barrier is refused. On a format-4 graph ``drift_adopt`` skips the fencing
checks (the migration makes them) and ``optimize`` protects every version a migration sidecar
pins.

The functions that open the graph read-write first resolve interrupted commits and adopt
out-of-band commits that change no row, as every read-write open does; ``announce`` (default:
nothing) is told one line for each, and for what the operation itself completes on the way.
Results carry the engine's drift reports (``describe()``, ``verdict``, ``to_json()``, ...) and
``to_dict()`` gives the command's ``--json`` document.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omnigraph import ENGINE, FORMAT_4_WRITER
from omnigraph.engine.errors import BadRequest, NotFound
from omnigraph.engine.graph import Graph, default_actor, open_graph
from omnigraph.engine.maintenance.check import check_graph
from omnigraph.engine.maintenance.findings import CheckReport
from omnigraph.engine.maintenance.optimize import OptimizeReport
from omnigraph.engine.maintenance.optimize import optimize as optimize_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import MAIN
from omnigraph.engine.ops import schema_change
from omnigraph.engine.progress import Progress, SilentProgress
from omnigraph.engine.reconcile import branch_lease, drift, recovery
from omnigraph.engine.reconcile.drift import TableDriftReport
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5
from omnigraph.engine.storage.store import GraphStore, open_store
from omnigraph.graph import PROGRAMS
from omnigraph.migrator.executors import validate_image
from omnigraph.migrator.status import claim_findings

if TYPE_CHECKING:
    pass

__all__ = [
    "DriftAdopted",
    "DriftReverted",
    "DriftShown",
    "OptimizeReport",
    "Recovered",
    "drift_adopt",
    "drift_revert",
    "drift_show",
    "optimize",
    "recover",
]

Announce = Callable[[str], None]


def _quiet(_line: str) -> None:
    return None


def _open(uri: str, storage_options: Mapping[str, str] | None, *, write: bool, announce: Announce) -> Graph:
    """Open with the profile of the graph's format: 5 -> the engine, 4 -> the format-4 rules.

    Any other stamp is refused by the engine's rules (a migration barrier names
    ``omnigraph-migrate status``).
    """
    store = open_store(uri, storage_options)
    manifest = Manifest(store)
    stamp = manifest.read_stamp()[0] if manifest.exists() else None
    graph = open_graph(store, PROGRAMS[FORMAT_4_WRITER if stamp == FORMAT_4 else ENGINE], write=write)
    for record in graph.recovered:
        announce(f"recovered interrupted commit {record.operation_id} on {record.graph_branch}: {record.outcome}")
    for adopted in graph.adopted:
        announce(f"adopted {'+'.join(adopted.operations)} {adopted.span} on {adopted.table_key} ({adopted.graph_branch})")
    return graph


def _table_filter(graph: Graph, branch: str, table: str | None) -> list[str] | None:
    if table is None:
        return None
    if table not in graph.manifest.snapshot(branch).tables:
        raise NotFound(
            f"branch {branch!r} has no table {table!r} (see `omnigraph snapshot --branch {branch} {graph.store.uri}`)",
            {"table": table},
        )
    return [table]


@dataclass(frozen=True)
class DriftShown:
    """``drift show``: the commits between each table's pin and its HEAD on ``branch``."""

    graph: str
    branch: str
    tables: tuple[TableDriftReport, ...]

    def commands(self, report: TableDriftReport) -> dict[str, str]:
        """The exact ``omnigraph drift show|adopt|revert`` commands for one table's drift."""
        return drift.commands_for(self.graph, report)

    def to_dict(self) -> dict[str, Any]:
        """The ``drift show --json`` document."""
        return {"branch": self.branch, "tables": [r.to_json() for r in self.tables]}


@dataclass(frozen=True)
class DriftAdopted:
    """``drift adopt``: the spans pinned, in one graph commit (``manifest_version`` None if none)."""

    branch: str
    adopted: tuple[TableDriftReport, ...]
    manifest_version: int | None

    def to_dict(self) -> dict[str, Any]:
        """The ``drift adopt --json`` document."""
        return {"branch": self.branch, "adopted": [r.to_json() for r in self.adopted], "manifest_version": self.manifest_version}


@dataclass(frozen=True)
class DriftReverted:
    """``drift revert``: the tables restored to their pinned rows, one graph commit each."""

    branch: str
    reverted: tuple[TableDriftReport, ...]
    manifest_versions: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        """The ``drift revert --json`` document."""
        return {"branch": self.branch, "reverted": [r.to_json() for r in self.reverted], "manifest_versions": list(self.manifest_versions)}


@dataclass(frozen=True)
class Recovered:
    """``recover``: what the read-write open resolved, adopted, left in flight and completed.

    That is the interrupted commits resolved, the out-of-band commits adopted, the writes of live
    writers still in flight, the interrupted branch creations or deletions completed, and the
    branches brought to the accepted schema (branch -> the commit that did it).
    """

    recovered: tuple[dict[str, Any], ...]
    adopted: tuple[dict[str, Any], ...]
    in_flight: tuple[str, ...]
    branch_operations_completed: tuple[str, ...]
    schema_upgraded: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The ``recover --json`` document."""
        return {
            "recovered": list(self.recovered),
            "adopted": list(self.adopted),
            "in_flight": list(self.in_flight),
            "branch_operations_completed": list(self.branch_operations_completed),
            "schema_upgraded": {branch: commit for branch, commit in self.schema_upgraded},
        }


def drift_show(uri: str, *, branch: str = MAIN, table: str | None = None, storage_options: Mapping[str, str] | None = None) -> DriftShown:
    """The out-of-band commits of every table of ``branch`` (or of ``table``), and whether each changes rows.

    Read-only.

    Raises:
        NotFound: no graph, branch or table.
        FormatRefused: the stamp is one the engine does not read.
    """
    graph = _open(uri, storage_options, write=False, announce=_quiet)
    graph.manifest.require_branch(branch)
    reports = drift.out_of_band(
        graph.store, graph.manifest, branch, _table_filter(graph, branch, table), compare_rows=True, include_forks=True
    )
    return DriftShown(graph.store.uri, branch, tuple(reports))


def drift_adopt(
    uri: str,
    *,
    branch: str = MAIN,
    table: str | None = None,
    actor: str | None = None,
    announce: Announce = _quiet,
    storage_options: Mapping[str, str] | None = None,
) -> DriftAdopted:
    """Pin each table's HEAD on ``branch`` (after the fencing checks) in one graph commit.

    Raises:
        NotFound: no graph, branch or table.
        FormatRefused: the graph is behind a migration barrier.
        ClaimHeld: a migration claim is held.
        ValidationFailed: the change would break the fence (revert it instead).
    """
    graph = _open(uri, storage_options, write=True, announce=announce)
    graph.manifest.require_branch(branch)
    with recovery.holding_branch(graph.store, graph.manifest, branch, "drift adopt", wait_seconds=branch_lease.WAIT_SECONDS):
        reports = drift.out_of_band(graph.store, graph.manifest, branch, _table_filter(graph, branch, table), include_forks=True)
        version = None
        if reports:
            version = drift.adopt(
                graph.store, graph.manifest, branch, reports, actor=actor or default_actor(), require_fencing=graph.profile.router.with_pk
            )
    return DriftAdopted(branch, tuple(reports), version)


def drift_revert(
    uri: str,
    *,
    branch: str = MAIN,
    table: str | None = None,
    actor: str | None = None,
    announce: Announce = _quiet,
    storage_options: Mapping[str, str] | None = None,
) -> DriftReverted:
    """Restore each table's pinned rows on ``branch`` as a new version and pin it.

    Each table is one graph commit.

    Raises:
        NotFound: no graph, branch or table.
        FormatRefused: the graph is behind a migration barrier.
        ClaimHeld: a migration claim is held.
    """
    graph = _open(uri, storage_options, write=True, announce=announce)
    graph.manifest.require_branch(branch)
    with recovery.holding_branch(graph.store, graph.manifest, branch, "drift revert", wait_seconds=branch_lease.WAIT_SECONDS):
        reports = drift.out_of_band(graph.store, graph.manifest, branch, _table_filter(graph, branch, table), include_forks=True)
        versions = [drift.revert(graph.store, graph.manifest, report, actor=actor or default_actor()) for report in reports]
    return DriftReverted(branch, tuple(reports), tuple(versions))


def recover(uri: str, *, announce: Announce = _quiet, storage_options: Mapping[str, str] | None = None) -> Recovered:
    """Open the graph read-write, which resolves what dead writers left.

    It completes an interrupted schema change, resolves the interrupted commits of dead writers,
    completes interrupted branch creations and deletions, brings every branch to the accepted
    schema, and adopts out-of-band commits that change no row.

    Raises:
        TableDrift: drift that changes rows is left (every drifted table in the details, with
            the ``omnigraph drift`` commands); ``details["recovered"]`` says what was resolved.
        FormatRefused: the graph is behind a migration barrier.
        ClaimHeld: a migration claim is held.
    """
    graph = _open(uri, storage_options, write=True, announce=announce)
    finished = recovery.finish_interrupted_branch_operations(graph.store, graph.manifest)
    for name in finished:
        announce(f"completed an interrupted create or delete of branch {name}")
    upgraded: dict[str, str] = {}
    if graph.stamp == FORMAT_5:
        resumed, upgraded = schema_change.resume_interrupted(graph)
        if resumed is not None:
            announce(f"{resumed} an interrupted schema change")
        upgraded |= schema_change.converge(graph)
    for name, commit_id in sorted(upgraded.items()):
        announce(f"brought branch {name} to the accepted schema (commit {commit_id})")
    drifted = []
    for branch in graph.manifest.branches():
        drifted += drift.out_of_band(graph.store, graph.manifest, branch, include_forks=True)
    result = Recovered(
        recovered=tuple(r.model_dump(mode="json") for r in graph.recovered),
        adopted=tuple(r.to_json() for r in graph.adopted),
        in_flight=tuple(i.operation_id for i in recovery.list_intents(graph.store)),
        branch_operations_completed=tuple(finished),
        schema_upgraded=tuple(sorted(upgraded.items())),
    )
    if drifted:
        error = drift.drift_error(graph.store.uri, drifted)
        error.details["recovered"] = list(result.recovered)
        raise error
    return result


def optimize(
    uri: str,
    *,
    branch: str = MAIN,
    compact: bool = False,
    index_column: str | None = None,
    cleanup_older_than: dt.timedelta | None = None,
    dry_run: bool = False,
    actor: str | None = None,
    progress: Progress | None = None,
    announce: Announce = _quiet,
    storage_options: Mapping[str, str] | None = None,
    declared_indexes: bool = False,
    key_indexes: bool = False,
) -> OptimizeReport:
    """Compact, index and clean up the tables ``branch`` owns.

    Compacts the tables, builds a BTREE index on ``index_column`` and (``declared_indexes``) the
    indexes the schema's ``@index`` declarations ask for (a vector index on a ``Vector(N)``
    property, a full-text index on a ``String``, a BTREE on an enum or ordered scalar;
    ``docs/queries.md``), and deletes table versions older than ``cleanup_older_than`` that nothing
    pins (no branch, reachable commit, intent or migration sidecar); compactions and indexes are
    published as a graph commit. Whenever it compacts or indexes (or with ``key_indexes`` alone)
    it also builds or refreshes the key indexes: a BTREE on ``id`` of every table and on ``src``
    and ``dst`` of every edge table, so that they cover every row.

    Raises:
        BadRequest: nothing to do (none of ``compact``, ``index_column``, ``declared_indexes``,
            ``key_indexes``, ``cleanup_older_than``).
        NotFound: no graph or branch.
        FormatRefused: the graph is behind a migration barrier.
        ClaimHeld: a migration claim is held.
    """
    indexing = compact or index_column is not None or declared_indexes or key_indexes
    if not indexing and cleanup_older_than is None:
        raise BadRequest("nothing to do: pass --compact, --index COLUMN, --declared-indexes, --key-indexes and/or --cleanup-older-than DUR")
    graph = _open(uri, storage_options, write=True, announce=announce)
    from omnigraph.migrator.layout import pinned_images

    return optimize_graph(
        graph,
        branch,
        compact=compact,
        index_column=index_column,
        cleanup_older_than=cleanup_older_than,
        dry_run=dry_run,
        actor=actor or default_actor(),
        progress=progress or SilentProgress(),
        extra_pins=pinned_images(graph.store),
        declared_indexes=declared_indexes,
        key_indexes=indexing,
    )


def integrity_check(store: GraphStore) -> CheckReport:
    """The read-only integrity check of the graph at ``store``: what :func:`omnigraph.check` and :meth:`omnigraph.Graph.check` run.

    It is the engine's check with the migrator's id scan and its claim findings.
    """
    return check_graph(store, validate_image, claim_findings)
