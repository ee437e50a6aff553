"""Finding and classifying out-of-band table commits (commits made with Lance directly).

A graph branch *owns* a table when its manifest pins the table on the Lance branch named after
the graph branch (the dataset's main for ``main``). A commit made on that Lance branch with Lance
directly (an index, a compaction, an append by hand) leaves the table HEAD past the pinned
version with no recovery intent that explains it. :func:`out_of_band` finds those tables (and,
on request, unpublished Lance forks named after the branch of tables it still inherits);
:func:`classify` classifies every version between the pin and HEAD from Lance's own records,
never guessed:

* ``no_row_change``: the version's fragments (ids, data files, deletion files, row counts) and
  schema fields (names, types, nullability) are exactly those of the version before it, and its
  primary key is unchanged or is ``[id]`` newly installed (an aborted migration's unit leaves
  that behind): an index (``CreateIndex``), a config or metadata change (``UpdateConfig``), a
  fragment-id reservation. Such a commit cannot change a row;
* ``rewrite``: a ``Rewrite`` (compaction) transaction. It keeps every row only if the rows at HEAD
  are the pinned rows (same ids, same content), which is checked by reading both images;
* ``row_change``: anything else (``Append``, ``Update``, ``Delete``, ``Overwrite``, ``Merge``,
  ``Restore``, ...).

A span made only of ``no_row_change`` steps and row-preserving rewrites is ``adoptable``;
anything else is ``drift`` (:mod:`omnigraph.engine.reconcile.drift.report`). Nothing here writes: adoption
and revert are :mod:`omnigraph.engine.reconcile.drift.adoption`.

pylance 14.0.2 cannot decode the transaction of a ``Rewrite`` that also rewrote an index (its
``RewrittenIndex`` binding lacks constructor arguments, so ``read_transaction`` raises
``TypeError`` naming it); that failure identifies a Rewrite, as pinned in
``tests/test_lance_surface.py``. Any other undecodable transaction is named ``unreadable`` and
classified by its fragments alone (a changed layout is then ``row_change``).

Comparing rows reads both images whole (memory about twice the table); it runs only for spans
that contain a Rewrite, or when an operator asks ``drift show`` about row-changing drift.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import lance
import pyarrow as pa

from omnigraph.engine.door.table_store import KEY_COLUMN
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import TableEntry, lance_branch_name
from omnigraph.engine.reconcile import intents
from omnigraph.engine.reconcile.drift.report import UNDECODED, OutOfBandCommit, StepKind, TableDriftReport
from omnigraph.engine.storage.blob_cells import ROW_ID, blob_names, digests
from omnigraph.engine.storage.image import open_pinned
from omnigraph.engine.storage.lance_io import LanceBranch, latest_version, list_branches, open_dataset, primary_key
from omnigraph.engine.storage.store import GraphStore

_REWRITE = "Rewrite"
_UNDECODABLE_REWRITE_MARKER = "RewrittenIndex"
HEAD_READERS = 8


def operation_name(dataset: lance.LanceDataset, version: int) -> str:
    """The Lance transaction operation that produced ``version`` (see the module docstring)."""
    try:
        transaction = dataset.read_transaction(version)
    except TypeError as error:
        return _REWRITE if _UNDECODABLE_REWRITE_MARKER in str(error) else "unreadable"
    except (OSError, ValueError):
        return "unreadable"
    if transaction is None:
        return "unrecorded"
    name = type(transaction.operation).__name__
    return UNDECODED if name == "BaseOperation" else name


def _layout(dataset: lance.LanceDataset) -> tuple[Any, ...]:
    """What determines a version's rows: every fragment's metadata and the schema's fields."""
    fragments = sorted(json.dumps(f.metadata.to_json(), sort_keys=True, default=str) for f in dataset.get_fragments())
    fields = [(f.name, str(f.type), f.nullable) for f in dataset.schema]
    return (tuple(fragments), tuple(fields))


def _keeps_fencing(before: list[str], after: list[str]) -> bool:
    """A primary key kept as it was, or ``[id]`` installed where there was none (what a
    migration unit does); any other change of the key is not a metadata-only step."""
    return after == before or (before == [] and after == [KEY_COLUMN])


def _sorted_rows(dataset: lance.LanceDataset) -> pa.Table:
    """Every row by id; a Blob column as its cells' digests (a rewrite moves the payloads, so the
    descriptors change while the bytes do not)."""
    names = blob_names(dataset.schema)
    table = dataset.to_table(with_row_id=bool(names))
    for name in names:
        table = table.set_column(table.schema.get_field_index(name), name, digests(dataset, table, name))
    if names:
        table = table.drop_columns([ROW_ID])
    return table.sort_by([(KEY_COLUMN, "ascending")]).combine_chunks()


def same_rows(first: lance.LanceDataset, second: lance.LanceDataset) -> bool:
    """True if both images hold the same rows (ids and every column, Blob payloads by digest),
    whatever their layout."""
    if first.count_rows() != second.count_rows():
        return False
    return _sorted_rows(first).equals(_sorted_rows(second))


def classify(store: GraphStore, graph_branch: str, entry: TableEntry, head: int, *, compare_rows: bool = False) -> TableDriftReport:
    """Classify every version of ``entry``'s table branch from its pin (exclusive) to ``head``.

    ``compare_rows`` also compares the rows of a span that has row-changing steps (for
    ``drift show``); spans with a Rewrite are always compared.
    """
    previous = open_pinned(store, entry.image)
    pinned = previous
    previous_layout = _layout(previous)
    previous_key = primary_key(previous.schema)
    commits: list[OutOfBandCommit] = []
    current = previous
    for version in range(entry.table_version + 1, head + 1):
        current = open_pinned(store, entry.image.at(version))
        layout, key = _layout(current), primary_key(current.schema)
        operation = operation_name(current, version)
        if layout == previous_layout and _keeps_fencing(previous_key, key):
            kind: StepKind = "no_row_change"
        elif operation == _REWRITE:
            kind = "rewrite"
        else:
            kind = "row_change"
        commits.append(OutOfBandCommit(version, operation, kind))
        previous_layout, previous_key = layout, key
    kinds = {c.kind for c in commits}
    rows_preserved: bool | None
    if kinds <= {"no_row_change"}:
        rows_preserved = True
    elif "rewrite" in kinds or compare_rows:
        rows_preserved = same_rows(pinned, current)
    else:
        rows_preserved = None
    adoptable = "row_change" not in kinds and rows_preserved is True
    return TableDriftReport(
        graph_branch=graph_branch,
        table_key=entry.table_key,
        table_path=entry.table_path,
        table_branch=entry.table_branch,
        pinned_version=entry.table_version,
        head_version=head,
        commits=tuple(commits),
        rows_preserved=rows_preserved,
        verdict="adoptable" if adoptable else "drift",
    )


def classify_unpinned_fork(
    store: GraphStore, graph_branch: str, entry: TableEntry, fork: LanceBranch, head: int, *, compare_rows: bool = False
) -> TableDriftReport:
    """Classify a Lance fork named after ``graph_branch`` of a table the branch still inherits.

    Only a fork from exactly the inherited pin whose commits change no row is adoptable (pinning
    it changes nothing the branch reads); any other fork is drift.
    """
    base = replace(entry, table_branch=fork.name, table_version=fork.parent_version)
    report = classify(store, graph_branch, base, head, compare_rows=compare_rows)
    same_ref = (fork.parent_branch, fork.parent_version) == (entry.table_branch, entry.table_version)
    return replace(
        report,
        pinned_version=entry.table_version,
        unpinned_fork=fork,
        inherited_branch=entry.table_branch,
        rows_preserved=report.rows_preserved if same_ref else None,
        verdict=report.verdict if same_ref else "drift",
    )


def in_flight_tables(store: GraphStore) -> set[tuple[str, str | None]]:
    """(table path, Lance branch) pairs an armed recovery intent may have moved."""
    covered: set[tuple[str, str | None]] = set()
    for intent in intents.list_intents(store):
        covered |= {(table.table_path, table.target_branch) for table in intent.tables}
    return covered


def out_of_band(
    store: GraphStore,
    manifest: Manifest,
    graph_branch: str,
    table_keys: list[str] | None = None,
    *,
    compare_rows: bool = False,
    in_flight: set[tuple[str, str | None]] | None = None,
    include_forks: bool = False,
) -> list[TableDriftReport]:
    """Reports for every table ``graph_branch`` owns whose HEAD is past its pin, in table-key order;
    with ``include_forks`` also for unpublished Lance forks named after the branch on tables it
    still inherits (ahead of their fork point, or forked from another version than the pin).

    Tables an armed recovery intent covers are left out: their extra versions are a commit in
    flight (or interrupted), which recovery resolves. The HEADs are read (concurrently) first,
    then the intents are listed (an intent is armed before its effect, so an effect under a HEAD
    read is covered unless its commit was published meanwhile), then the manifest is read again
    and a table whose pin moved meanwhile is left out (a concurrent publish, not an out-of-band
    commit). ``in_flight`` is :func:`in_flight_tables` when the caller listed the intents.
    """
    own = lance_branch_name(graph_branch)
    entries = [e for k, e in manifest.snapshot(graph_branch).tables.items() if table_keys is None or k in table_keys]
    owned = [entry for entry in entries if entry.table_branch == own]
    inherited = [entry for entry in entries if entry.table_branch != own] if include_forks and own is not None else []
    with ThreadPoolExecutor(max_workers=HEAD_READERS) as pool:
        heads = list(pool.map(lambda entry: latest_version(store, entry.table_path, own), owned))
        forks = list(pool.map(lambda entry: _unpinned_fork(store, entry, str(own)), inherited))
    ahead = [(entry, None, head) for entry, head in zip(owned, heads, strict=True) if head > entry.table_version]
    ahead += [(entry, found[0], found[1]) for entry, found in zip(inherited, forks, strict=True) if found is not None]
    if not ahead:
        return []
    covered = in_flight_tables(store) if in_flight is None else in_flight
    fresh = manifest.snapshot(graph_branch).tables
    reports = []
    for entry, fork, head in sorted(ahead, key=lambda item: item[0].table_key):
        if (entry.table_path, own) in covered or fresh.get(entry.table_key) != entry:
            continue
        if fork is None:
            reports.append(classify(store, graph_branch, entry, head, compare_rows=compare_rows))
        else:
            reports.append(classify_unpinned_fork(store, graph_branch, entry, fork, head, compare_rows=compare_rows))
    return reports


def _unpinned_fork(store: GraphStore, entry: TableEntry, name: str) -> tuple[LanceBranch, int] | None:
    """The Lance branch ``name`` of an inherited table with its HEAD, if it holds anything the
    pin does not (commits past its fork point, or a fork point other than the pin)."""
    fork = list_branches(open_dataset(store, entry.table_path)).get(name)
    if fork is None:
        return None
    head = latest_version(store, entry.table_path, name)
    if head > fork.parent_version or (fork.parent_branch, fork.parent_version) != (entry.table_branch, entry.table_version):
        return fork, head
    return None
