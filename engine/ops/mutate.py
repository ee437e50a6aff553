"""``mutate``: run one ``.gq`` query against a branch as (at most) one graph commit.

Semantics (see ``docs/mutations.md``):

* keyed node ``insert`` = upsert by the derived id, the whole row replaced (omitted nullable
  properties become null); unkeyed node and edge ``insert`` = strict insert with a generated id
  (or an explicit ``id:``, as load's ``data.id``); an attempted id that exists is ``key_conflict``;
* ``update`` (nodes only) rewrites the matched rows with the assigned properties;
* ``delete`` removes the matched rows; a node delete also removes every edge whose ``src`` or
  ``dst`` is a deleted node (both directions, every edge type over that node type);
* statements run in order over the committed snapshot plus the query's own pending rows
  (read-your-writes: a pending row shadows the committed row with its id, a pending delete hides
  it); one commit at the end; a query that writes nothing publishes no commit (``commit`` None);
* edge endpoints and ``@unique`` are checked on the result before anything is armed
  (:func:`omnigraph.engine.ops.merge_check.check_merged`, the same checks as branch merge).

This module selects and binds the query and runs it as one commit; the evaluation itself (what
each statement stages) is :mod:`omnigraph.engine.ops.mutate_eval`.

Limits: per table, strict-insert plus upsert rows (an update's matched rows included, counted
while matching) and their Arrow data within the per-commit limits (:mod:`omnigraph.engine.ops.limits`),
else ``resource_limit`` before any intent is armed. Deleted ids are not staged rows and are not
limited.

Conflicts (all through :func:`omnigraph.engine.ops.write.commit`, which re-runs ``prepare`` on a fresh
snapshot after a storage conflict that landed nothing): an insert-only query is re-prepared
(upserts retried, strict inserts re-probed: ``key_conflict`` only if an attempted id now exists,
generated ids stay the same, never turned into an upsert); a query with an ``update`` or
``delete`` read the branch, so a re-prepare on a moved head is ``read_set_conflict``
``{member, expected, actual}``. ``if_commit`` must equal the branch head at every prepare, else
``precondition_failed`` ``{expected, actual}``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from lance.blob import Blob

from omnigraph.engine.errors import BadRequest, PreconditionFailed, ReadSetConflict
from omnigraph.engine.gq.checker import BoundQuery, check_mix, check_query
from omnigraph.engine.gq.parser import choose_query
from omnigraph.engine.gq.syntax import Query
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import BranchSnapshot
from omnigraph.engine.ops.blob_staging import BYTES_ONLY
from omnigraph.engine.ops.mutate_eval import Affected, Evaluation
from omnigraph.engine.ops.write import commit
from omnigraph.engine.ops.write_plan import CommitPlan, CommitResult
from omnigraph.engine.schema.ids import new_ulid


@dataclass(frozen=True)
class MutationResult:
    """What a mutation did; ``commit`` is None when it wrote nothing."""

    query: str
    branch: str
    affected_nodes: int
    affected_edges: int
    distinct_nodes: int
    distinct_edges: int
    commit: CommitResult | None

    def document(self) -> dict[str, Any]:
        """The ``mutate --json`` document: ``affected_*`` per statement, ``distinct_*`` each row once."""
        return {
            "affected_nodes": self.affected_nodes,
            "affected_edges": self.affected_edges,
            "distinct_nodes": self.distinct_nodes,
            "distinct_edges": self.distinct_edges,
            "commit": self.commit.commit_id if self.commit else None,
        }


def select_query(source: str, name: str | None) -> Query:
    """Parse ``source`` and pick the mutation ``name`` (optional when the source holds one query).

    A read query is refused (it names ``omnigraph query``); so is the insert/update + delete
    mix, before any I/O.
    """
    query = choose_query(source, name, "mutation")
    check_mix(query)
    return query


def now_utc() -> dt.datetime:
    """The current instant as naive UTC with millisecond precision (what a DateTime stores)."""
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def mutate(
    graph: Graph,
    source: str,
    *,
    name: str | None = None,
    params: dict[str, Any] | None = None,
    branch: str,
    if_commit: str | None = None,
    actor: str,
    external_blobs: bool = True,
) -> MutationResult:
    """Run the query ``name`` of ``source`` on ``branch``; see the module docstring. Without
    ``external_blobs`` a Blob value naming an external object is refused before any I/O."""
    query = select_query(source, name)
    bound = check_query(query, graph.catalog, params or {}, now_utc())
    if not external_blobs:
        _refuse_external(bound)
    graph.manifest.require_branch(branch)
    ids = _generated_ids(bound)
    reads_branch = any(statement.verb != "insert" for statement in bound.statements)

    def prepare(snapshot: BranchSnapshot, previous: CommitPlan[Affected] | None) -> CommitPlan[Affected]:
        head = snapshot.head.commit_id
        if if_commit is not None and head != if_commit:
            raise PreconditionFailed(
                f"branch {branch!r} is at commit {head}, not {if_commit} (--if-commit); nothing was written",
                {"expected": if_commit, "actual": head},
            )
        if reads_branch and previous is not None and head != previous.base_head:
            raise ReadSetConflict(
                f"branch {branch!r} moved from {previous.base_head} to {head} while query {bound.name!r} was "
                "being written; its update/delete matched rows of the old head; nothing was written, "
                "run the mutation again",
                {"member": branch, "expected": previous.base_head, "actual": head},
            )
        staged = Evaluation(graph, snapshot, ids).run(bound)
        return CommitPlan(staged.writes(), (head,), f"mutate {bound.name}", staged.affected())

    done = commit(graph, branch, prepare, actor=actor)
    affected = done.plan.payload
    return MutationResult(
        bound.name, branch, affected.nodes, affected.edges, affected.distinct_nodes, affected.distinct_edges, done.published
    )


def _refuse_external(bound: BoundQuery) -> None:
    for statement in bound.statements:
        for prop, value in sorted(statement.values.items()):
            if isinstance(value, Blob) and value.uri is not None:
                raise BadRequest(
                    f"line {statement.line}: {statement.table.type_name}.{prop} " + BYTES_ONLY.format(uri=value.uri),
                    {"line": statement.line, "type_name": statement.table.type_name, "property": prop},
                )


def _generated_ids(bound: BoundQuery) -> dict[int, str]:
    """One id per strict insert without an explicit id, minted once so a re-prepare reuses it."""
    return {
        index: new_ulid()
        for index, statement in enumerate(bound.statements)
        if statement.verb == "insert" and statement.table.key is None and "id" not in statement.values
    }
