"""Pins: is a table a write is about to change past the version its graph branch pins, and why.

A graph commit's effects land only on the version the manifest pins, never on another commit's
unpublished effects (which would then be published with it). Before a commit arms its intent,
:func:`check_pins` looks at every table it will write, on the Lance branch the write targets (a
table the branch still inherits counts only if a fork named after the branch exists: from
another image than the pin it is never this branch's to write on), and returns one
:class:`PinVerdict`, which the write path acts on before it arms anything:

* ``clean``: every table is at its pin; the commit may arm;
* ``refresh``: the manifest now pins a table at or past its HEAD: a concurrent commit was
  published and the snapshot is stale; prepare again;
* ``wait``: an intent of a live writer covers a table ahead (``operation_id``): its commit is in
  flight; prepare again later;
* ``resolve``: only intents of dead writers cover the tables ahead (``operation_id``, the first):
  resolve them (:func:`omnigraph.engine.reconcile.recovery.resolve_intents`), then prepare again;
* ``settle``: no intent covers them: they were committed outside the engine; classify and adopt
  them (:func:`omnigraph.engine.reconcile.drift.settle`, which publishes its own graph commit or refuses
  with ``table_drift``), then prepare again.

The intents are listed before the manifest is read again, so a commit that publishes in between
is seen either as published (``refresh``) or as in flight. Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import msgspec

from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import BranchSnapshot, TableEntry, lance_branch_name
from omnigraph.engine.reconcile import recovery
from omnigraph.engine.reconcile.recovery import touched_tables
from omnigraph.engine.storage.lance_io import latest_version, list_branches, open_dataset
from omnigraph.engine.storage.store import GraphStore

PinAction = Literal["clean", "refresh", "wait", "resolve", "settle"]


class PinVerdict(msgspec.Struct, frozen=True):
    """What a write must do before it arms: see the module docstring.

    ``table_keys`` are the tables ahead of their pins (empty when ``clean``); ``operation_id`` is
    the covering commit for ``wait`` and ``resolve``.
    """

    action: PinAction
    table_keys: tuple[str, ...] = ()
    operation_id: str | None = None


CLEAN = PinVerdict("clean")


def check_pins(store: GraphStore, manifest: Manifest, snapshot: BranchSnapshot, table_keys: Iterable[str]) -> PinVerdict:
    """The verdict on the tables ``table_keys`` that a commit on ``snapshot``'s branch will write."""
    target = lance_branch_name(snapshot.branch)
    ahead: list[tuple[TableEntry, int]] = []
    for key in table_keys:
        entry = snapshot.table(key)
        head = _head_past_pin(store, entry, target)
        if head is not None:
            ahead.append((entry, head))
    if not ahead:
        return CLEAN
    keys = tuple(entry.table_key for entry, _ in ahead)
    in_flight = recovery.list_intents(store)  # listed before re-reading the manifest: no gap
    fresh = manifest.snapshot(snapshot.branch)
    for entry, head in ahead:
        now = fresh.table(entry.table_key)
        if now.table_branch == target and now.table_version >= head:
            return PinVerdict("refresh", keys)
    moved = {(entry.table_path, target) for entry, _ in ahead}
    covering = [intent for intent in in_flight if touched_tables(intent) & moved]
    live = next((intent for intent in covering if recovery.owner_is_alive(store, intent)), None)
    if live is not None:
        return PinVerdict("wait", keys, live.operation_id)
    if covering:
        return PinVerdict("resolve", keys, covering[0].operation_id)
    return PinVerdict("settle", keys)


def _head_past_pin(store: GraphStore, entry: TableEntry, target: str | None) -> int | None:
    """The HEAD of ``entry``'s table on ``target`` if it is past what the branch may write on, else None.

    What the branch may write on is the pin; for an inherited table, the fork point of an existing fork.
    """
    if entry.table_branch == target:
        pinned = entry.table_version
    else:
        fork = list_branches(open_dataset(store, entry.table_path)).get(str(target))
        if fork is None:
            return None
        pinned = fork.parent_version
        if (fork.parent_branch, fork.parent_version) != (entry.table_branch, entry.table_version):
            pinned = -1  # forked from another image than the pin: never this branch's to write on
    head = latest_version(store, entry.table_path, target)
    return head if head > pinned else None
