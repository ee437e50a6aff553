"""The write protocol: one graph commit is prepare, lease, arm, effects, publish, disarm.

:func:`commit` is the one seam every write goes through. A write hands it one :data:`Prepare`
function and gets back a :class:`WriteResult`: the :class:`CommitPlan` of the attempt that
finished and the :class:`CommitResult` it published (None when the plan had nothing to publish).
A graph opened read-only refuses every commit (``bad_request``). Every attempt writes to the
branch incarnation the commit started on, or to none.

Every attempt holds its branch's lease (:mod:`omnigraph.engine.reconcile.branch_lease`) from its
pin check to its disarm, on a snapshot read under the lease (a plan prepared before the lease on a
snapshot that has moved since is prepared again under it), so commits on one branch are
serializable across processes and hosts, and commits on different branches never wait for each
other. A commit waits
for the lease up to :data:`omnigraph.engine.reconcile.branch_lease.WAIT_SECONDS` (then ``read_set_conflict``, nothing written). Taking
over a lease from a holder that lapsed but may still run fences that holder first
(:func:`omnigraph.engine.reconcile.recovery.take_over`). Under the lease the commit keeps this
invariant: **every published table version contains only effects of published commits.** Three
rules keep it:

* an effect lands only on the version the manifest pins (the pin check below; a table past its
  pin holds effects of commits that are not in flight, which the holder resolves first);
* an effect must lie directly on the version it read: its commits are the table's next versions,
  one per commit it made. A commit of another process in between (a writer that lost its lease
  while paused and woke up) makes the version carry that commit's rows, so the attempt rolls its
  own effects back (restoring every table it touched to its pin) and runs again;
* only the holder publishes: the lease is checked before every effect and before every publish
  (and again after a lost publish, on the re-read snapshot), and a holder that lost it is refused
  (``read_set_conflict``), its intent left to the next holder, which rolls it back.

An attempt:

1. Prepare: ``prepare(snapshot, previous)`` gets a fresh branch snapshot and the plan of the
   attempt before (None on the first) and returns one :class:`CommitPlan`: the per-table writes
   (:class:`TableWrite`, one router operation each), the parents and message of the head to
   publish, whether a commit without writes is published, and the caller's ``payload`` (what it
   needs back once the commit is done: counts, an outcome). It validates against the snapshot,
   raises its own refusals (``key_conflict``, ``bad_request``, ``resource_limit``, ...) and keeps
   no state between attempts: whatever it must compare with an earlier attempt it reads from
   ``previous``. A plan whose first parent is not the snapshot's head is refused (``internal``);
   a plan with nothing to publish ends the commit here. Then the lease is taken (and the plan
   prepared again if the branch moved meanwhile). Every table to write must then be at the
   version the manifest pins (:func:`omnigraph.engine.reconcile.pins.check_pins`); any other
   verdict abandons the attempt before anything is armed and is acted on as a step of its own:
   wait for a live writer's commit, resolve a dead writer's, settle out-of-band commits (which
   publishes its own adoption commit, or refuses with ``table_drift``), or just refresh a stale
   snapshot; then the next attempt starts.
2. Arm: ``__recovery/<op>.json`` (create-if-absent) records every table's state before and the
   lease's fencing token. The branch must still be the incarnation the commit started on (a
   delete holds the same lease, so none runs from here on); otherwise the intent is disarmed and
   the write refused with nothing written (``not_found`` for a deleted branch,
   ``read_set_conflict`` for one created again).
3. Effects (:func:`apply_effects`), per table in table-key order: fork the table if the branch
   inherits it (from exactly the pinned version, named after the graph branch), open it at the
   pin on the target branch, check that it is writable (the router's ``check_writable``), then
   one router operation (:class:`omnigraph.engine.door.routing.TableRouter`: strict insert,
   upsert, overwrite, merge, repair), whose versions must follow the pin directly. The result is
   the manifest entries that pin the new versions.
4. Publish (:func:`publish`): one ``__manifest`` commit (table rows + head row) from the snapshot
   the plan was prepared on. A publish that loses to a concurrent publish (a writer without a
   lease, or an adoption of out-of-band commits by a read-write open) is rebased onto the new
   head when every table it touched only gained ``Update``/``Append`` commits in between (its
   rows are then contained in the newer version): the head's first parent and message come from
   the plan again (:meth:`CommitPlan.head_on`). Otherwise, or after :data:`PUBLISH_ATTEMPTS` lost
   publishes, it is ``recovery_required`` with the intent kept. A plan that may only be published
   on the head it was prepared on (``CommitPlan.rebase`` False: a conditional mutation) is never
   rebased: when the lost publish moved the head, its own effects are rolled back (as when another
   commit lands inside an effect, above) and the attempt runs again from step 1, whose
   ``prepare`` sees the new head and decides (a conditional mutation refuses). A stamp-5 commit
   never builds on a head a format-4 writer published after the stamp
   (:func:`refuse_foreign_base`).
5. Disarm: delete the intent.

Failures, by what had landed. A storage conflict before any table effect landed (on the first
table: a commit conflict, or existing ids met by a fenced strict insert) disarms the intent and
re-runs the whole attempt from step 1 with a fresh snapshot, for at most :data:`RETRY_SECONDS`
with jittered backoff (then ``read_set_conflict``, nothing written); a strict insert therefore
re-probes its ids and ends as ``key_conflict`` once a concurrent winner is published, and never
turns into an upsert. A conflict on a later table, or a multi-commit effect that failed after
its first commit (``EffectLanded``), is ``recovery_required`` with the intent kept. A fork
blocked by another writer's (interrupted inside Lance, or of the same name from another image)
is ``recovery_required`` naming ``omnigraph recover``, with the intent withdrawn first if nothing
had landed. An attempt that fails after arming for any other reason (a storage error, say) keeps
its intent too. Either way the process gives that commit up
(:func:`omnigraph.engine.reconcile.recovery.abandon`): its own next pin check or read-write open
resolves the intent as a dead writer's, so a long-lived process (a server) is not stuck behind
its own failed commit.

Limits: at most :data:`MAX_ROWS` rows and :data:`MAX_ARROW_BYTES` bytes of Arrow data per table
per graph commit (both inclusive). Every write that stages rows as one commit (load's strict
inserts and upserts, ``.gq`` mutations) refuses a commit over either limit with
:func:`check_table` in its prepare step, before any intent is armed; the caller words the
refusal (:class:`LimitWording`: its hint names what splits the commit), and the error's code
and fields are the same for all of them: ``resource_limit`` ``{resource, limit, actual,
table_key}`` with ``resource`` ``rows`` or ``arrow_bytes``. A row that counts more than the
Arrow limit on its own is not counted but staged alone (:class:`AloneRow`: a Lance commit of its
own after the table's other rows, so the table effect is a chain of commits, as a merge's is).
Overwrite loads (the bulk
replacement path) and deleted ids are not limited; a branch merge brings any number of rows, as
a chain of commits within these limits under one intent
(:func:`omnigraph.engine.door.table_store.merge_rows`).

Failpoints, in protocol order: ``write.after_prepare`` (a plan with something to publish, before
the pin check), ``write.after_arm``, ``write.before_effect`` (before each table, after its lease
check), ``write.after_fork``, ``write.after_merge_step`` (after each
commit of a merge effect), ``write.after_effect`` (after each table) and ``write.after_publish``
(before the disarm).

Any number of writer processes and hosts may write one graph: the lease serializes commits per
branch, and the key-conflict fence (one winner per id) holds across them as it does within one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Generic, Literal, NoReturn, TypeVar

import lance
import msgspec
import pyarrow as pa
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential_jitter

from omnigraph.engine.access import writer_audit
from omnigraph.engine.door.routing import MergeRows
from omnigraph.engine.door.table_store import COMMIT_ARROW_BYTES, COMMIT_ROWS, CommitConflict, EffectLanded, ExistingKeys, evolve_columns
from omnigraph.engine.errors import BadRequest, Internal, NotFound, ReadSetConflict, RecoveryRequired, ResourceLimit
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import MAIN, BranchSnapshot, HeadEntry, TableEntry, lance_branch_name, now_ms, with_version
from omnigraph.engine.reconcile import branch_lease, drift, pins, recovery
from omnigraph.engine.reconcile.branch_lease import Lease
from omnigraph.engine.reconcile.pins import PinVerdict
from omnigraph.engine.reconcile.recovery import IntentTable, WriteIntent
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.ids import new_ulid
from omnigraph.engine.storage.lance_io import ForeignFork, ForkInterrupted, fork_or_adopt, open_dataset, open_pinned
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5, SCHEMA_CHANGE_PATH
from omnigraph.engine.storage.process import process_start_marker, this_host

if TYPE_CHECKING:
    from omnigraph.engine.schema.evolution import TableChange

MAX_ROWS = COMMIT_ROWS
MAX_ARROW_BYTES = COMMIT_ARROW_BYTES


class LimitWording(msgspec.Struct, frozen=True):
    """How a caller words a refused commit, one template per resource.

    Each is a ``str.format`` template over ``table_key``, ``actual`` and ``limit``.
    """

    rows: str
    arrow_bytes: str


def check_table(table_key: str, wording: LimitWording, *, rows: int | None = None, arrow_bytes: int | None = None) -> None:
    """Refuse (``resource_limit``) a commit over the per-commit limits in table ``table_key``.

    Over means more than :data:`MAX_ROWS` rows or more than :data:`MAX_ARROW_BYTES` bytes of
    Arrow data; a count left None is not checked (callers check the row count before they read
    the rows it counts).
    """
    for resource, limit, actual, template in (
        ("rows", MAX_ROWS, rows, wording.rows),
        ("arrow_bytes", MAX_ARROW_BYTES, arrow_bytes, wording.arrow_bytes),
    ):
        if actual is not None and actual > limit:
            message = template.format(table_key=table_key, actual=actual, limit=limit)
            raise ResourceLimit(resource, limit, actual, message, table_key=table_key)


WriteKind = Literal["insert", "upsert", "overwrite", "repair", "merge", "evolve"]
P = TypeVar("P")


class AloneRow(msgspec.Struct, frozen=True):
    """One row a write stages by itself (:func:`omnigraph.engine.ops.blobs.plan_staging`).

    It is written in a Lance commit of its own after the table's other rows, within the same
    graph commit: ``stage()`` gives it (a table of one row) when that commit is written, so an
    external Blob object is copied only then; upserted if ``upsert``, else strictly inserted.
    """

    stage: Callable[[], pa.Table]
    upsert: bool


class TableWrite(msgspec.Struct, frozen=True):
    """Validated rows for one table and how to write them.

    ``kind`` is one router operation (:class:`omnigraph.engine.door.routing.TableRouter`).
    ``repair`` (duplicate repair behind the migration barrier only) first deletes the rows whose
    id is in ``delete_ids`` (and null-id rows if ``delete_null_ids``), then inserts ``rows``.
    ``merge`` (branch merge, ``.gq`` mutations) strict-inserts ``rows``, upserts ``upsert_rows`` and deletes
    ``delete_ids``, each step skipped when empty (:class:`omnigraph.engine.door.routing.MergeRows`).
    ``evolve`` (a schema change, format 5 only) applies ``change`` to the table's columns
    (:func:`omnigraph.engine.door.table_store.evolve_columns`; ``rows`` is unused). An ``overwrite``
    may give its rows as a ``RecordBatchReader`` (a load streams a large table into its one
    commit); the reader is consumed by the effect, so ``prepare`` makes a new one per attempt.
    An ``insert``, ``upsert`` or ``merge`` may carry ``alone`` rows (:class:`AloneRow`), each
    one Lance commit after the others: the effect is then a chain of commits, like a merge's.
    """

    table_key: str
    kind: WriteKind
    rows: pa.Table | pa.RecordBatchReader
    delete_ids: tuple[str, ...] = ()
    delete_null_ids: bool = False
    upsert_rows: pa.Table | None = None
    change: TableChange | None = None
    alone: tuple[AloneRow, ...] = ()


class SchemaEffects(msgspec.Struct, frozen=True):
    """What a schema-change commit publishes besides its table writes.

    The head is published under schema version ``schema_id``; ``added`` tables are pinned as they
    are (new, empty tables); ``rekeyed`` tables (old key, new key) are pinned under their new key;
    ``retired`` keys (dropped types and the old keys of renamed ones) get retired rows.
    """

    schema_id: str
    added: tuple[TableEntry, ...] = ()
    rekeyed: tuple[tuple[str, str], ...] = ()
    retired: tuple[str, ...] = ()

    def entries(self, snapshot: BranchSnapshot, written: list[TableEntry]) -> list[TableEntry]:
        """The table entries to publish: ``written`` (from the snapshot's keys) rekeyed, plus the added tables."""
        mapping = dict(self.rekeyed)
        by_key = {entry.table_key: entry for entry in written}
        for old_key in mapping:
            by_key.setdefault(old_key, snapshot.table(old_key))
        return [msgspec.structs.replace(entry, table_key=mapping.get(key, key)) for key, entry in sorted(by_key.items())] + list(self.added)


class CommitPlan(msgspec.Struct, Generic[P], frozen=True):
    """One attempt's plan of a graph commit, prepared on one branch snapshot.

    ``parents`` are the parents of the head to publish; the first is the branch head the plan
    was prepared on (:attr:`base_head`; a plan with another first parent is refused). A publish
    rebased onto a newer head (:func:`publish`) puts that head first instead and
    uses ``rebased_message`` (``message`` when None); with ``rebase`` False a publish that finds
    another head is not rebased but rolled back and prepared again (:class:`HeadMoved`), so the plan
    is published on :attr:`base_head` or not at all. Without ``writes`` the commit publishes a
    head-only commit if ``publish_empty``, else nothing. ``payload`` is the caller's. ``schema``
    is set only by a schema change (:class:`SchemaEffects`); every other commit is published
    under the schema version of the head it builds on.
    """

    writes: tuple[TableWrite, ...]
    parents: tuple[str, ...]
    message: str
    payload: P
    publish_empty: bool = False
    rebased_message: str | None = None
    rebase: bool = True
    schema: SchemaEffects | None = None

    @property
    def base_head(self) -> str:
        """The branch head the plan was prepared on."""
        return self.parents[0]

    def head_on(self, head: str) -> tuple[tuple[str, ...], str]:
        """The parents and message of the head row to publish on top of branch head ``head``."""
        if head == self.base_head:
            return self.parents, self.message
        return (head, *self.parents[1:]), self.message if self.rebased_message is None else self.rebased_message


Prepare = Callable[[BranchSnapshot, CommitPlan[P] | None], CommitPlan[P]]
"""``prepare(snapshot, previous)``: the plan of one attempt (see the module docstring)."""


class CommitResult(msgspec.Struct, frozen=True):
    """A published graph commit."""

    commit_id: str
    branch: str
    manifest_version: int
    tables: list[TableEntry]
    parents: tuple[str, ...] = ()


class WriteResult(msgspec.Struct, Generic[P], frozen=True):
    """What :func:`commit` did: the plan of its last attempt, and the commit it published.

    ``published`` is None when the plan had no writes and did not ask for an empty commit.
    """

    plan: CommitPlan[P]
    published: CommitResult | None


class NoEffectConflict(Exception):
    """Inside the write path: an attempt ended with nothing of it left on any table.

    The cause is a storage conflict, a stale snapshot, a commit in flight, or an effect rolled
    back because another process's commit landed inside it; the commit runs the attempt again
    from a fresh snapshot.
    """


class ForeignCommit(Exception):
    """Inside the write path: a table effect did not lie directly on the version it read.

    Another process committed to the table in between, so the effect's version carries that
    commit's rows and must never be published.
    """


class HeadMoved(ForeignCommit):
    """Inside the write path: a plan that may not be rebased (``CommitPlan.rebase`` False) lost its publish to another head.

    Its effects are rolled back like a foreign commit's and the attempt runs again from ``prepare``.
    """


def apply_effects(
    graph: Graph, snapshot: BranchSnapshot, writes: list[TableWrite], tables: list[IntentTable], operation_id: str, lease: Lease | None
) -> list[TableEntry]:
    """Write every table of ``writes`` (``tables`` is the intent's record of each, same order).

    Under a lease, raises :class:`ForeignCommit` when an effect does not lie directly on the
    version it read (a writer without one, the format-4 writer, does not check).
    """
    store = graph.store
    entries: list[TableEntry] = []
    for write, table in zip(writes, tables, strict=True):
        entry = snapshot.table(write.table_key)
        _check_lease(lease)
        try:
            if table.fork_planned:
                _fork(graph, entry, str(table.target_branch), operation_id, landed=bool(entries))
                failpoint("write.after_fork")
            dataset = open_pinned(store, entry.image.on(table.target_branch))
            read_version = int(dataset.version)
            _check_lease(lease)  # again right before the effect: the fork and the open may have stalled
            failpoint("write.before_effect")
            version, commits = _write_table(graph, dataset, entry.table_path, write)
        except EffectLanded as landed:
            raise RecoveryRequired(
                operation_id,
                f"{write.table_key}: {landed}; resolve the commit with `{drift.recover_command(store.uri)}`",
                table_key=write.table_key,
            ) from landed
        except (CommitConflict, ExistingKeys) as conflict:
            if entries:
                raise RecoveryRequired(
                    operation_id,
                    f"a concurrent commit conflicted on {write.table_key} after earlier tables of this "
                    f"commit landed; resolve it with `{drift.recover_command(store.uri)}` before retrying",
                    table_key=write.table_key,
                ) from conflict
            recovery.disarm(store, operation_id)
            raise NoEffectConflict(str(conflict)) from conflict
        if lease is not None and commits is not None and version != read_version + commits:
            raise ForeignCommit(
                f"{write.table_key}: {commits} commit(s) read v{read_version} but the last landed as v{version}: "
                "another process committed to the table in between"
            )
        # Merges advance the dataset object in place; writers that return a new dataset do not.
        written = dataset if dataset.version == version else open_pinned(store, entry.image.on(table.target_branch).at(version))
        rows = written.count_rows()
        entries.append(with_version(entry, table.target_branch, version, rows))
        failpoint("write.after_effect")
    return entries


def _fork(graph: Graph, entry: TableEntry, branch: str, operation_id: str, *, landed: bool) -> None:
    """Fork (or adopt) the table branch the write targets.

    ``recovery_required`` naming ``omnigraph recover`` when another writer's fork is in the way:
    one interrupted inside Lance (data without a ref) or one of the same name from another image.
    Before any table of the commit landed this write's intent is withdrawn first, so the
    read-write open of the recovery (or of this process's next write) resolves the dead writer's
    intent that planned that fork, with no live intent of this process holding the table.
    """
    store = graph.store
    try:
        fork_or_adopt(store, entry.table_path, branch, entry.table_branch, entry.table_version)
    except (ForkInterrupted, ForeignFork) as blocked:
        fix = f"`{drift.recover_command(store.uri)}`"
        if landed:
            raise RecoveryRequired(
                operation_id,
                f"{blocked}; earlier tables of this commit landed: resolve it with {fix}",
                table_path=entry.table_path,
                branch=branch,
            ) from blocked
        recovery.disarm(store, operation_id)
        raise RecoveryRequired(
            None,
            f"{blocked}: another writer's fork of this table was interrupted. Nothing of this write was "
            f"written; run {fix} (it resolves that writer's commit), then retry",
            table_path=entry.table_path,
            branch=branch,
        ) from blocked


def _write_table(graph: Graph, dataset: lance.LanceDataset, table_path: str, write: TableWrite) -> tuple[int, int | None]:
    """The one router operation ``write`` asks for, on the table opened for it.

    Returns its last version and the number of Lance commits it made, None when that is not
    counted: a duplicate repair, which runs behind the migration barrier with no other writer.
    """
    router = graph.profile.router
    if router.check_writable is not None:
        router.check_writable(dataset, table_path)
    if write.alone:
        return _chain(graph, dataset, write)
    if write.kind == "insert":
        return router.strict_insert(dataset, write.rows), 1
    if write.kind == "upsert":
        return router.upsert(dataset, write.rows), 1
    if write.kind == "merge":
        return _merge(graph, dataset, write)
    if write.kind == "repair":
        return router.repair(dataset, list(write.delete_ids), write.delete_null_ids, write.rows), None
    if write.kind == "evolve":
        if write.change is None or not router.with_pk:
            raise Internal(f"a schema change of {write.table_key} needs its column change and the fenced engine")
        return evolve_columns(dataset, write.change, lambda: failpoint("write.after_evolve_step"))
    schema = graph.catalog.table(write.table_key).arrow_schema(with_pk=router.with_pk)
    return router.overwrite(dataset, write.rows, schema), 1


def _merge(graph: Graph, dataset: lance.LanceDataset, write: TableWrite) -> tuple[int, int]:
    """A ``merge`` write's chain of commits (the router's); its last version and the commits it made."""
    changes = MergeRows(write.table_key, write.rows, write.upsert_rows, write.delete_ids)
    steps = 0

    def after_step() -> None:
        nonlocal steps
        steps += 1
        failpoint("write.after_merge_step")

    version = graph.profile.router.merge(dataset, changes, after_step)
    return version, steps


def _chain(graph: Graph, dataset: lance.LanceDataset, write: TableWrite) -> tuple[int, int]:
    """A write with :class:`AloneRow` rows: its other rows (if any), then one commit per alone row.

    A conflict before any commit landed propagates as it is (nothing landed); after one it is
    :class:`EffectLanded`. ``write.after_merge_step`` fires after each commit.
    """
    router = graph.profile.router
    version, commits = int(dataset.version), 0
    if write.kind == "merge":
        version, commits = _merge(graph, dataset, write)
    elif isinstance(write.rows, pa.Table) and write.rows.num_rows:
        version = (router.strict_insert if write.kind == "insert" else router.upsert)(dataset, write.rows)
        commits = 1
        failpoint("write.after_merge_step")
    for row in write.alone:
        try:
            version = (router.upsert if row.upsert else router.strict_insert)(dataset, row.stage())
        except (CommitConflict, ExistingKeys) as conflict:
            if not commits:
                raise
            raise EffectLanded(f"the write of {write.table_key} conflicted after {commits} of its commits: {conflict}") from conflict
        commits += 1
        failpoint("write.after_merge_step")
    return version, commits


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
    graph: Graph,
    snapshot: BranchSnapshot,
    entries: list[TableEntry],
    operation_id: str,
    plan: CommitPlan[P],
    actor: str,
    lease: Lease | None,
) -> CommitResult:
    """Publish ``entries`` and the plan's head as commit ``operation_id`` (see the module docstring).

    The lease is confirmed before the first publish and after every lost one, on the snapshot
    read again: a lease taken over before that read has fenced the branch, so no publish of an
    older holder lands after it. A plan that may not be rebased raises :class:`HeadMoved` when the
    re-read head is another commit.
    """
    _check_lease(lease, confirm=True)
    parents, message = plan.head_on(snapshot.head.commit_id)
    head = HeadEntry(
        operation_id,
        parents,
        actor,
        message,
        now_ms(),
        writer_program=graph.profile.program,
        writer_format=graph.profile.init_stamp,
        schema_id=snapshot.head.schema_id if plan.schema is None else plan.schema.schema_id,
    )
    base = snapshot
    if plan.schema is not None:
        entries = plan.schema.entries(snapshot, entries)
    for _ in range(PUBLISH_ATTEMPTS):
        try:
            version = graph.manifest.publish(base, entries, head, () if plan.schema is None else plan.schema.retired)
        except CommitConflict:
            if plan.schema is not None:
                raise RecoveryRequired(
                    operation_id,
                    f"a concurrent publish landed on branch {snapshot.branch!r} during its schema change; resolve it with "
                    f"`{drift.recover_command(graph.store.uri)}`, which completes the change",
                ) from None
            base = graph.manifest.snapshot(snapshot.branch)
            _check_lease(lease, confirm=True)
            refuse_foreign_base(graph, base)
            if not plan.rebase and base.head.commit_id != plan.base_head:
                moved = f"branch {snapshot.branch!r} moved from {plan.base_head} to {base.head.commit_id} before this commit was published"
                raise HeadMoved(moved) from None
            entries = [_rebase_entry(graph, ours, base, operation_id) for ours in entries]
            parents, message = plan.head_on(base.head.commit_id)
            head = msgspec.structs.replace(head, parents=parents, message=message)
            continue
        return CommitResult(operation_id, snapshot.branch, version, entries, head.parents)
    raise RecoveryRequired(
        operation_id,
        f"publishing to branch {snapshot.branch!r} kept losing to concurrent publishes; resolve the "
        f"commit with `{drift.recover_command(graph.store.uri)}`",
    )


def _check_lease(lease: Lease | None, *, confirm: bool = False) -> None:
    """The commit may go on under its lease (:meth:`Lease.check`); a commit without one always may."""
    if lease is not None:
        lease.check("this write", confirm=confirm)


def _rebase_entry(graph: Graph, ours: TableEntry, fresh: BranchSnapshot, operation_id: str) -> TableEntry:
    """Our entry for a table, to publish on top of ``fresh``.

    The newer of the two versions when every commit between them is an Update or an Append, else
    ``recovery_required``.
    """
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


RETRY_SECONDS = 60.0


def commit(
    graph: Graph,
    branch: str,
    prepare: Prepare[P],
    *,
    actor: str,
    catalog: Catalog | None = None,
    held: Lease | None = None,
) -> WriteResult[P]:
    """Run one graph commit on ``branch`` (see the module docstring).

    ``catalog`` is the schema the caller validates against (``graph.catalog`` when None, read
    now): a plan is published only while the branch head is at that schema version, otherwise
    the commit is refused (:func:`schema_moved`) with nothing written. ``held`` is the branch's
    lease when the caller already holds it (a schema change), so the commit does not take it.

    Returns the plan of the attempt that finished, and the commit it published if it had
    anything to publish.
    """
    if not graph.writable:
        raise BadRequest("the graph was opened read-only")
    retrying = Retrying(
        retry=retry_if_exception_type(NoEffectConflict),
        stop=stop_after_delay(RETRY_SECONDS),
        wait=wait_exponential_jitter(multiplier=0.02, max=0.5, jitter=0.05),
        reraise=True,
    )
    incarnation = graph.manifest.incarnation(branch)  # every attempt writes to this one or to none
    if incarnation is None:
        graph.manifest.require_branch(branch)  # not_found, unless it was created just now
        incarnation = graph.manifest.incarnation(branch)
        if incarnation is None:
            raise NotFound(f"graph branch {branch!r} does not exist (see `omnigraph branch list {graph.store.uri}`)", {"branch": branch})
    attempts = _Attempts(graph, branch, incarnation, prepare, actor, (catalog or graph.catalog).version_id, held)
    try:
        return retrying(attempts.run)
    except NoEffectConflict as conflict:
        raise ReadSetConflict(
            f"concurrent writers on branch {branch!r} kept conflicting for {RETRY_SECONDS:.0f}s; nothing was written, retry the operation",
            {"member": branch, "expected": "no concurrent conflicting commit", "actual": str(conflict)},
        ) from conflict


def schema_moved(graph: Graph, snapshot: BranchSnapshot, expected: str) -> ReadSetConflict:
    """The refusal of a write validated against schema ``expected`` on a branch whose head is at another version.

    The graph's catalog is read again first, so a retry in this process validates against the
    accepted schema. A branch behind the accepted schema is left by a schema change in progress
    or interrupted: the refusal names ``omnigraph recover``, which completes it.
    """
    graph.catalog = graph.schemas.accepted()
    head = graph.schemas.resolve(snapshot.head.schema_id)
    if head == graph.catalog.version_id:
        message = (
            f"the schema of branch {snapshot.branch!r} changed (to version {head[:12]}) after this write was validated; "
            "nothing was written: retry it against the new schema"
        )
    else:
        message = (
            f"branch {snapshot.branch!r} is at schema version {head[:12]}, not the accepted {graph.catalog.version_id[:12]}: "
            f"a schema change is in progress or was interrupted; nothing was written. Run `{drift.recover_command(graph.store.uri)}` "
            "(it completes the change), then retry"
        )
    return ReadSetConflict(message, {"member": f"schema of branch {snapshot.branch}", "expected": expected, "actual": head})


def schema_change_pending(graph: Graph) -> ReadSetConflict:
    """The refusal of a commit while a schema change is recorded as in progress (it may not have reached the branch)."""
    return ReadSetConflict(
        "a schema change of this graph is in progress or was interrupted; nothing was written. Retry when it has finished; "
        f"if no `schema apply` is running, `{drift.recover_command(graph.store.uri)}` completes it",
        {"member": "schema", "expected": "no schema change in progress", "actual": SCHEMA_CHANGE_PATH},
    )


def _branch_lease(graph: Graph, branch: str, held: Lease | None) -> AbstractContextManager[Lease | None]:
    """The lease the commit holds: ``held``, else the branch's, waited for up to :data:`RETRY_SECONDS`; none for a writer without leases."""
    if held is not None:
        return nullcontext(held)
    if not graph.profile.leased_writes:
        return nullcontext(None)
    return recovery.holding_branch(graph.store, graph.manifest, branch, "this write", wait_seconds=branch_lease.WAIT_SECONDS)


class _Attempts(Generic[P]):
    """The attempts of one commit on the branch incarnation it started on.

    The incarnation is read before any snapshot, so every snapshot is of it or of a later one,
    which the check after arming refuses. Remembers the last plan, the ``previous`` of the next
    prepare.
    """

    def __init__(
        self, graph: Graph, branch: str, incarnation: str, prepare: Prepare[P], actor: str, expected_schema: str, held: Lease | None
    ) -> None:
        self.graph = graph
        self.branch = branch
        self.incarnation = incarnation
        self.prepare = prepare
        self.actor = actor
        self.expected_schema = expected_schema
        self.held = held
        self.previous: CommitPlan[P] | None = None

    def run(self) -> WriteResult[P]:
        """One attempt; ends with :class:`NoEffectConflict` when it must be run again.

        When the branch's lease is free the plan is prepared before it is taken, so preparing holds
        no other writer up, and prepared again under it if the branch moved meanwhile. When a live
        writer holds it, the attempt waits for it first and prepares once, under it (a plan
        prepared meanwhile would be stale). Under the lease the branch cannot move.
        """
        leased = self.graph.profile.leased_writes
        prepared: tuple[BranchSnapshot, CommitPlan[P]] | None = None
        if self.held is None and (not leased or branch_lease.live_holder(self.graph.store, self.branch) is None):
            prepared = self._prepared()
            if not prepared[1].writes and not prepared[1].publish_empty:
                return WriteResult(prepared[1], None)
            failpoint("write.after_prepare")
        with _branch_lease(self.graph, self.branch, self.held) as lease:
            _require_incarnation(self.graph, self.branch, self.incarnation, None)
            if prepared is None or (lease is not None and self._moved(lease, prepared[0])):
                prepared = self._prepared()
                if not prepared[1].writes and not prepared[1].publish_empty:
                    return WriteResult(prepared[1], None)
            result = self._commit(*prepared, lease)
            if lease is not None and result.published is not None:
                lease.leaves_manifest_version = result.published.manifest_version
            return result

    def _moved(self, lease: Lease, snapshot: BranchSnapshot) -> bool:
        """Whether the branch moved past ``snapshot`` before ``lease`` was taken.

        Not when the lease's previous holder released it leaving the branch at exactly this
        version (no leased commit came after it); otherwise the branch's version is read.
        """
        previous = lease.previous
        if previous is not None and previous.state == "released" and previous.manifest_version == snapshot.manifest_version:
            return False
        return int(self.graph.manifest.dataset(self.branch).version) != snapshot.manifest_version

    def _prepared(self) -> tuple[BranchSnapshot, CommitPlan[P]]:
        """A fresh snapshot of the branch and the plan prepared on it."""
        with self._reading():
            snapshot = self.graph.manifest.snapshot(self.branch)
            refuse_foreign_base(self.graph, snapshot)
            if self.held is None and self.graph.schemas.resolve(snapshot.head.schema_id) != self.expected_schema:
                raise schema_moved(self.graph, snapshot, self.expected_schema)
            return snapshot, self._plan(snapshot)

    def _commit(self, snapshot: BranchSnapshot, plan: CommitPlan[P], lease: Lease | None) -> WriteResult[P]:
        """Pin check, arm, effects, publish and disarm of ``plan`` (under ``lease``, if the writer takes leases)."""
        writes = sorted(plan.writes, key=lambda w: w.table_key)
        if plan.schema is None and lease is not None and self.graph.store.exists(SCHEMA_CHANGE_PATH):
            raise schema_change_pending(self.graph)
        with self._reading():
            verdict = pins.check_pins(self.graph.store, self.graph.manifest, snapshot, [w.table_key for w in writes])
        if verdict.action != "clean":
            with self._reading():  # a step of its own: nothing of this attempt is armed
                _act_on_pins(self.graph, self.branch, verdict, self.actor, leased=lease is not None)
        _check_lease(lease)
        operation_id = new_ulid()
        target = lance_branch_name(self.branch)
        tables = [_intent_table(snapshot.table(w.table_key), target) for w in writes]
        recovery.arm(self.graph.store, self._intent(operation_id, snapshot, tables, lease))
        try:
            failpoint("write.after_arm")
            if lease is None:
                _require_incarnation(self.graph, self.branch, self.incarnation, operation_id)
            entries = apply_effects(self.graph, snapshot, writes, tables, operation_id, lease)
            published = publish(self.graph, snapshot, entries, operation_id, plan, self.actor, lease)
            failpoint("write.after_publish")
            recovery.disarm(self.graph.store, operation_id)
        except ForeignCommit as foreign:
            try:
                _check_lease(lease, confirm=True)
                recovery.resolve_own(self.graph.store, self.graph.manifest, operation_id)
            except BaseException:
                recovery.abandon(operation_id)
                raise
            raise NoEffectConflict(str(foreign)) from foreign
        except BaseException:
            recovery.abandon(operation_id)  # given up with the intent kept: recovery may resolve it now
            raise
        return WriteResult(plan, published)

    def _plan(self, snapshot: BranchSnapshot) -> CommitPlan[P]:
        plan = self.prepare(snapshot, self.previous)
        if not plan.parents or plan.base_head != snapshot.head.commit_id:
            raise Internal(f"a commit plan's first parent must be the head it was prepared on ({snapshot.head.commit_id})")
        self.previous = plan
        return plan

    def _intent(self, operation_id: str, snapshot: BranchSnapshot, tables: list[IntentTable], lease: Lease | None) -> WriteIntent:
        return WriteIntent(
            operation_id=operation_id,
            graph_branch=self.branch,
            graph_incarnation=self.incarnation,
            base_manifest_version=snapshot.manifest_version,
            base_commit_id=snapshot.head.commit_id,
            tables=tables,
            actor=self.actor,
            program=self.graph.profile.program,
            host=this_host(),
            pid=os.getpid(),
            process_start=process_start_marker(os.getpid()),
            created_at=now_ms(),
            lease_token=None if lease is None else lease.token,
        )

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Type Lance's "not found" when the branch's images were deleted meanwhile.

        Typed if the branch went away (:func:`_require_incarnation`), else passed on.
        """
        try:
            yield
        except (ValueError, OSError):
            _require_incarnation(self.graph, self.branch, self.incarnation, None)
            raise


def _act_on_pins(graph: Graph, branch: str, verdict: PinVerdict, actor: str, *, leased: bool) -> NoReturn:
    """Do what a pin verdict other than ``clean`` asks for.

    Ends by asking for a fresh attempt (:class:`NoEffectConflict`), or with ``table_drift``.
    """
    if verdict.action == "refresh":
        raise NoEffectConflict("the snapshot is stale: a concurrent commit was published")
    if verdict.action == "wait":
        raise NoEffectConflict("waiting for a concurrent commit in flight on the same table")
    if verdict.action == "resolve":
        if leased:
            recovery.resolve_branch(graph.store, graph.manifest, branch)  # under this commit's lease
        else:
            recovery.resolve_intents(graph.store, graph.manifest)
        raise NoEffectConflict("resolved an interrupted commit on the same table")
    try:
        adopted, drifted = drift.settle(
            graph.store,
            graph.manifest,
            branch,
            actor=actor,
            require_fencing=graph.profile.router.with_pk,
            table_keys=list(verdict.table_keys),
            include_forks=True,
        )
    except CommitConflict as conflict:
        raise NoEffectConflict(str(conflict)) from conflict
    if drifted:
        raise drift.drift_error(graph.store.uri, drifted)
    if adopted:
        raise NoEffectConflict("adopted out-of-band commits that change no row")
    raise NoEffectConflict("the table moved while it was classified (a concurrent commit); looking again")


def _require_incarnation(graph: Graph, branch: str, incarnation: str, operation_id: str | None) -> None:
    """The branch is still the incarnation the commit read, and no live process is deleting it.

    A leased commit calls it under its lease before arming (``operation_id`` None): a delete
    holds the same lease, so none runs from there on. A commit without a lease calls it once its
    intent is armed (``operation_id``; disarmed here on refusal, nothing was written): a deleter
    that took the lease before this check is seen here, one that takes it after sees the armed
    intent and refuses. Also called with None after a failed read: the error is typed if the
    branch went away under it.
    """
    if branch == MAIN:
        return
    holder = branch_lease.live_holder(graph.store, branch) if operation_id is not None else None
    deleting = holder is not None and holder.operation == "delete"
    now = graph.manifest.incarnation(branch)
    if not deleting and now == incarnation:
        return
    if operation_id is not None:
        recovery.disarm(graph.store, operation_id)
    if deleting:
        assert holder is not None
        raise branch_lease.busy_error(branch, holder, "this write")
    if now is None:
        raise NotFound(
            f"branch {branch!r} was deleted while this write was being prepared; nothing was written",
            {"branch": branch},
        )
    raise ReadSetConflict(
        f"branch {branch!r} was deleted and created again while this write was being prepared; nothing "
        "was written (the new branch of that name is another branch: retry against it if that is meant)",
        {"member": f"branch {branch}", "expected": f"incarnation {incarnation}", "actual": f"incarnation {now}"},
    )


def _intent_table(entry: TableEntry, target: str | None) -> IntentTable:
    return IntentTable(
        table_key=entry.table_key,
        table_path=entry.table_path,
        branch_before=entry.table_branch,
        version_before=entry.table_version,
        target_branch=target,
        fork_planned=entry.table_branch != target,
    )
