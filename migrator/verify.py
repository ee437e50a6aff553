"""Verification of a graph's fencing state, before the stamp and on demand.

:func:`structural_problems` checks what must hold of any fenced graph: every live table on every
branch has PK exactly ``[id]`` at the image its branch pins, and no table branch HEAD is ahead of
what a manifest pins (no unpublished effects). :func:`migration_drift` additionally compares the
graph with a migration's ledger: the same branches with the same incarnations and heads, every
unit published at the image the ledger recorded, with the validated rows. :func:`verify_graph`
is the read-only ``verify`` command: both checks, plus no pending intent, no held claim and, at
stamp 5, no head a format-4 writer published after the stamp (:mod:`omnigraph.engine.access.writer_audit`);
given answer queries, the answers the stamping migration recorded are taken again
(:mod:`omnigraph.migrator.answers`).
"""

from __future__ import annotations

from typing import Any

from omnigraph.claims.claim import inspect
from omnigraph.claims.errors import claim_held
from omnigraph.engine.access.writer_audit import foreign_heads, refence_command
from omnigraph.engine.door.table_store import KEY_COLUMN
from omnigraph.engine.errors import NotFound, PreconditionFailed
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import BranchSnapshot, TableEntry
from omnigraph.engine.reconcile import recovery
from omnigraph.engine.storage.lance_io import latest_version, open_pinned, primary_key
from omnigraph.engine.storage.store import GraphStore
from omnigraph.ledger.fold import FoldedState
from omnigraph.ledger.ledger import Ledger
from omnigraph.ledger.records import DriftItem, UnitPlan
from omnigraph.migrator.advice import claim_next_step
from omnigraph.migrator.answers import AnswerQueries, answer_cases, answers_changed, compare_answers, read_graph, refuse_other_queries
from omnigraph.migrator.errors import DriftDetected
from omnigraph.migrator.fan_out import default_parallel, fan_out, read_snapshots
from omnigraph.migrator.fingerprint import physical_fingerprint
from omnigraph.migrator.layout import CLAIM_PATH, ledger_dir, migration_ids
from omnigraph.migrator.validate import validate_image


def structural_problems(store: GraphStore, manifest: Manifest) -> list[str]:
    """Problems that make a graph not fenced, sorted; [] when every table is fenced."""
    workers = default_parallel(store)
    branches = list(manifest.branches())
    snapshots = read_snapshots(manifest, branches)
    pins = [
        (branch, table_key, entry)
        for branch, snapshot in zip(branches, snapshots, strict=True)
        for table_key, entry in snapshot.tables.items()
    ]

    def pk_problem(pin: tuple[str, str, TableEntry]) -> str | None:
        branch, table_key, entry = pin
        pk = primary_key(open_pinned(store, entry.image).schema)
        return None if pk == [KEY_COLUMN] else f"{branch}: {table_key} has primary key {pk}, not ['id']"

    problems = [problem for problem in fan_out(pk_problem, pins, workers) if problem is not None]
    pinned_heads: dict[tuple[str, str | None], int] = {}
    for _, _, entry in pins:
        key = (entry.table_path, entry.table_branch)
        pinned_heads[key] = max(pinned_heads.get(key, 0), entry.table_version)
    tables = sorted(pinned_heads.items(), key=lambda item: (item[0][0], item[0][1] or ""))
    heads = fan_out(lambda table: latest_version(store, table[0][0], table[0][1]), tables, workers)
    for ((path, table_branch), pinned), head in zip(tables, heads, strict=True):
        if head > pinned:
            problems.append(f"{path} on table branch {table_branch or 'main'} is at v{head}, ahead of every pin (v{pinned})")
    return sorted(problems)


def migration_drift(store: GraphStore, manifest: Manifest, state: FoldedState) -> list[DriftItem]:
    """Differences between the graph and what the migration's ledger says it did."""
    drift: list[DriftItem] = []
    branches = manifest.branches()
    planned = {b.graph_branch: b for b in state.branches}
    for name in sorted(set(branches) | set(planned)):
        if name not in branches:
            drift.append(DriftItem(what=f"graph branch {name}", expected="present", actual="deleted"))
        elif name not in planned:
            drift.append(DriftItem(what=f"graph branch {name}", expected="absent", actual="created"))
        elif branches[name].incarnation != planned[name].incarnation:
            drift.append(DriftItem(what=f"graph branch {name}", expected=planned[name].incarnation, actual=branches[name].incarnation))
    workers = default_parallel(store)
    names = sorted(set(branches) & set(planned))
    snapshots = dict(zip(names, read_snapshots(manifest, names), strict=True))
    for name, snapshot in snapshots.items():
        if snapshot.head.commit_id != planned[name].head_commit_id:
            drift.append(DriftItem(what=f"head of {name}", expected=planned[name].head_commit_id, actual=snapshot.head.commit_id))
        planned_keys = {u.table_key for u in state.plan if u.graph_branch == name}
        for extra in sorted(set(snapshot.tables) - planned_keys):
            drift.append(DriftItem(what=f"{extra} on {name}", expected="absent", actual="present"))
    for found in fan_out(lambda unit: _unit_drift(store, state, snapshots.get(unit.graph_branch), unit), state.plan, workers):
        drift += found
    return drift


def _unit_drift(store: GraphStore, state: FoldedState, snapshot: BranchSnapshot | None, unit: UnitPlan) -> list[DriftItem]:
    """How one unit's table differs from what the ledger says the unit did ([] if it does not)."""
    achieved = state.units.get(unit.unit_id)
    if snapshot is None or achieved is None:
        return []
    entry = snapshot.tables.get(unit.table_key)
    expected = f"{achieved.table_branch or 'main'}@v{achieved.table_version}"
    if entry is None:
        return [DriftItem(what=f"{unit.table_key} on {unit.graph_branch}", expected=expected, actual="absent")]
    actual = f"{entry.table_branch or 'main'}@v{entry.table_version}"
    if achieved.status != "completed" or actual != expected or entry.migration_unit != unit.unit_id:
        return [
            DriftItem(
                what=f"{unit.table_key} on {unit.graph_branch}",
                expected=f"completed at {expected}",
                actual=f"{achieved.status} at {actual}",
            )
        ]
    drift: list[DriftItem] = []
    head = latest_version(store, entry.table_path, entry.table_branch)
    if head != entry.table_version:
        drift.append(
            DriftItem(
                what=f"HEAD of {entry.table_path} on {entry.table_branch or 'main'}",
                expected=f"v{entry.table_version}",
                actual=f"v{head}",
            )
        )
    image = state.images.get(unit.image_id)
    dataset = open_pinned(store, entry.image)
    if image is not None and physical_fingerprint(dataset) != image.fingerprint:
        if validate_image(dataset).digest != image.digest:
            drift.append(DriftItem(what=f"rows of {unit.table_key} on {unit.graph_branch}", expected=image.digest, actual="changed"))
    return drift


def verify_graph(store: GraphStore, manifest: Manifest, queries: AnswerQueries | None = None) -> dict[str, Any]:
    """The ``verify`` document of a graph; raises ``drift_detected`` listing what is not fenced.

    Read-only. Checks the stamp is 5, :func:`structural_problems`, no pending write intent, no
    held claim (``claim_held`` instead, naming the command that releases it, with the other
    problems in its details), and, for the migration that stamped the graph,
    :func:`migration_drift`. With ``queries``, once all that holds, the answers that migration
    recorded are taken again: ``answers_changed`` (exit 4) if one differs, ``precondition_failed``
    if it recorded none or recorded them with other queries; ``answer_check`` in the document
    lists one case per recorded answer.
    """
    stamp, migration_id = manifest.read_stamp()
    problems = [] if stamp == "5" else [f"the stamp is {stamp}, not 5: the graph is not (fully) migrated"]
    problems += structural_problems(store, manifest)
    if stamp == "5":
        problems += [f"{c.describe()}; run `{refence_command(store.uri)}`" for c in foreign_heads(manifest)]
    pending = [i.operation_id for i in recovery.list_intents(store)]
    problems += [f"write intent {op} is pending recovery" for op in pending]
    holder = inspect(store, CLAIM_PATH)
    if holder is not None:
        advice = claim_next_step(store, holder, stamp)
        raise claim_held(
            f"{store.uri} is not released: the claim of migration {holder.migration_id} is still held by "
            f"{holder.owner} on {holder.host} (pid {holder.pid}); next: {advice}",
            holder,
            graph=store.uri,
            stamp=stamp,
            problems=problems,
            next=advice,
        )
    drift: list[dict[str, str]] = []
    if migration_id is not None:
        state = Ledger(store, ledger_dir(migration_id)).replay().state
        if state.plan and all(u.status == "completed" for u in state.units.values()):
            drift = [d.model_dump(mode="json") for d in migration_drift(store, manifest, state)]
    document: dict[str, Any] = {
        "graph": store.uri,
        "stamp": stamp,
        "ok": not problems and not drift,
        "problems": problems,
        "drift": drift,
        "answer_check": [],
    }
    if not document["ok"]:
        found = problems + [d["what"] for d in drift]
        shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
        raise DriftDetected(f"{store.uri} is not fully fenced: {shown}", document)
    if queries is not None:
        document["answer_check"] = _recheck_answers(store, migration_id, queries)
    return document


def _recheck_answers(store: GraphStore, migration_id: str | None, queries: AnswerQueries) -> list[dict[str, Any]]:
    """The answer check of ``verify --queries`` against the digests of the migration that stamped
    the graph (at stamp 5: the newest that wrote a stamp)."""
    state = _stamping_migration(store) if migration_id is None else Ledger(store, ledger_dir(migration_id)).replay().state
    if state is None or state.answers_sha256 is None:
        raise PreconditionFailed(
            f"the migration that stamped {store.uri} recorded no answers to check against: answers are "
            "recorded only during a migration run with --queries, under its barrier. Check the fencing "
            f"alone with `omnigraph-migrate verify {store.uri}`",
            {"migration_id": None if state is None else state.migration_id},
        )
    refuse_other_queries(queries, state.answers_sha256, " that migration was run with")
    changed = compare_answers(read_graph(store.uri), queries, state.answers)
    if changed:
        raise answers_changed(
            f"{len(changed)} of {len(state.answers)} answer(s) differ from those migration {state.migration_id} recorded before its stamp",
            "A write since the stamp changes answers too; if none was made, rows changed outside the engine",
            state.answers,
            changed,
            graph=store.uri,
            migration_id=state.migration_id,
        )
    return answer_cases(state.answers, [])


def _stamping_migration(store: GraphStore) -> FoldedState | None:
    """The newest migration whose ledger records a stamp, or None."""
    for candidate in reversed(migration_ids(store)):
        try:
            state = Ledger(store, ledger_dir(candidate)).replay().state
        except NotFound:
            continue
        if state.stamp_written:
            return state
    return None
