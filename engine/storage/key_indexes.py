"""The BTREE indexes the engine keeps on the key columns of every table: ``id``, and ``src``/``dst`` of an edge table.

They serve the reads that find rows by key: a node looked up by id (a filter ``id = x`` pushed
into the Lance scan), the edges of a traversal frontier (``src IN (...)`` or ``dst IN (...)``
handed to the scan) and the edges joined to one keyed node. An index never changes an answer:
without one (or for the rows it does not cover) the same filter is evaluated on the rows scanned.
Writes never use them: the fenced door always merges with ``use_index(False)``.

When they are made:

- at creation (:func:`create_on_empty`): a format-5 table is created empty and then indexed, so
  its first pinned version already carries them (pylance 14 builds a BTREE on an empty column;
  it covers no rows until it is refreshed). An empty table reaches :func:`created_version`;
- by ``optimize`` (:func:`plan`, :func:`apply`): a missing index is built, and one that leaves
  fragments unindexed (the rows written since it was built: Lance does not extend an index on
  write) is refreshed with ``optimize_indices``, which adds those fragments to it. An overwrite
  (a ``load --mode overwrite``) replaces every fragment and Lance drops the table's indexes with
  them, so the next ``optimize`` builds them again.

Each build or refresh is one Lance commit that changes no row (``CreateIndex``), published by the
caller as a graph commit like any other index.
"""

from __future__ import annotations

from typing import Literal

import lance
import msgspec
import pyarrow as pa

KEY_INDEX_COLUMNS = ("id", "src", "dst")
"""The key columns, in the order their indexes are built: ``id`` of every table, ``src`` and ``dst`` of an edge table."""
BTREE_TYPE = "BTree"
"""How a Lance index description's ``type_url`` names a BTREE (``/lance.table.BTreeIndexDetails``)."""


def key_columns(schema: pa.Schema) -> list[str]:
    """The key columns ``schema`` has, in :data:`KEY_INDEX_COLUMNS` order."""
    return [column for column in KEY_INDEX_COLUMNS if column in schema.names]


def created_version(schema: pa.Schema) -> int:
    """The version of an empty table of ``schema`` once :func:`create_on_empty` indexed it.

    That is the empty table (version 1), then one commit per key column.
    """
    return 1 + len(key_columns(schema))


def btree_indexes(dataset: lance.LanceDataset) -> dict[str, str]:
    """Column -> name of a BTREE index on that column alone, for every such column of ``dataset`` (the first name if several)."""
    found: dict[str, str] = {}
    for index in sorted(dataset.describe_indices(), key=lambda i: i.name):
        names = list(index.field_names)
        if len(names) == 1 and index.type_url.rsplit(".", 1)[-1].removesuffix("IndexDetails") == BTREE_TYPE:
            found.setdefault(names[0], index.name)
    return found


def create_on_empty(dataset: lance.LanceDataset) -> int:
    """Build the key indexes ``dataset`` (an empty table just created) lacks; its version after them.

    Indexes already present are kept, so a creation interrupted between two builds is completed
    by calling this again.
    """
    present = btree_indexes(dataset)
    for column in key_columns(dataset.schema):
        if column not in present:
            dataset.create_scalar_index(column, "BTREE")
    return int(dataset.version)


class KeyIndexStep(msgspec.Struct, frozen=True):
    """One key index to build (``build``: none on the column) or to refresh (``refresh``: fragments left unindexed)."""

    column: str
    action: Literal["build", "refresh"]
    index_name: str | None

    def describe(self) -> str:
        """The step as ``optimize`` reports it: ``key index id`` or ``refresh key index src``."""
        return f"key index {self.column}" if self.action == "build" else f"refresh key index {self.column}"


def plan(dataset: lance.LanceDataset, skip: frozenset[str] = frozenset()) -> list[KeyIndexStep]:
    """The key-index steps ``dataset`` needs (none if every key index covers every fragment); columns in ``skip`` are left out."""
    present = btree_indexes(dataset)
    steps = []
    for column in key_columns(dataset.schema):
        if column in skip:
            continue
        name = present.get(column)
        if name is None:
            steps.append(KeyIndexStep(column, "build", None))
        elif dataset.count_rows() and int(dataset.stats.index_stats(name)["num_unindexed_fragments"]) > 0:
            steps.append(KeyIndexStep(column, "refresh", name))
    return steps


def apply(dataset: lance.LanceDataset, steps: list[KeyIndexStep]) -> None:
    """Carry out ``steps`` on ``dataset`` (the latest version of its branch).

    One Lance commit per build, then one for all refreshes.
    """
    for step in steps:
        if step.action == "build":
            dataset.create_scalar_index(step.column, "BTREE", replace=True)
    stale = [step.index_name for step in steps if step.action == "refresh" and step.index_name is not None]
    if stale:
        dataset.optimize.optimize_indices(index_names=stale)
