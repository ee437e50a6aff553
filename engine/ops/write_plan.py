"""The write seam's vocabulary: what a write's ``prepare`` step returns, and what a commit returns.

A write hands :func:`omnigraph.engine.ops.write.commit` one :data:`Prepare` function. Each attempt of the
commit calls it with a fresh branch snapshot and the plan of the attempt before (None on the
first), and it returns one :class:`CommitPlan`: the per-table writes (:class:`TableWrite`), the
parents and message of the head to publish, whether a commit without writes is published, and
the caller's ``payload`` (what it needs back once the commit is done: counts, an outcome). A
prepare raises its own refusals (``key_conflict``, ``bad_request``, ``resource_limit``, ...) and
keeps no state between attempts: whatever it must compare with an earlier attempt it reads from
``previous``. The commit returns a :class:`WriteResult`: the plan of the attempt that finished
and the :class:`CommitResult` it published (None if the plan had nothing to publish).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

import pyarrow as pa

from omnigraph.engine.manifest.rows import BranchSnapshot, TableEntry

WriteKind = Literal["insert", "upsert", "overwrite", "repair", "merge"]
P = TypeVar("P")


@dataclass(frozen=True)
class TableWrite:
    """Validated rows for one table and how to write them (one router operation,
    :class:`omnigraph.engine.door.TableRouter`).

    ``repair`` (duplicate repair behind the migration barrier only) first deletes the rows whose
    id is in ``delete_ids`` (and null-id rows if ``delete_null_ids``), then inserts ``rows``.
    ``merge`` (branch merge, ``.gq`` mutations) strict-inserts ``rows``, upserts ``upsert_rows`` and deletes
    ``delete_ids``, each step skipped when empty (:class:`omnigraph.engine.door.MergeRows`). An ``overwrite``
    may give its rows as a ``RecordBatchReader`` (a load streams a large table into its one
    commit); the reader is consumed by the effect, so ``prepare`` makes a new one per attempt.
    """

    table_key: str
    kind: WriteKind
    rows: pa.Table | pa.RecordBatchReader
    delete_ids: tuple[str, ...] = ()
    delete_null_ids: bool = False
    upsert_rows: pa.Table | None = None


@dataclass(frozen=True)
class CommitPlan(Generic[P]):
    """One attempt's plan of a graph commit, prepared on one branch snapshot.

    ``parents`` are the parents of the head to publish; the first is the branch head the plan
    was prepared on (:attr:`base_head`; a plan with another first parent is refused). A publish
    rebased onto a newer head (:mod:`omnigraph.engine.ops.write_publish`) puts that head first instead and
    uses ``rebased_message`` (``message`` when None). Without ``writes`` the commit publishes a
    head-only commit if ``publish_empty``, else nothing. ``payload`` is the caller's.
    """

    writes: tuple[TableWrite, ...]
    parents: tuple[str, ...]
    message: str
    payload: P
    publish_empty: bool = False
    rebased_message: str | None = None

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


@dataclass(frozen=True)
class CommitResult:
    """A published graph commit."""

    commit_id: str
    branch: str
    manifest_version: int
    tables: list[TableEntry]
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class WriteResult(Generic[P]):
    """What :func:`omnigraph.engine.ops.write.commit` did: the plan of its last attempt, and the commit it
    published (None when the plan had no writes and did not ask for an empty commit)."""

    plan: CommitPlan[P]
    published: CommitResult | None


class NoEffectConflict(Exception):
    """Inside the write path: an attempt ended before any table effect landed (a storage
    conflict, a stale snapshot, a commit in flight); the commit runs it again from a fresh
    snapshot."""
