"""``schema plan`` / ``schema apply``: change the accepted schema of a graph on every branch at once.

:func:`plan_schema` compares the accepted schema with a proposed source
(:func:`omnigraph.engine.schema.evolution.plan_change`) and writes nothing. :func:`apply_schema`
applies the plan to the whole graph (format 5 only; ``format_refused`` before the upgrade):

1. Refusals before anything is written: a refused step (``bad_request``, every one listed), a
   step that drops data without ``allow_data_loss``, a schema change already in progress or
   interrupted (``read_set_conflict`` naming ``omnigraph recover``).
2. The change's record ``__recovery/schema/change.json`` (create-if-absent: one change at a time).
3. Every branch's lease is taken (main first, then by name, waiting for writers in flight), and
   held until the end: no commit lands on any branch meanwhile. Each added or changed ``@unique``,
   ``@range``, ``@check`` and ``@card`` is validated against every branch's rows as the new schema
   will hold them; a violation refuses the change (``bad_request``, the offending ids per branch),
   with nothing written.
4. The schema versions are recorded (:mod:`omnigraph.engine.manifest.schema_history`), the tables of added
   types created (empty, with the ``id`` primary key), then ``_schema.pg`` is replaced: the new
   schema is accepted. From here the change is completed, never undone.
5. Each branch gets one graph commit (:func:`upgrade_branch`, through the write protocol, so it is
   recovery-covered like any commit): its tables' columns change (a lazily inherited table is
   forked first), dropped and renamed types get retired manifest rows, added types are pinned,
   and the head carries the new schema version. Branches created meanwhile are upgraded too.
6. The change's record is deleted and the leases released.

A process killed before step 4 leaves a record whose target is not the accepted schema:
``omnigraph recover`` deletes it with the new version's record; what else it may leave changes
nothing a branch reads (the record of the first schema, the empty table of an added type, which
applying the same text again reuses). Killed after it, ``omnigraph
recover`` completes every branch (:func:`resume_interrupted`). While the record exists every
commit is refused (:func:`omnigraph.engine.ops.write.schema_change_pending`, naming ``omnigraph
recover``), so no commit lands on a branch the change has not reached, and a new change is
refused too.

A commit is always written under the schema version of the head it builds on; writers validated
against another version are refused (:func:`omnigraph.engine.ops.write.schema_moved`). A branch
created from a branch the change has not reached yet is upgraded by its create
(:func:`upgrade_new_branch`).

Failpoints: ``schema.before_accept`` (versions recorded, new tables created, ``_schema.pg`` not
replaced), ``schema.after_accept`` and ``schema.after_branch`` (after each branch's commit).
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict

from omnigraph.engine.errors import BadRequest, FormatRefused, Internal, NotFound, ReadSetConflict, RecoveryRequired
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.graph import Graph, default_actor, table_dir
from omnigraph.engine.manifest.rows import MAIN, BranchSnapshot, TableEntry, now_ms
from omnigraph.engine.manifest.schema_history import store_version, version_path
from omnigraph.engine.ops.write import CommitPlan, SchemaEffects, TableWrite, commit
from omnigraph.engine.reconcile import branch_lease, drift, recovery
from omnigraph.engine.reconcile.branch_lease import Lease, LeaseRecord
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.evolution import SchemaPlan, SchemaStep, SchemaVersion, TableChange, plan_change, table_changes
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.values import table_violations
from omnigraph.engine.storage import key_indexes
from omnigraph.engine.storage.lance_io import open_dataset, open_pinned
from omnigraph.engine.storage.names import FORMAT_5, SCHEMA_CHANGE_PATH, SCHEMA_FILE
from omnigraph.engine.storage.process import process_start_marker, this_host
from omnigraph.engine.storage.store import canonical_json

LISTED_PER_PROBLEM = 100
"""Offending ids listed per violated constraint and branch, at most."""


class SchemaChangeRecord(BaseModel):
    """A schema change in progress: ``__recovery/schema/change.json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    change_id: str
    from_schema_id: str
    to_schema_id: str
    actor: str
    host: str
    pid: int
    process_start: str | None
    created_at: int


class SchemaApplied(msgspec.Struct, frozen=True):
    """What :func:`apply_schema` did: ``applied`` (``commits``: branch -> commit id) or ``unchanged``."""

    plan: SchemaPlan
    outcome: str
    commits: dict[str, str] = msgspec.field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        """``{outcome, from_schema_id, to_schema_id, steps, commits}`` (commits by branch name)."""
        return {
            "outcome": self.outcome,
            "from_schema_id": self.plan.from_schema_id,
            "to_schema_id": self.plan.to_schema_id,
            "steps": [step.model_dump(mode="json") for step in self.plan.steps],
            "commits": dict(sorted(self.commits.items())),
        }


def plan_schema(graph: Graph, source: str) -> SchemaPlan:
    """The steps from the accepted schema to ``source``; writes nothing (refusals as :func:`apply_schema`'s step 1)."""
    return plan_change(graph.schemas.accepted(), Catalog.from_source(source))


def _require_fenced(graph: Graph) -> None:
    if graph.stamp != FORMAT_5 or not graph.profile.router.with_pk:
        raise FormatRefused(
            f"a schema change needs a fenced (format 5) graph; {graph.store.uri} is at format {graph.stamp}: upgrade it first "
            f"with `omnigraph-migrate preflight {graph.store.uri}` then `omnigraph-migrate run {graph.store.uri}`",
            {"stamp": graph.stamp},
        )
    if not graph.writable:
        raise BadRequest("the graph was opened read-only")


def apply_schema(graph: Graph, source: str, *, allow_data_loss: bool = False, actor: str | None = None) -> SchemaApplied:
    """Apply the schema ``source`` to every branch of ``graph`` (see the module docstring)."""
    _require_fenced(graph)
    new = Catalog.from_source(source)
    accepted = graph.schemas.accepted()
    plan = plan_change(accepted, new)
    if plan.data_loss and not allow_data_loss:
        lossy = [step.detail for step in plan.steps if step.data_loss]
        raise BadRequest(
            f"the schema change drops stored data ({'; '.join(lossy)}); nothing was written. Review the steps (schema plan lists "
            "them), then apply again with --allow-data-loss (Python: allow_data_loss=True)",
            {"data_loss": lossy},
        )
    _refuse_pending(graph)
    who = actor or default_actor()
    if plan.changes_source and plan.to_schema_id in graph.schemas.lineage(plan.from_schema_id):
        raise BadRequest(
            f"this exact schema text was accepted before (version {plan.to_schema_id[:12]}); a version is accepted once, so "
            "schema versions stay one line. Change the text (a comment is enough) and apply it again; nothing was written",
            {"schema_id": plan.to_schema_id},
        )
    if not plan.changes_source:
        return SchemaApplied(plan, "unchanged", converge(graph, actor=who))
    record = SchemaChangeRecord(
        change_id=os.urandom(8).hex(),
        from_schema_id=plan.from_schema_id,
        to_schema_id=plan.to_schema_id,
        actor=who,
        host=this_host(),
        pid=os.getpid(),
        process_start=process_start_marker(os.getpid()),
        created_at=now_ms(),
    )
    if not graph.store.put_if_absent(SCHEMA_CHANGE_PATH, canonical_json(record)):
        _refuse_pending(graph)
        raise ReadSetConflict("another schema change started meanwhile; nothing was written", {"member": "schema"})
    held = _BranchLeases(graph)
    accepted_now = False
    try:
        held.take(sorted(graph.manifest.branches(), key=_branch_order))
        snapshots = {branch: graph.manifest.snapshot(branch) for branch in held.leases}
        behind = sorted(b for b, s in snapshots.items() if graph.schemas.resolve(s.head.schema_id) != plan.from_schema_id)
        if behind:
            raise RecoveryRequired(
                None,
                f"branch(es) {', '.join(behind)} are not at the accepted schema; nothing was written. Run "
                f"`{drift.recover_command(graph.store.uri)}`, then apply again",
                branches=behind,
            )
        problems = [p for branch in sorted(snapshots) for p in validate_branch(graph, snapshots[branch], accepted, new, plan)]
        if problems:
            raise _violations(problems)
        if graph.schemas.version(plan.from_schema_id) is None:
            store_version(
                graph.store,
                SchemaVersion(
                    schema_id=plan.from_schema_id, parent_id=None, source=accepted.source, steps=[], actor=who, accepted_at=now_ms()
                ),
            )
        version = SchemaVersion(
            schema_id=plan.to_schema_id, parent_id=plan.from_schema_id, source=new.source, steps=plan.steps, actor=who, accepted_at=now_ms()
        )
        store_version(graph.store, version)
        create_added_tables(graph, version)
        failpoint("schema.before_accept")
        graph.store.write_bytes(SCHEMA_FILE, new.source.encode("utf-8"))
        accepted_now = True
        graph.catalog = new
        failpoint("schema.after_accept")
        commits = _upgrade_all(graph, held, who)
        graph.store.delete(SCHEMA_CHANGE_PATH)
    except BaseException:
        if accepted_now:
            held.abandon()  # left to lapse: whoever takes a lease over is sent to `omnigraph recover`
        else:
            graph.store.delete(version_path(plan.to_schema_id))  # never accepted: not a version of this graph
            graph.store.delete(SCHEMA_CHANGE_PATH)
            held.release()
        raise
    held.release()
    return SchemaApplied(plan, "applied", commits)


def _branch_order(name: str) -> tuple[bool, str]:
    return (name != MAIN, name)


def _refuse_pending(graph: Graph) -> None:
    if graph.store.exists(SCHEMA_CHANGE_PATH):
        raise ReadSetConflict(
            "a schema change of this graph is in progress or was interrupted; nothing was written. If no `schema apply` is "
            f"running, `{drift.recover_command(graph.store.uri)}` completes (or withdraws) it",
            {"member": "schema", "expected": "no schema change in progress", "actual": SCHEMA_CHANGE_PATH},
        )


class _BranchLeases:
    """The branch leases one schema change holds, taken in branch order."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.leases: dict[str, Lease] = {}

    def take(self, branches: list[str]) -> None:
        for branch in branches:
            if branch in self.leases:
                continue
            attempt = branch_lease.acquire(self.graph.store, branch, "schema", wait_seconds=branch_lease.WAIT_SECONDS)
            if attempt.held is None:
                assert attempt.holder is not None
                raise branch_lease.busy_error(branch, attempt.holder, "the schema change")
            self.leases[branch] = attempt.held
            previous = attempt.taken_over()
            if previous is not None:
                _fence_taken_over(self.graph, attempt.held, previous)

    def release(self) -> None:
        for lease in self.leases.values():
            lease.release()

    def abandon(self) -> None:
        for lease in self.leases.values():
            lease.stop_renewing()


def _fence_taken_over(graph: Graph, lease: Lease, previous: LeaseRecord) -> None:
    """What taking over ``previous`` asks of a schema change: fence the branch, resolve dead commits."""
    try:
        recovery.take_over(graph.store, graph.manifest, previous)
        if previous.branch in graph.manifest.branches():
            recovery.resolve_branch(graph.store, graph.manifest, previous.branch)
    except BaseException:
        lease.stop_renewing()
        raise


def _upgrade_all(graph: Graph, held: _BranchLeases, actor: str) -> dict[str, str]:
    """Upgrade every branch under ``held`` leases, then any branch created meanwhile, until none is left."""
    commits: dict[str, str] = {}
    while True:
        pending = [b for b in sorted(graph.manifest.branches(), key=_branch_order) if b not in commits]
        if not pending:
            return commits
        held.take(pending)
        for branch in pending:
            if branch not in graph.manifest.branches():
                commits[branch] = ""
                continue
            made = upgrade_branch(graph, branch, held.leases[branch], actor)
            commits[branch] = made[-1] if made else ""
            failpoint("schema.after_branch")


def create_added_tables(graph: Graph, version: SchemaVersion) -> dict[str, int]:
    """Create the empty table of each type ``version`` adds (with the ``id`` PK and its key indexes), unless it exists.

    Returns, per added table key, the version of its table that a branch brought to ``version``
    pins (:func:`_empty_image`).
    """
    catalog = graph.schemas.catalog(version.schema_id)
    pins = {}
    for step in version.steps:
        if step.kind == "add_type":
            schema = catalog.table(step.table_key).arrow_schema(with_pk=True)
            pins[step.table_key] = _empty_image(graph, added_table_path(step.table_key, version.schema_id), schema)
    return pins


def _empty_image(graph: Graph, path: str, schema: pa.Schema) -> int:
    """Create the added table at ``path`` if it does not exist; the version of it that is empty: what a branch pins.

    A new table is created empty and indexed (:func:`omnigraph.engine.storage.key_indexes.created_version`).
    One that exists is pinned at that version when it is the empty indexed image; one whose
    creation stopped between its index builds (still empty) gets the indexes it lacks first; one
    made by an engine that did not index new tables, and written since, is pinned at version 1,
    its empty image, as that engine pinned it.
    """
    expected = key_indexes.created_version(schema)
    try:
        open_dataset(graph.store, path, None, 1)
    except (ValueError, OSError):
        created = graph.profile.router.create_table(graph.store, path, schema)
        if created != expected:
            raise Internal(f"the new table {path} was created at version {created}, not {expected}") from None
        return created
    head = open_dataset(graph.store, path)
    if int(head.version) < expected:
        return key_indexes.create_on_empty(head) if head.count_rows() == 0 else 1
    indexed = open_dataset(graph.store, path, None, expected)
    if indexed.count_rows() == 0 and set(key_indexes.key_columns(schema)) <= set(key_indexes.btree_indexes(indexed)):
        return expected
    return 1


def added_table_path(table_key: str, version_id: str) -> str:
    """Where the table of a type added by schema version ``version_id`` lives."""
    return f"{table_dir(table_key)}-{version_id[:26]}"


def upgrade_branch(graph: Graph, branch: str, lease: Lease, actor: str) -> list[str]:
    """Bring ``branch`` to the accepted schema, one graph commit per schema version; the caller holds its lease.

    Returns the commit ids made (none if the branch was at the accepted schema). A violation of a
    new constraint on the branch's rows is ``bad_request`` with nothing of that commit written.
    """
    graph.manifest.ensure_schema_column(branch)
    target = graph.schemas.accepted().version_id
    made: list[str] = []
    while True:
        snapshot = graph.manifest.snapshot(branch)
        current = graph.schemas.resolve(snapshot.head.schema_id)
        if current == target:
            return made
        line = graph.schemas.lineage(target)
        if current not in line:
            raise Internal(f"branch {branch!r} is at schema version {current[:12]}, which does not precede the accepted {target[:12]}")
        version = graph.schemas.version(line[line.index(current) - 1])
        assert version is not None and version.parent_id is not None
        pins = create_added_tables(graph, version)
        result = commit(graph, branch, _upgrade_plan(graph, version, pins), actor=actor, held=lease)
        assert result.published is not None
        made.append(result.published.commit_id)


def _upgrade_plan(graph: Graph, version: SchemaVersion, pins: dict[str, int]) -> Any:
    assert version.parent_id is not None
    old, new = graph.schemas.catalog(version.parent_id), graph.schemas.catalog(version.schema_id)
    plan = SchemaPlan(from_schema_id=version.parent_id, to_schema_id=version.schema_id, steps=version.steps)
    changes = table_changes(plan, old, new)

    def prepare(snapshot: BranchSnapshot, _previous: CommitPlan[None] | None) -> CommitPlan[None]:
        problems = validate_branch(graph, snapshot, old, new, plan)
        if problems:
            raise _violations(problems)
        writes = tuple(
            TableWrite(old_key, "evolve", pa.table({}), change=change)
            for old_key, change in sorted(changes.items())
            if change.touches_columns
        )
        added = tuple(
            TableEntry(step.table_key, added_table_path(step.table_key, version.schema_id), None, pins[step.table_key], 0)
            for step in plan.steps
            if step.kind == "add_type"
        )
        rekeyed = tuple((c.old_key, c.new_key) for _, c in sorted(changes.items()) if c.old_key != c.new_key)
        retired = tuple(sorted({s.table_key for s in plan.steps if s.kind == "drop_type"} | {old_key for old_key, _ in rekeyed}))
        effects = SchemaEffects(schema_id=version.schema_id, added=added, rekeyed=rekeyed, retired=retired)
        message = f"schema change to {version.schema_id[:12]}: {len(plan.steps)} step(s)"
        return CommitPlan(writes, (snapshot.head.commit_id,), message, None, publish_empty=True, schema=effects)

    return prepare


# -- validation -------------------------------------------------------------------------------


def validate_branch(graph: Graph, snapshot: BranchSnapshot, old: Catalog, new: Catalog, plan: SchemaPlan) -> list[dict[str, Any]]:
    """Every violation of the plan's validated steps by ``snapshot``'s rows, as the new schema holds them."""
    changes = {change.new_key: change for change in table_changes(plan, old, new).values()}
    problems: list[dict[str, Any]] = []
    for step in plan.steps:
        if not step.validates:
            continue
        table = new.table(step.table_key)
        if step.constraint == "card":
            problems += _card_problems(graph, snapshot, table, changes, new)
            continue
        change = changes.get(step.table_key)
        if change is None:
            continue  # a new type: no rows
        rows = _rows(graph, snapshot, change, [*step.members])
        if step.constraint == "unique":
            problems += _unique_problems(table, step, rows)
        else:
            rule_table = msgspec.structs.replace(
                table,
                ranges=tuple(r for r in table.ranges if r.property == step.members[0]) if step.constraint == "range" else (),
                checks=tuple(c for c in table.checks if c.property == step.members[0]) if step.constraint == "check" else (),
            )
            ids = rows.column("id").to_pylist()
            bad = [ids[v.index] for v in table_violations(rule_table, rows)]
            if bad:
                problems.append(
                    _problem(step, table, f"{len(bad)} row(s) break {step.detail.split(' on ')[0].removeprefix('add ')}", sorted(bad))
                )
    return [{"branch": snapshot.branch, **problem} for problem in problems]


def _rows(graph: Graph, snapshot: BranchSnapshot, change: TableChange, members: list[str]) -> pa.Table:
    """``id`` and ``members`` (new names) of the table's rows on ``snapshot``, as the new schema holds them."""
    back = {new_name: old_name for old_name, new_name in change.renames}
    added = {a.field.name for a in change.adds}
    stored = [back.get(m, m) for m in members if m not in added]
    dataset = open_pinned(graph.store, snapshot.table(change.old_key).image)
    rows = dataset.to_table(columns=["id", *dict.fromkeys(stored)])
    adapted = change.adapt(rows)
    return adapted.select(["id", *dict.fromkeys(members)])


def _problem(step: SchemaStep, table: TableDef, what: str, ids: list[str], **more: Any) -> dict[str, Any]:
    return {
        "table_key": table.table_key,
        "kind": f"{step.constraint}_violation",
        "constraint": step.detail,
        "what": what,
        "count": len(ids),
        "ids": ids[:LISTED_PER_PROBLEM],
        **more,
    }


def _unique_problems(table: TableDef, step: SchemaStep, rows: pa.Table) -> list[dict[str, Any]]:
    members = list(step.members)
    present = rows
    for member in members:
        present = present.filter(pc.is_valid(present.column(member)))
    grouped = present.group_by(members).aggregate([("id", "list")])
    repeated = grouped.filter(pc.greater(pc.list_value_length(grouped.column("id_list")), 1))
    if repeated.num_rows == 0:
        return []
    ids = sorted(i for group in repeated.column("id_list").to_pylist() for i in group)
    values = [[row[m] for m in members] for row in repeated.select(members).to_pylist()][:LISTED_PER_PROBLEM]
    return [_problem(step, table, f"{repeated.num_rows} value(s) are held by more than one row", ids, values=sorted(values, key=repr))]


def _card_problems(
    graph: Graph, snapshot: BranchSnapshot, edge: TableDef, changes: dict[str, TableChange], new: Catalog
) -> list[dict[str, Any]]:
    node_change, edge_change = changes.get(f"node:{edge.from_type}"), changes.get(edge.table_key)
    if node_change is None or edge_change is None:
        return []  # a new type: no rows, so only a minimum could fail, on nodes that do not exist
    nodes = open_pinned(graph.store, snapshot.table(node_change.old_key).image).to_table(columns=["id"]).column("id")
    sources = open_pinned(graph.store, snapshot.table(edge_change.old_key).image).to_table(columns=["src"]).column("src")
    counts = pa.table({"src": sources}).group_by("src").aggregate([("src", "count")])
    by_node = dict(zip(counts.column("src").to_pylist(), counts.column("src_count").to_pylist(), strict=True))
    bad = sorted(node for node in nodes.to_pylist() if not edge.cardinality.allows(by_node.get(node, 0)))
    if not bad:
        return []
    step = SchemaStep(kind="add_constraint", table_key=edge.table_key, detail=f"@card({edge.cardinality.describe()})", constraint="card")
    card = edge.cardinality.describe()
    what = f"{len(bad)} {edge.from_type} node(s) are the source of a number of {edge.type_name} edges outside @card({card})"
    return [_problem(step, edge, what, bad, source_type=f"node:{edge.from_type}")]


def _violations(problems: list[dict[str, Any]]) -> BadRequest:
    listed = "; ".join(
        f"branch {p['branch']}: {p['table_key']}: {p['what']} (ids: {', '.join(p['ids'][:10])}{', ...' if p['count'] > 10 else ''})"
        for p in problems
    )
    return BadRequest(
        f"existing rows break the new schema's constraints; nothing was written: {listed}. Fix those rows (or drop the "
        "constraint from the new schema), then apply again",
        {"problems": problems},
    )


# -- completing an interrupted change ---------------------------------------------------------


def converge(graph: Graph, *, actor: str | None = None) -> dict[str, str]:
    """Upgrade every branch that is behind the accepted schema (each under its lease); branch -> last commit id."""
    who = actor or default_actor()
    commits: dict[str, str] = {}
    target = graph.schemas.accepted().version_id
    for branch in sorted(graph.manifest.branches(), key=_branch_order):
        try:
            snapshot = graph.manifest.snapshot(branch)
        except NotFound:
            continue  # deleted meanwhile: nothing to upgrade
        if graph.schemas.resolve(snapshot.head.schema_id) == target:
            continue
        held = _BranchLeases(graph)
        try:
            held.take([branch])
            made = upgrade_branch(graph, branch, held.leases[branch], who)
        except BaseException:
            held.abandon()
            raise
        held.release()
        if made:
            commits[branch] = made[-1]
    return commits


def _in_flight(graph: Graph, record: SchemaChangeRecord) -> bool:
    """Whether the change's process still holds main's lease for it."""
    current = branch_lease.latest(graph.store, MAIN)
    return (
        current is not None
        and current.operation == "schema"
        and (current.host, current.pid) == (record.host, record.pid)
        and current.held_by_live_holder()
    )


def resume_interrupted(graph: Graph) -> tuple[str | None, dict[str, str]]:
    """Finish a schema change whose process is gone.

    Returns ``withdrawn`` (it was not accepted yet: its version record is deleted too),
    ``completed`` (with branch -> commit of each branch it brought to the new schema), or None
    (no change recorded, or its process still runs).
    """
    try:
        record = SchemaChangeRecord.model_validate_json(graph.store.read_bytes(SCHEMA_CHANGE_PATH))
    except FileNotFoundError:
        return None, {}
    if _in_flight(graph, record):
        return None, {}
    accepted = graph.schemas.accepted()
    if accepted.version_id != record.to_schema_id:
        if record.to_schema_id not in graph.schemas.lineage(accepted.version_id):
            graph.store.delete(version_path(record.to_schema_id))
        graph.store.delete(SCHEMA_CHANGE_PATH)
        return "withdrawn", {}
    version = graph.schemas.version(record.to_schema_id)
    if version is not None:
        create_added_tables(graph, version)
    graph.catalog = accepted
    commits = converge(graph, actor=record.actor)
    graph.store.delete(SCHEMA_CHANGE_PATH)
    return "completed", commits


def upgrade_new_branch(graph: Graph, branch: str, lease: Lease) -> bool:
    """After a create: bring the new ``branch`` (whose lease the caller holds) to the accepted schema; whether it had to."""
    snapshot = graph.manifest.snapshot(branch)
    if graph.schemas.resolve(snapshot.head.schema_id) == graph.schemas.accepted().version_id:
        return False
    upgrade_branch(graph, branch, lease, default_actor())
    return True
