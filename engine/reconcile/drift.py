"""Out-of-band table commits (made with Lance directly): find them, classify them, adopt or revert them.

**What is drift.** A graph branch *owns* a table when its manifest pins the table on the Lance
branch named after the graph branch (the dataset's main for ``main``). A commit made on that Lance
branch with Lance directly (an index, a compaction, an append by hand) leaves the table HEAD past
the pinned version with no recovery intent that explains it. :func:`out_of_band` finds those
tables (and, on request, unpublished Lance forks named after the branch of tables it still
inherits); :func:`classify` classifies every version between the pin and HEAD from Lance's own
records, never guessed:

* ``no_row_change``: the version's fragments (ids, data files, deletion files, row counts) and
  schema fields (names, types, nullability) are exactly those of the version before it, and its
  primary key is unchanged or is ``[id]`` newly installed (an aborted migration's unit leaves
  that behind): an index (``CreateIndex``), a config or metadata change (``UpdateConfig``), a
  fragment-id reservation. Such a commit cannot change a row;
* ``rewrite``: a ``Rewrite`` (compaction) transaction. It keeps every row only if the rows at HEAD
  are the pinned rows (same ids, same content), which is checked by reading both images;
* ``row_change``: anything else (``Append``, ``Update``, ``Delete``, ``Overwrite``, ``Merge``,
  ``Restore``, ...).

pylance 14.0.2 cannot decode the transaction of a ``Rewrite`` that also rewrote an index (its
``RewrittenIndex`` binding lacks constructor arguments, so ``read_transaction`` raises
``TypeError`` naming it); that failure identifies a Rewrite, as pinned in
``tests/guards/test_lance_surface.py``. Any other undecodable transaction is named ``unreadable``
and classified by its fragments alone (a changed layout is then ``row_change``). Comparing rows
reads both images whole (memory about twice the table); it runs only for spans that contain a
Rewrite, or when an operator asks ``drift show`` about row-changing drift.

**What is reported.** A :class:`TableDriftReport` lists the out-of-band commits
(:class:`OutOfBandCommit`) of one table with the verdict: ``adoptable`` (a span made only of steps
that change no row and row-preserving rewrites) or ``drift`` (``table_drift`` until an operator
runs ``omnigraph drift adopt`` or ``omnigraph drift revert``). :func:`drift_error` is that
refusal, naming the exact commands (:func:`commands_for`); :func:`recover_command` is the command
that resolves interrupted commits.

**How it is resolved.** An adoptable span is adopted by :func:`settle`: the engine re-pins HEAD
with a recorded graph commit whose message is ``adopted <operations> vA..vB on <table>``, after
the fencing checks on a fenced graph (:func:`fencing_problems`: PK exactly ``[id]``, ids unique
and non-null). Drift is resolved by an operator with ``omnigraph drift adopt`` (:func:`adopt`: the
same fencing checks, then re-pin HEAD) or ``omnigraph drift revert`` (:func:`revert`: restore the
pinned version's content as a new version and re-pin it, or delete an unpublished fork). Every
resolution publishes one graph commit and raises ``CommitConflict`` when a pin moved meanwhile;
nothing here runs inside another commit's attempt (the write path settles between two of its
attempts).
"""

from __future__ import annotations

import json
import shlex
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import lance
import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.door.table_store import KEY_COLUMN, CommitConflict
from omnigraph.engine.errors import NotFound, TableDrift, ValidationFailed
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import HeadEntry, TableEntry, lance_branch_name, now_ms, with_version
from omnigraph.engine.reconcile import recovery
from omnigraph.engine.schema.ids import new_ulid
from omnigraph.engine.storage.blobs import ROW_ID, blob_names, digests
from omnigraph.engine.storage.lance_io import (
    ImageRef,
    LanceBranch,
    delete_branch_if_present,
    latest_version,
    list_branches,
    open_dataset,
    open_pinned,
    primary_key,
)
from omnigraph.engine.storage.store import GraphStore

StepKind = Literal["no_row_change", "rewrite", "row_change"]
Verdict = Literal["adoptable", "drift"]

UNDECODED = "undecoded"
"""An operation pylance 14.0.2 has no Python class for (``BaseOperation``; compaction's fragment
reservation is one); classified by its fragments."""


class OutOfBandCommit(msgspec.Struct, frozen=True):
    """One table version made outside the engine, with what its records say it did."""

    version: int
    operation: str
    kind: StepKind

    def to_json(self) -> dict[str, Any]:
        """The commit's JSON document: ``version``, ``operation`` and ``kind``."""
        return {"version": self.version, "operation": self.operation, "kind": self.kind}


class TableDriftReport(msgspec.Struct, frozen=True):
    """The out-of-band commits between one table's pin and its HEAD, and the verdict."""

    graph_branch: str
    table_key: str
    table_path: str
    table_branch: str | None
    pinned_version: int
    head_version: int
    commits: tuple[OutOfBandCommit, ...]
    rows_preserved: bool | None
    verdict: Verdict
    unpinned_fork: LanceBranch | None = None
    inherited_branch: str | None = None

    @property
    def pinned_branch_name(self) -> str:
        """The table branch the manifest pins (for an unpinned fork, the inherited one)."""
        if self.unpinned_fork is None:
            return self.table_branch or "main"
        return self.pinned_table_branch or "main"

    @property
    def pinned_table_branch(self) -> str | None:
        """The Lance table branch the manifest pins (for an unpinned fork, the inherited one); None is main."""
        return self.table_branch if self.unpinned_fork is None else self.inherited_branch

    @property
    def span(self) -> str:
        """The versions past the pin, as ``v<pinned>..v<head>``."""
        return f"v{self.pinned_version}..v{self.head_version}"

    @property
    def operations(self) -> list[str]:
        """Distinct operation names, in version order.

        Undecoded steps that change no row are left out when the span has a named operation (they
        are the bookkeeping of that operation).
        """
        named = [c for c in self.commits if not (c.operation == UNDECODED and c.kind == "no_row_change")]
        names: list[str] = []
        for commit in named or self.commits:
            if commit.operation not in names:
                names.append(commit.operation)
        return names

    def describe(self) -> str:
        """The drift in words, for messages: the table, the branch, what moved outside the engine, its commits."""
        steps = ", ".join(f"v{c.version} {c.operation}" for c in self.commits) or "no commits"
        if self.unpinned_fork is not None:
            fork = self.unpinned_fork
            return (
                f"{self.table_key} on branch {self.graph_branch!r}: {self.table_path} has a Lance branch "
                f"{fork.name!r} forked from {fork.parent_branch or 'main'}@v{fork.parent_version} that the "
                f"graph never published (it pins {self.pinned_branch_name}@v{self.pinned_version}), at "
                f"v{self.head_version} ({steps})"
            )
        return (
            f"{self.table_key} on branch {self.graph_branch!r}: table branch {self.table_branch or 'main'} of "
            f"{self.table_path} moved {self.span} outside the engine ({steps})"
        )

    def to_json(self) -> dict[str, Any]:
        """The report's JSON document: the table, its pin and HEAD, the commits and the verdict."""
        return {
            "graph_branch": self.graph_branch,
            "table_key": self.table_key,
            "table_path": self.table_path,
            "table_branch": self.table_branch,
            "pinned_version": self.pinned_version,
            "head_version": self.head_version,
            "commits": [c.to_json() for c in self.commits],
            "rows_preserved": self.rows_preserved,
            "verdict": self.verdict,
            "unpinned_fork": None
            if self.unpinned_fork is None
            else {
                "name": self.unpinned_fork.name,
                "parent_branch": self.unpinned_fork.parent_branch,
                "parent_version": self.unpinned_fork.parent_version,
            },
        }


def recover_command(uri: str) -> str:
    """The command that opens ``uri`` read-write to resolve interrupted commits (and reports drift)."""
    return f"omnigraph recover {shlex.quote(uri)}"


def commands_for(uri: str, report: TableDriftReport) -> dict[str, str]:
    """The exact ``omnigraph drift`` commands for one table's drift."""
    tail = f"{shlex.quote(uri)} --branch {shlex.quote(report.graph_branch)} --table {shlex.quote(report.table_key)}"
    return {verb: f"omnigraph drift {verb} {tail}" for verb in ("show", "adopt", "revert")}


def drift_error(uri: str, reports: list[TableDriftReport]) -> TableDrift:
    """``table_drift`` for the first drifted table, with every drifted table in ``details``."""
    first = reports[0]
    commands = commands_for(uri, first)
    undo = (
        f"deletes the unpublished fork {first.unpinned_fork.name!r}"
        if first.unpinned_fork is not None
        else f"restores the rows of v{first.pinned_version}"
    )
    return TableDrift(
        f"{first.describe()}, which changes what the branch reads; writes to it are refused until an "
        f"operator decides. `{commands['show']}` lists the commits; `{commands['adopt']}` keeps them "
        f"(after the fencing checks); `{commands['revert']}` {undo}",
        {
            "graph_branch": first.graph_branch,
            "table_key": first.table_key,
            "table_path": first.table_path,
            "table_branch": first.table_branch,
            "pinned_version": first.pinned_version,
            "head_version": first.head_version,
            "operations": [c.to_json() for c in first.commits],
            "commands": commands,
            "drifted": [r.to_json() for r in reports],
        },
    )


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
    """True if the primary key was kept as it was, or ``[id]`` was installed where there was none.

    Installing ``[id]`` is what a migration unit does; any other change of the key is not a
    metadata-only step.
    """
    return after == before or (before == [] and after == [KEY_COLUMN])


def _sorted_rows(dataset: lance.LanceDataset) -> pa.Table:
    """Every row, sorted by id; a Blob column as its cells' digests.

    A rewrite moves the payloads, so the descriptors change while the bytes do not.
    """
    names = blob_names(dataset.schema)
    table = dataset.to_table(with_row_id=bool(names))
    for name in names:
        table = table.set_column(table.schema.get_field_index(name), name, digests(dataset, table, name))
    if names:
        table = table.drop_columns([ROW_ID])
    return table.sort_by([(KEY_COLUMN, "ascending")]).combine_chunks()


def same_rows(first: lance.LanceDataset, second: lance.LanceDataset) -> bool:
    """True if both images hold the same rows, whatever their layout.

    Rows are compared by id and every column, Blob payloads by digest.
    """
    if first.count_rows() != second.count_rows():
        return False
    same: bool = _sorted_rows(first).equals(_sorted_rows(second))
    return same


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
    base = msgspec.structs.replace(entry, table_branch=fork.name, table_version=fork.parent_version)
    report = classify(store, graph_branch, base, head, compare_rows=compare_rows)
    same_ref = (fork.parent_branch, fork.parent_version) == (entry.table_branch, entry.table_version)
    return msgspec.structs.replace(
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
    for intent in recovery.list_intents(store):
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
    """Reports for every table ``graph_branch`` owns whose HEAD is past its pin, in table-key order.

    With ``include_forks``, also for unpublished Lance forks named after the branch on tables it
    still inherits (ahead of their fork point, or forked from another version than the pin).

    Tables an armed recovery intent covers are left out: their extra versions are a commit in
    flight (or interrupted), which recovery resolves. The HEADs are read (concurrently) first,
    then the intents are listed (an intent is armed before its effect, so an effect under a HEAD
    read is covered unless its commit was published meanwhile), then the manifest is read again
    and a table whose pin moved meanwhile is left out (a concurrent publish, not an out-of-band
    commit). ``in_flight`` is :func:`in_flight_tables` when the caller listed the recovery.
    """
    own = lance_branch_name(graph_branch)
    entries = [e for k, e in manifest.snapshot(graph_branch).tables.items() if table_keys is None or k in table_keys]
    owned = [entry for entry in entries if entry.table_branch == own]
    inherited = [entry for entry in entries if entry.table_branch != own] if include_forks and own is not None else []
    with ThreadPoolExecutor(max_workers=HEAD_READERS) as pool:
        heads = list(pool.map(lambda entry: latest_version(store, entry.table_path, own), owned))
        forks = list(pool.map(lambda entry: _unpinned_fork(store, entry, str(own)), inherited))
    ahead: list[tuple[TableEntry, LanceBranch | None, int]] = [
        (entry, None, head) for entry, head in zip(owned, heads, strict=True) if head > entry.table_version
    ]
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
    """The Lance branch ``name`` of an inherited table with its HEAD, if it holds anything the pin does not.

    It does when it has commits past its fork point, or a fork point other than the pin.
    """
    fork = list_branches(open_dataset(store, entry.table_path)).get(name)
    if fork is None:
        return None
    head = latest_version(store, entry.table_path, name)
    if head > fork.parent_version or (fork.parent_branch, fork.parent_version) != (entry.table_branch, entry.table_version):
        return fork, head
    return None


ADOPT_ATTEMPTS = 8


def fencing_problems(dataset: lance.LanceDataset, where: str) -> list[str]:
    """What keeps an image from being a fenced table: PK not exactly ``[id]``, null or duplicate ids."""
    problems = []
    pk = primary_key(dataset.schema)
    if pk != [KEY_COLUMN]:
        problems.append(f"{where} has primary key {pk}, not ['{KEY_COLUMN}']")
    ids = dataset.to_table(columns=[KEY_COLUMN]).column(KEY_COLUMN)
    if ids.null_count:
        problems.append(f"{where} has {ids.null_count} row(s) with a null id")
    distinct = int(pc.count_distinct(ids, mode="only_valid").as_py())
    duplicates = len(ids) - ids.null_count - distinct
    if duplicates:
        problems.append(f"{where} has {duplicates} row(s) whose id another row also has")
    return problems


def _commit_message(verb: str, reports: list[TableDriftReport]) -> str:
    return "; ".join(f"{verb} {'+'.join(r.operations)} {r.span} on {r.table_key}" for r in reports)


def adopt(
    store: GraphStore,
    manifest: Manifest,
    graph_branch: str,
    reports: list[TableDriftReport],
    *,
    actor: str,
    require_fencing: bool,
    verb: str = "adopted",
) -> int:
    """Re-pin each report's HEAD on ``graph_branch`` in one graph commit; returns its manifest version.

    ``require_fencing`` (fenced graphs) refuses, with ``validation_failed`` and nothing written,
    an image whose PK is not ``[id]`` or whose ids are null or duplicated. Raises
    :class:`~omnigraph.engine.door.table_store.CommitConflict` if a pin moved since the reports were made or a
    concurrent publish won.
    """
    snapshot = manifest.snapshot(graph_branch)
    entries = []
    for report in reports:
        entry = snapshot.table(report.table_key)
        if (entry.table_branch, entry.table_version) != (report.pinned_table_branch, report.pinned_version):
            raise CommitConflict(f"{report.table_key} was re-pinned meanwhile")
        image = open_pinned(store, ImageRef(entry.table_path, report.table_branch, report.head_version))
        if require_fencing:
            problems = fencing_problems(image, f"{report.table_key} at v{report.head_version}")
            if problems:
                revert = commands_for(store.uri, report)["revert"]
                raise ValidationFailed(
                    f"{'; '.join(problems)}: it cannot be adopted into a fenced graph. Restore the "
                    f"rows of v{report.pinned_version} with `{revert}`",
                    {"table_key": report.table_key, "problems": problems, "command": revert},
                )
        entries.append(with_version(entry, report.table_branch, report.head_version, image.count_rows()))
    head = HeadEntry(
        new_ulid(), (snapshot.head.commit_id,), actor, _commit_message(verb, reports), now_ms(), schema_id=snapshot.head.schema_id
    )
    return manifest.publish(snapshot, entries, head)


def revert(store: GraphStore, manifest: Manifest, report: TableDriftReport, *, actor: str) -> int:
    """Undo one table's out-of-band commits in a graph commit; returns the manifest version.

    An owned table gets the pinned version's content restored as a new version, which is pinned;
    an unpublished fork is deleted (the branch's next write forks again from its pin). Re-running
    it after a crash between the two steps reverts again.
    """
    snapshot = manifest.snapshot(report.graph_branch)
    entry = snapshot.table(report.table_key)
    if (entry.table_branch, entry.table_version) != (report.pinned_table_branch, report.pinned_version):
        raise CommitConflict(f"{report.table_key} was re-pinned meanwhile")
    if report.unpinned_fork is not None:
        delete_branch_if_present(store, entry.table_path, report.unpinned_fork.name)
        message = _commit_message("reverted", [report]) + f" (deleted the unpublished fork {report.unpinned_fork.name!r})"
        head = HeadEntry(new_ulid(), (snapshot.head.commit_id,), actor, message, now_ms(), schema_id=snapshot.head.schema_id)
        return manifest.publish(snapshot, [], head)
    open_pinned(store, entry.image).restore()  # type: ignore[no-untyped-call]  # lance's LanceDataset.restore has no annotations
    restored = latest_version(store, entry.table_path, entry.table_branch)
    message = _commit_message("reverted", [report]) + f" (v{report.pinned_version} restored as v{restored})"
    head = HeadEntry(new_ulid(), (snapshot.head.commit_id,), actor, message, now_ms(), schema_id=snapshot.head.schema_id)
    return manifest.publish(snapshot, [with_version(entry, entry.table_branch, restored, entry.row_count)], head)


def settle(
    store: GraphStore,
    manifest: Manifest,
    graph_branch: str,
    *,
    actor: str,
    require_fencing: bool,
    table_keys: list[str] | None = None,
    in_flight: set[tuple[str, str | None]] | None = None,
    include_forks: bool = False,
) -> tuple[list[TableDriftReport], list[TableDriftReport]]:
    """Adopt every adoptable out-of-band span of ``graph_branch``; returns (adopted, drifted).

    A concurrent publish makes it look again (bounded); a span someone else adopted meanwhile is
    then simply gone.
    """
    for _ in range(ADOPT_ATTEMPTS):
        reports = out_of_band(store, manifest, graph_branch, table_keys, in_flight=in_flight, include_forks=include_forks)
        adoptable = [r for r in reports if r.verdict == "adoptable"]
        drifted = [r for r in reports if r.verdict == "drift"]
        if not adoptable:
            return [], drifted
        try:
            adopt(store, manifest, graph_branch, adoptable, actor=actor, require_fencing=require_fencing)
        except CommitConflict:
            continue
        return adoptable, drifted
    raise CommitConflict(f"adopting out-of-band commits on branch {graph_branch!r} kept conflicting")


def settle_all(store: GraphStore, manifest: Manifest, *, actor: str, require_fencing: bool) -> list[TableDriftReport]:
    """:func:`settle` on every live graph branch (main first, then by name); returns what was adopted."""
    adopted: list[TableDriftReport] = []
    covered = in_flight_tables(store)
    for branch in manifest.branches():
        try:
            adopted += settle(store, manifest, branch, actor=actor, require_fencing=require_fencing, in_flight=covered)[0]
        except (NotFound, ValueError, OSError):
            if manifest.incarnation(branch) is not None:
                raise
            # deleted while the graph was opened: nothing of it is left to settle
    return adopted
