"""Duplicate repair under the migration claim: the only writer allowed behind the barrier.

A failed validation leaves stamp ``migrating`` and the claim held. The operator writes a
decisions file (start from :func:`template`): for every duplicate or null id, on every branch
that pins the broken image, one action:

* ``keep``: the row ``keep_row_id`` keeps the id, the other rows are removed;
* ``rename``: the row ``keep_row_id`` keeps the id (for null ids: none does), every other row
  gets the id given in ``new_ids`` (``"generate"`` for a new ULID); refused for keyed node types,
  whose id is derived from the key;
* ``delete``: every row with the id is removed; refused for a node that edges still reference.

Nothing is chosen without a decision: an entry without an action refuses the whole file before
any write. :func:`apply` writes one recorded graph commit per (branch, table) through the engine
write protocol, then a ``repair_applied`` ledger record per commit. A later ``resume`` plans and
validates afresh.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from omnigraph.claims.acting import acting_for
from omnigraph.engine.door.routing import EngineProfile
from omnigraph.engine.door.table_store import FENCED_ROUTER
from omnigraph.engine.errors import BadRequest, FormatRefused
from omnigraph.engine.graph import Graph, open_graph
from omnigraph.engine.manifest.rows import BranchSnapshot
from omnigraph.engine.ops.constraints import present_ids
from omnigraph.engine.ops.write import CommitPlan, TableWrite, commit
from omnigraph.engine.progress import Progress, SilentProgress
from omnigraph.engine.schema.ids import new_ulid
from omnigraph.engine.storage.blobs import ROW_ID, blob_names, materialize
from omnigraph.engine.storage.lance_io import ImageRef, open_pinned
from omnigraph.engine.storage.names import FORMAT_MIGRATING
from omnigraph.engine.storage.store import GraphStore
from omnigraph.ledger.records import InventoryEntry, RepairApplied, RepairDecision
from omnigraph.migrator.claim import Migration, held_migration
from omnigraph.migrator.layout import CLAIM_PATH
from omnigraph.migrator.plan import build_plan, inventory, validate_images

# The libyaml-backed safe loader when available: the pure-Python one takes seconds per MB.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

GENERATE = "generate"

REPAIR_PROFILE = EngineProfile(
    program="omnigraph-migrate repair",
    init_stamp=FORMAT_MIGRATING,
    read_write_stamps=frozenset({FORMAT_MIGRATING}),
    read_only_stamps=frozenset({FORMAT_MIGRATING}),
    router=msgspec.structs.replace(FENCED_ROUTER, check_writable=None),
    refusal_hint="duplicate repair runs only behind the migration barrier (stamp migrating)",
)


class FoundRow(BaseModel):
    """One row carrying the broken id, as the template shows it (for the operator to choose)."""

    model_config = ConfigDict(extra="forbid")

    row_id: int
    values: dict[str, Any]


class RepairChoice(BaseModel):
    """The decision for one broken id on one branch."""

    model_config = ConfigDict(extra="forbid")

    entity_kind: Literal["node", "edge"]
    type_name: str
    table_key: str
    entity_id: str | None
    graph_branch: str
    table_branch: str | None
    table_version: int
    rows: list[FoundRow]
    action: Literal["keep", "rename", "delete"] | None = None
    keep_row_id: int | None = None
    new_ids: dict[int, str] = {}


class DecisionsFile(BaseModel):
    """The operator's decisions file: the migration it was written for, the graph, every choice."""

    model_config = ConfigDict(extra="forbid")

    migration_id: str
    graph: str
    decisions: list[RepairChoice]


def _rows_with_id(graph: Graph, entry_path: str, table_branch: str | None, version: int, entity_id: str | None) -> pa.Table:
    dataset = open_pinned(graph.store, ImageRef(entry_path, table_branch, version))
    predicate = pc.field("id").is_null() if entity_id is None else pc.field("id") == entity_id
    return dataset.scanner(filter=predicate, with_row_id=True).to_table()


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def template(store: GraphStore, token: str, progress: Progress | None = None) -> DecisionsFile:
    """Every broken id on every branch that pins it, with its rows and no action chosen."""
    m = held_migration(store, token, progress or SilentProgress())
    plan = build_plan(m.manifest)
    broken: list[InventoryEntry] = inventory(plan, validate_images(m.store, plan, m.progress))
    graph = open_graph(store, REPAIR_PROFILE, write=False)
    choices = []
    for entry in broken:
        table_key = f"{entry.entity_kind}:{entry.type_name}"
        rows = _rows_with_id(graph, entry.table_path, entry.table_branch, entry.table_version, entry.entity_id)
        found = [FoundRow(row_id=int(row.pop("_rowid")), values=_jsonable(row)) for row in rows.to_pylist()]
        for branch in entry.graph_branches:
            choices.append(
                RepairChoice(
                    entity_kind=entry.entity_kind,
                    type_name=entry.type_name,
                    table_key=table_key,
                    entity_id=entry.entity_id,
                    graph_branch=branch,
                    table_branch=entry.table_branch,
                    table_version=entry.table_version,
                    rows=sorted(found, key=lambda r: r.row_id),
                )
            )
    return DecisionsFile(migration_id=m.migration_id, graph=m.store.uri, decisions=choices)


def write_decisions(path: Path, decisions: DecisionsFile) -> None:
    """Write a decisions file (YAML); an existing file is never overwritten."""
    if path.exists():
        raise BadRequest(f"{path} exists; refusing to overwrite a decisions file", {"path": str(path)})
    header = (
        "# Duplicate repair decisions. For every entry set `action` to keep, rename or delete.\n"
        "# keep: keep_row_id keeps the id. rename: keep_row_id keeps the id (omit it for null ids)\n"
        '# and every other row gets the id in new_ids (row_id: new id, or "generate").\n'
        "# delete: every row with the id goes. Nothing is applied while an action is missing.\n"
    )
    path.write_text(header + yaml.safe_dump(decisions.model_dump(mode="json"), sort_keys=True, allow_unicode=True))


def read_decisions(path: Path) -> DecisionsFile:
    """Parse a decisions file; every problem is named with its location in the file."""
    try:
        document = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except (OSError, yaml.YAMLError, UnicodeDecodeError, RecursionError) as error:
        raise BadRequest(f"cannot read decisions file {path}: {error}", {"path": str(path)}) from error
    try:
        return DecisionsFile.model_validate(document)
    except ValidationError as error:
        problems = [f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}" for item in error.errors()]
        raise BadRequest(
            f"decisions file {path} is not valid: " + "; ".join(problems), {"path": str(path), "problems": problems}
        ) from error


def _check_choice(graph: Graph, choice: RepairChoice) -> None:
    where = f"{choice.table_key} id {choice.entity_id!r} on {choice.graph_branch}"
    row_ids = {row.row_id for row in choice.rows}
    if choice.action is None:
        raise BadRequest(f"{where}: no action chosen; nothing was applied", {"entity_id": choice.entity_id})
    keyed = choice.entity_kind == "node" and graph.catalog.node(choice.type_name).key is not None
    if choice.action == "rename" and keyed:
        raise BadRequest(f"{where}: {choice.type_name} ids are derived from its @key; keep one row or delete")
    if choice.action == "keep" and choice.entity_id is None:
        raise BadRequest(f"{where}: a null id cannot be kept; rename or delete the rows")
    if choice.action in ("keep", "rename") and choice.entity_id is not None and choice.keep_row_id not in row_ids:
        raise BadRequest(f"{where}: keep_row_id must be one of {sorted(row_ids)}")
    if choice.action == "rename":
        expected = row_ids - {choice.keep_row_id}
        if set(choice.new_ids) != expected:
            raise BadRequest(f"{where}: new_ids must name exactly the rows {sorted(expected)}")


def _edges_referencing(graph: Graph, snapshot: BranchSnapshot, node_type: str, node_id: str) -> list[str]:
    found = []
    for table_key in graph.catalog.table_keys():
        table = graph.catalog.table(table_key)
        if table.kind != "edge" or node_type not in (table.from_type, table.to_type):
            continue
        entry = snapshot.table(table_key)
        dataset = open_pinned(graph.store, entry.image)
        hits = dataset.to_table(columns=["id"], filter=(pc.field("src") == node_id) | (pc.field("dst") == node_id))
        found += [f"{table_key} {edge_id}" for edge_id in hits.column("id").to_pylist()]
    return sorted(found)


def _with_payloads(graph: Graph, path: str, choice: RepairChoice, found: pa.Table) -> pa.Table:
    """``found`` (scanned with ``_rowid``) with each Blob cell's descriptor replaced by its bytes.

    So a kept or renamed row is inserted again with its payload.
    """
    dataset = open_pinned(graph.store, ImageRef(path, choice.table_branch, choice.table_version))
    names = blob_names(dataset.schema)
    if not names:
        return found
    return materialize(dataset, found, names).append_column(ROW_ID, found.column(ROW_ID))


def _rows_to_insert(graph: Graph, choice: RepairChoice, snapshot: BranchSnapshot) -> tuple[list[dict[str, Any]], list[RepairDecision]]:
    path = snapshot.table(choice.table_key).table_path
    found = _rows_with_id(graph, path, choice.table_branch, choice.table_version, choice.entity_id)
    by_row = {int(row.pop("_rowid")): row for row in _with_payloads(graph, path, choice, found).to_pylist()}
    listed = sorted(row.row_id for row in choice.rows)
    if sorted(by_row) != listed:
        raise BadRequest(
            f"{choice.table_key} id {choice.entity_id!r} on {choice.graph_branch}: the decisions file lists "
            f"rows {listed} but the image holds rows {sorted(by_row)}; every row must be listed and "
            "decided (regenerate the template)",
            {"listed": listed, "actual": sorted(by_row)},
        )
    if choice.action == "delete":
        if choice.entity_kind == "node" and choice.entity_id is not None:
            edges = _edges_referencing(graph, snapshot, choice.type_name, choice.entity_id)
            if edges:
                raise BadRequest(
                    f"deleting node {choice.type_name} {choice.entity_id!r} on {choice.graph_branch} would "
                    f"leave edges without an endpoint ({', '.join(edges[:5])}); keep one row instead",
                    {"edges": edges},
                )
        return [], [RepairDecision(entity_id=choice.entity_id, action="delete", new_id=None, rows=len(by_row))]
    rows: list[dict[str, Any]] = []
    decisions: list[RepairDecision] = []
    if choice.keep_row_id is not None:
        rows.append(by_row[choice.keep_row_id])
        decisions.append(RepairDecision(entity_id=choice.entity_id, action="keep", new_id=None, rows=1))
    for row_id, new_id in sorted(choice.new_ids.items()):
        renamed = dict(by_row[row_id], id=new_ulid() if new_id == GENERATE else new_id)
        rows.append(renamed)
        decisions.append(RepairDecision(entity_id=choice.entity_id, action="rename", new_id=renamed["id"], rows=1))
    return rows, decisions


def apply(store: GraphStore, token: str, decisions: DecisionsFile, actor: str) -> list[RepairApplied]:
    """Apply every decision (see the module docstring); returns the ledger records written.

    The decisions are checked against the claim, the barrier and the catalog first (a refusal
    writes nothing); then this process (``actor``) is recorded as acting for the claim, refused
    (``claim_held``) while another process acting for it is alive on this host
    (:mod:`omnigraph.claims.acting`).
    """
    m: Migration = held_migration(store, token, SilentProgress())
    if decisions.migration_id != m.migration_id:
        raise BadRequest(f"the decisions were written for migration {decisions.migration_id}, not {m.migration_id}; regenerate them")
    stamp, _ = m.manifest.read_stamp()
    if stamp != FORMAT_MIGRATING:
        raise FormatRefused(f"repair needs the migration barrier (stamp migrating), found {stamp!r}")
    checking = open_graph(store, REPAIR_PROFILE, write=False)
    for choice in decisions.decisions:
        _check_choice(checking, choice)
    with acting_for(m.store, CLAIM_PATH, m.claim, action="repair", owner=actor):
        return _apply(m, decisions, actor)


def _apply(m: Migration, decisions: DecisionsFile, actor: str) -> list[RepairApplied]:
    """The body of :func:`apply`, acting for the claim."""
    graph = open_graph(m.store, REPAIR_PROFILE, write=True, claim_token=m.token)
    groups: dict[tuple[str, str], list[RepairChoice]] = {}
    for choice in decisions.decisions:
        groups.setdefault((choice.graph_branch, choice.table_key), []).append(choice)
    applied: list[RepairApplied] = []
    for (branch, table_key), choices in sorted(groups.items()):

        def prepare(
            snapshot: BranchSnapshot,
            _previous: CommitPlan[tuple[RepairDecision, ...]] | None,
            choices: list[RepairChoice] = choices,
            table_key: str = table_key,
            branch: str = branch,
        ) -> CommitPlan[tuple[RepairDecision, ...]]:
            entry = snapshot.table(table_key)
            recorded: list[RepairDecision] = []
            rows: list[dict[str, Any]] = []
            for choice in choices:
                if (entry.table_branch, entry.table_version) != (choice.table_branch, choice.table_version):
                    raise BadRequest(f"{table_key} on {branch} is no longer the image the decisions were made on; regenerate them")
                inserted, made = _rows_to_insert(graph, choice, snapshot)
                rows += inserted
                recorded.extend(made)
            schema = graph.catalog.table(table_key).arrow_schema(with_pk=False)
            ids = sorted({c.entity_id for c in choices if c.entity_id is not None})
            new_ids = [row["id"] for row in rows if row["id"] not in ids]
            taken = sorted(present_ids(graph, entry, new_ids)) + sorted({i for i in new_ids if new_ids.count(i) > 1})
            if taken:
                raise BadRequest(f"{table_key} on {branch}: new id(s) {taken} are already used; choose others")
            nulls = any(c.entity_id is None for c in choices)
            writes = (TableWrite(table_key, "repair", pa.Table.from_pylist(rows, schema=schema), tuple(ids), nulls),)
            return CommitPlan(writes, (snapshot.head.commit_id,), f"duplicate repair ({m.migration_id})", tuple(recorded))

        done = commit(graph, branch, prepare, actor=actor)
        assert done.published is not None
        record = RepairApplied(
            token=m.token,
            migration_id=m.migration_id,
            graph_branch=branch,
            table_key=table_key,
            decisions=list(done.plan.payload),
            commit_id=done.published.commit_id,
        )
        m.ledger.append(record)
        applied.append(record)
    return applied
