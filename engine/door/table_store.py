"""The fenced write door: the only code that writes keyed tables in format 5.

Every rule here comes from a measured fact of the pinned Lance (see ``tests/guards/test_lance_surface.py``):

* every insert and upsert is ``merge_insert`` ON exactly the table's primary key (``id`` for node
  and edge tables, ``object_id`` for ``__manifest``), which attaches Lance's inserted-rows
  conflict filter; a concurrent same-key commit then fails instead of landing a duplicate;
* always ``use_index(False)``: the indexed route (taken when a BTREE exists on the key) drops the
  filter;
* never stage-then-commit (``execute_uncommitted`` + ``commit`` drops the filter), never a bare
  Append, never a merge ON another column;
* ``conflict_retries(0)``: the engine, not Lance, decides whether to retry, because a retry must
  re-validate against a fresh graph snapshot;
* every overwrite carries the catalog schema (with its PK metadata) and is checked afterwards;
* PK metadata is installed only where absent: ``[id]`` already present is success, anything else
  is refused, because Lance cannot change or remove a PK once set;
* a schema change's column steps (:func:`evolve_columns`) never name ``id`` (nor ``src``/``dst``),
  and the PK must be exactly ``[id]`` after each of them.

Outcomes are typed (:class:`CommitConflict`, :class:`ExistingKeys`, :class:`EffectLanded`); Lance's
error text is interpreted here and nowhere else. :data:`FENCED_ROUTER` routes the write protocol's
row writes through this door, and :data:`FENCED_PROFILE` is the format-5 engine's profile
(``omnigraph``: writes stamp ``5``, reads ``4``, ``migrating`` and ``5``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import lance
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.door.routing import EngineProfile, MergeRows, TableRouter
from omnigraph.engine.errors import FormatRefused, Internal
from omnigraph.engine.storage import key_indexes
from omnigraph.engine.storage.lance_io import create_empty_dataset, primary_key
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5, FORMAT_MIGRATING, PK_METADATA_KEY
from omnigraph.engine.storage.store import GraphStore

if TYPE_CHECKING:
    from omnigraph.engine.schema.evolution import TableChange

KEY_COLUMN = "id"
COMMIT_ROWS = 8192
"""Rows of one table in one fenced commit at most: the per-commit limit of writes that stage
rows, and the size of each link of a merge's chain of commits."""
COMMIT_ARROW_BYTES = 32 * 1024 * 1024
"""Bytes of Arrow data of one table in one fenced commit at most (same use as :data:`COMMIT_ROWS`)."""

_RETRYABLE_MARKERS = ("Too many concurrent writers", "Retryable commit conflict", "CommitConflict", "Incompatible transaction")
"""How Lance words a commit it refused whole: a conflicting concurrent commit, or (``Incompatible
transaction``) a write based on a version older than a later restore, which recovery uses to fence
off a writer whose lease was taken over."""
_EXISTING_KEY_MARKER = "found matching row with key values"


class CommitConflict(Exception):
    """Lance refused the commit because a concurrent commit conflicts; nothing of it landed."""


class ExistingKeys(Exception):
    """A strict insert met an id that already exists at its read version; nothing landed.

    The caller re-probes its attempted ids to name the conflicting one.
    """


class EffectLanded(Exception):
    """A multi-commit effect failed after its first commit landed (recovery must resolve it)."""


def _classify(error: OSError) -> Exception:
    text = str(error)
    if _EXISTING_KEY_MARKER in text:
        return ExistingKeys(text)
    if any(marker in text for marker in _RETRYABLE_MARKERS):
        return CommitConflict(text)
    return error


def require_primary_key(dataset: lance.LanceDataset, expected: list[str], where: str) -> None:
    """Refuse (``format_refused``) a write-open whose physical PK is not exactly ``expected``."""
    actual = primary_key(dataset.schema)
    if actual != expected:
        raise FormatRefused(
            f"{where} has primary key {actual or 'none'}, expected {expected}; a format-5 write "
            "needs the fenced primary key (run `omnigraph-migrate` on format-4 graphs)",
            {"table": where, "expected": expected, "actual": actual},
        )


def _fenced_merge(dataset: lance.LanceDataset, rows: pa.Table, *, strict: bool) -> int:
    key = primary_key(dataset.schema)
    if len(key) != 1:
        raise FormatRefused(f"fenced merge needs a single-column primary key, found {key}")
    builder = dataset.merge_insert(key[0])
    builder = builder.when_matched_fail() if strict else builder.when_matched_update_all()
    builder = builder.when_not_matched_insert_all().conflict_retries(0).use_index(False)
    try:
        builder.execute(rows)
    except OSError as error:
        raise _classify(error) from error
    return int(dataset.version)


def create_keyed_table(store: GraphStore, rel: str, schema: pa.Schema) -> int:
    """Create an empty keyed table whose schema already carries the PK, with its key indexes; returns its version.

    The version is :func:`omnigraph.engine.storage.key_indexes.created_version` (the empty table,
    then one BTREE per key column: ``id``, and ``src``/``dst`` of an edge table).
    """
    if primary_key(schema) != [KEY_COLUMN]:
        raise Internal(f"refusing to create {rel} without the primary key on {KEY_COLUMN!r}")
    return key_indexes.create_on_empty(create_empty_dataset(store, rel, schema))


def strict_insert(dataset: lance.LanceDataset, rows: pa.Table) -> int:
    """Insert rows whose ids must not exist; returns the committed version.

    Raises :class:`ExistingKeys` if an id exists at the read version and :class:`CommitConflict`
    if a concurrent commit conflicts (for example, inserted one of the same ids).
    """
    return _fenced_merge(dataset, rows, strict=True)


def upsert(dataset: lance.LanceDataset, rows: pa.Table) -> int:
    """Insert or fully replace rows by primary key; returns the committed version."""
    return _fenced_merge(dataset, rows, strict=False)


def overwrite(dataset: lance.LanceDataset, rows: pa.Table | pa.RecordBatchReader, schema: pa.Schema) -> int:
    """Replace the table's contents (on the dataset's checked-out branch) keeping the PK.

    ``schema`` is the catalog schema including the PK metadata; the result is re-read and a
    missing PK is reported as an internal error. An external Blob URI is stored as a reference
    (``allow_external_blob_outside_bases``: the write parameter merge-insert cannot take).
    """
    expected = primary_key(schema)
    result = lance.write_dataset(rows.cast(schema), dataset, schema=schema, mode="overwrite", allow_external_blob_outside_bases=True)
    if primary_key(result.schema) != expected:
        raise Internal(f"overwrite of {dataset.uri} lost its primary key {expected}")
    return int(result.version)


def repair_rows(dataset: lance.LanceDataset, ids: list[str], null_ids: bool, rows: pa.Table) -> int:
    """Duplicate repair behind the migration barrier: delete the rows of ``ids``, then insert ``rows``.

    The rows deleted are every row whose id is in ``ids`` (and every null-id row if ``null_ids``);
    ``rows`` are inserted with a strict merge ON ``id``.

    The tables being repaired have no PK yet (validation stops a migration before any PK), so the
    insert carries no key filter; it is safe only because the migration claim and the barrier
    exclude every other writer. Two Lance commits; a failure of the second raises
    :class:`EffectLanded`. Returns the final version.
    """
    predicate = pc.field(KEY_COLUMN).isin(pa.array(ids, pa.utf8()))
    if null_ids:
        predicate = predicate | pc.field(KEY_COLUMN).is_null()
    try:
        dataset.delete(predicate, conflict_retries=0)
    except OSError as error:
        raise _classify(error) from error
    if rows.num_rows == 0:
        return int(dataset.version)
    builder = dataset.merge_insert(KEY_COLUMN).when_matched_fail().when_not_matched_insert_all()
    try:
        builder.conflict_retries(0).use_index(False).execute(rows)
    except OSError as error:
        raise EffectLanded(f"the repair of {dataset.uri} deleted rows but its insert failed: {error}") from error
    return int(dataset.version)


def install_primary_key(dataset: lance.LanceDataset) -> tuple[Literal["installed", "present"], int]:
    """Install the PK ``[id]`` on a table that has none; ``present`` if it is already ``[id]``.

    Returns the outcome and the dataset version that carries the PK.
    Any other PK is refused: Lance cannot change a set PK, so the migration can only roll
    forward. The metadata commit is checked by reading the schema back.
    """
    current = primary_key(dataset.schema)
    if current == [KEY_COLUMN]:
        return "present", int(dataset.version)
    if current:
        raise FormatRefused(
            f"{dataset.uri} carries primary key {current}, not [{KEY_COLUMN!r}]; Lance cannot change "
            "a primary key once set, so this table cannot be migrated in place",
            {"table": dataset.uri, "actual": current},
        )
    try:
        dataset.update_field_metadata({KEY_COLUMN: {PK_METADATA_KEY: "true"}})
    except OSError as error:
        raise _classify(error) from error
    if primary_key(dataset.schema) != [KEY_COLUMN]:
        raise Internal(f"installing the primary key on {dataset.uri} did not take effect")
    return "installed", int(dataset.version)


def delete_rows(dataset: lance.LanceDataset, ids: list[str]) -> int:
    """Delete every row whose id is in ``ids`` (one Lance commit); returns the committed version.

    ``conflict_retries=0`` so a concurrent commit that conflicts is :class:`CommitConflict`.
    """
    try:
        dataset.delete(pc.field(KEY_COLUMN).isin(pa.array(ids, pa.utf8())), conflict_retries=0)
    except OSError as error:
        raise _classify(error) from error
    return int(dataset.version)


def commit_slices(rows: pa.Table) -> list[pa.Table]:
    """``rows`` cut, in order, into zero-copy slices of at most :data:`COMMIT_ROWS` rows and :data:`COMMIT_ARROW_BYTES` bytes.

    A single row larger than that is a slice of its own. An empty table has no slice.
    """
    slices: list[pa.Table] = []
    pending = [rows.slice(start, COMMIT_ROWS) for start in range(0, rows.num_rows, COMMIT_ROWS)]
    while pending:
        piece = pending.pop(0)
        if piece.nbytes > COMMIT_ARROW_BYTES and piece.num_rows > 1:
            half = piece.num_rows // 2
            pending[:0] = [piece.slice(0, half), piece.slice(half)]
        else:
            slices.append(piece)
    return slices


def merge_rows(dataset: lance.LanceDataset, changes: MergeRows, after_step: Callable[[], None]) -> int:
    """Strict insert, then upsert, then delete on one table, as a chain of fenced commits; the last version.

    Each commit holds at most :data:`COMMIT_ROWS` rows and :data:`COMMIT_ARROW_BYTES` bytes
    (:func:`commit_slices`; ids to delete :data:`COMMIT_ROWS` at a time). Returns the last committed
    version (the read version if there was nothing to write).

    A conflict on the first commit landed nothing and propagates as such; on a later one it is
    :class:`EffectLanded` (recovery restores the table to its pinned version, undoing every commit
    of the chain). ``after_step`` is called after every commit.
    """
    steps: list[Callable[[], int]] = []
    steps += [functools.partial(strict_insert, dataset, piece) for piece in commit_slices(changes.inserts)]
    if changes.upserts is not None:
        steps += [functools.partial(upsert, dataset, piece) for piece in commit_slices(changes.upserts)]
    ids = list(changes.delete_ids)
    steps += [functools.partial(delete_rows, dataset, ids[start : start + COMMIT_ROWS]) for start in range(0, len(ids), COMMIT_ROWS)]
    version = int(dataset.version)
    for index, step in enumerate(steps):
        try:
            version = step()
        except (CommitConflict, ExistingKeys) as conflict:
            if index == 0:
                raise
            raise EffectLanded(
                f"the merge of {changes.where} conflicted after {index} of its {len(steps)} commits: {conflict}"
            ) from conflict
        after_step()
    return version


_SYSTEM_COLUMNS = frozenset({KEY_COLUMN, "src", "dst"})


def evolve_columns(dataset: lance.LanceDataset, change: TableChange, after_step: Callable[[], None]) -> tuple[int, int]:
    """Apply a schema change's column steps to one table: drops, renames, relaxed nullability, adds.

    One Lance commit per kind of step present, in that order (drops free names a rename may
    take). An added optional column is a metadata-only all-null column; an added required one is
    written with its fill value. Returns the last version and the number of commits; a failure
    after the first commit is :class:`EffectLanded` (recovery restores the table to its pin).
    The PK is checked to be exactly ``[id]`` after every commit.
    """
    named = (
        set(change.drops) | {name for pair in change.renames for name in pair} | set(change.relaxed) | {a.field.name for a in change.adds}
    )
    if named & _SYSTEM_COLUMNS:
        raise Internal(f"a schema change may not touch {sorted(named & _SYSTEM_COLUMNS)} of {change.old_key}")
    steps: list[Callable[[], None]] = []
    if change.drops:
        steps.append(functools.partial(dataset.drop_columns, list(change.drops)))
    if change.renames:
        renames: list[Any] = [{"path": old, "name": new} for old, new in change.renames]
        steps.append(functools.partial(dataset.alter_columns, *renames))
    if change.relaxed:
        relaxed: list[Any] = [{"path": name, "nullable": True} for name in change.relaxed]
        steps.append(functools.partial(dataset.alter_columns, *relaxed))
    nulls = [added.field for added in change.adds if added.default is None]
    if nulls:
        steps.append(functools.partial(dataset.add_columns, nulls))
    for added in (a for a in change.adds if a.default is not None):
        steps.append(functools.partial(_add_filled, dataset, added.field, added.default))
    for index, step in enumerate(steps):
        try:
            step()
        except (OSError, ValueError) as error:
            classified = _classify(error) if isinstance(error, OSError) else error
            if index == 0:
                if isinstance(classified, CommitConflict):
                    raise classified from error
                raise
            raise EffectLanded(
                f"the schema change of {change.old_key} failed after {index} of its {len(steps)} commits: {error}"
            ) from error
        if primary_key(dataset.schema) != [KEY_COLUMN]:
            raise Internal(f"the schema change of {change.old_key} left primary key {primary_key(dataset.schema)}")
        after_step()
    return int(dataset.version), len(steps)


def _add_filled(dataset: lance.LanceDataset, column: pa.Field, value: object) -> None:
    """Add ``column`` holding ``value`` in every row (one commit; new data files for that column only)."""
    output = pa.schema([column])

    @lance.batch_udf(output_schema=output)
    def fill(batch: pa.RecordBatch) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays([pa.array([value] * batch.num_rows, column.type)], schema=output)

    dataset.add_columns(fill, read_columns=[KEY_COLUMN])


def _check_writable(dataset: lance.LanceDataset, where: str) -> None:
    require_primary_key(dataset, [KEY_COLUMN], where)


FENCED_ROUTER = TableRouter(
    with_pk=True,
    create_table=create_keyed_table,
    check_writable=_check_writable,
    strict_insert=strict_insert,
    upsert=upsert,
    overwrite=overwrite,
    merge=merge_rows,
    repair=repair_rows,
)

FENCED_PROFILE = EngineProfile(
    program="omnigraph",
    init_stamp=FORMAT_5,
    read_write_stamps=frozenset({FORMAT_5}),
    read_only_stamps=frozenset({FORMAT_4, FORMAT_MIGRATING, FORMAT_5}),
    router=FENCED_ROUTER,
    refusal_hint=(
        "this graph is not fenced yet: upgrade it with `omnigraph-migrate preflight {uri}` then "
        "`omnigraph-migrate run {uri}` (reads still work)"
    ),
)
