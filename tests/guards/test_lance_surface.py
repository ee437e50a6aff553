"""Lance surface guards: the exact pylance 14.0.2 behaviour the fenced write door relies on.

Every test pins one measured fact (DESIGN.md section 4, RFC-023 sections 2 and 11.1). If Lance
changes any of them, the test goes red and the rule that depends on it must be re-examined before
the pin on ``pylance`` moves.

A "race" below is deterministic: two dataset handles are opened at the same version, the first
commits, then the second commits from its now-stale read version. No threads are involved.

Every test runs on both backends (local disk and an S3 moto server) through ``root_uri``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

import lance
import pyarrow as pa
import pytest

from omnigraph.engine.storage.lance_io import list_branches, read_branch
from omnigraph.engine.storage.store import open_store

PK_KEY = "lance-schema:unenforced-primary-key"
RETRYABLE = "Too many concurrent writers"
MATCH_FOUND = "found matching row"
PK_FROZEN = "cannot be changed once set"


# ---------------------------------------------------------------------------------------------
# helpers


def keyed_schema(pk: bool = True, key: str = "id") -> pa.Schema:
    """``key`` (non-null utf8, optionally carrying the PK metadata) plus an int64 ``v``."""
    metadata = {PK_KEY: "true"} if pk else None
    return pa.schema(
        [
            pa.field(key, pa.string(), nullable=False, metadata=metadata),
            pa.field("v", pa.int64()),
        ]
    )


def rows(ids: Iterable[str], vs: Iterable[int] | None = None, *, pk: bool = True, key: str = "id") -> pa.Table:
    ids = list(ids)
    vs = list(vs) if vs is not None else [0] * len(ids)
    return pa.table({key: ids, "v": vs}, schema=keyed_schema(pk, key))


def op_name(ds: lance.LanceDataset, version: int) -> str:
    """The type name of the operation that produced ``version``."""
    tx = ds.read_transaction(version)
    assert tx is not None
    return type(tx.operation).__name__


@dataclass(frozen=True)
class Lx:
    """Lance calls against one graph root, always with the root's storage options."""

    root: str
    opts: dict[str, str] | None

    def uri(self, name: str) -> str:
        return f"{self.root}/{name}"

    def create(self, name: str, table: pa.Table) -> str:
        uri = self.uri(name)
        lance.write_dataset(table, uri, storage_options=self.opts)
        return uri

    def open(self, name: str, version: int | None = None) -> lance.LanceDataset:
        return lance.dataset(self.uri(name), version=version, storage_options=self.opts)

    def append(self, name: str, table: pa.Table) -> None:
        lance.write_dataset(table, self.uri(name), mode="append", storage_options=self.opts)

    def overwrite(self, name: str, table: pa.Table) -> None:
        lance.write_dataset(table, self.uri(name), mode="overwrite", storage_options=self.opts)

    def commit(self, name: str, operation, read_version: int) -> lance.LanceDataset:
        return lance.LanceDataset.commit(self.uri(name), operation, read_version=read_version, storage_options=self.opts)

    def values(self, name: str, key: str = "id") -> list[tuple[str, int]]:
        """Sorted (key, v) pairs of the latest version."""
        table = self.open(name).to_table()
        return sorted(zip(table[key].to_pylist(), table["v"].to_pylist(), strict=True))

    def keys(self, name: str, key: str = "id") -> list[str]:
        return sorted(self.open(name).to_table()[key].to_pylist())


@pytest.fixture
def lx(root_uri: str) -> Lx:
    return Lx(root_uri, open_store(root_uri).storage_options)


def seeded(lx: Lx, name: str = "t", *, pk: bool = True) -> str:
    """A keyed table holding ``a=1`` and ``b=2``; returns its name."""
    lx.create(name, rows(["a", "b"], [1, 2], pk=pk))
    return name


def stale_pair(lx: Lx, name: str) -> tuple[lance.LanceDataset, lance.LanceDataset]:
    """Two handles opened at the same (latest) version."""
    first, second = lx.open(name), lx.open(name)
    assert first.version == second.version
    return first, second


def fenced_insert(ds: lance.LanceDataset, table: pa.Table, on: str | list[str] = "id"):
    """The door's strict insert: merge ON ``on``, fail on match, no Lance retries, no index."""
    return ds.merge_insert(on).when_matched_fail().when_not_matched_insert_all().conflict_retries(0).use_index(False).execute(table)


def fenced_upsert(ds: lance.LanceDataset, table: pa.Table, on: str | list[str] = "id"):
    """The door's upsert: merge ON ``on``, update on match, no Lance retries, no index."""
    return ds.merge_insert(on).when_matched_update_all().when_not_matched_insert_all().conflict_retries(0).use_index(False).execute(table)


def indexed_insert(ds: lance.LanceDataset, table: pa.Table):
    """A strict insert on the default route (no ``use_index(False)``): the legacy indexed path."""
    return ds.merge_insert("id").when_matched_fail().when_not_matched_insert_all().conflict_retries(0).execute(table)


# ---------------------------------------------------------------------------------------------
# version pin


def test_pylance_version_is_pinned() -> None:
    """pylance is exactly 14.0.2: every fact in this file was measured on it (pyproject pins it)."""
    assert lance.__version__ == "14.0.2"


# ---------------------------------------------------------------------------------------------
# PK metadata


def test_pk_metadata_at_creation_is_readable(lx: Lx) -> None:
    """Field metadata ``{PK_KEY: "true"}`` on a non-null utf8 ``id`` at creation is the PK, read back
    from ``schema.field("id").metadata``. Rule: every open-for-write checks the PK is exactly ``id``."""
    name = seeded(lx)
    ds = lx.open(name)
    assert ds.schema.field("id").metadata == {PK_KEY.encode(): b"true"}
    assert not ds.schema.field("v").metadata


# ---------------------------------------------------------------------------------------------
# filtered merge_insert ON exactly id (v2 path, use_index(False))


def test_filtered_insert_same_key_race_second_fails_retryably(lx: Lx) -> None:
    """Same-key strict-insert race: the stale second writer raises the retryable commit conflict and
    only one row holds the key. Rule: every insert/upsert is merge_insert ON exactly ``id``."""
    name = seeded(lx)
    first, second = stale_pair(lx, name)
    fenced_insert(first, rows(["c"], [10]))
    with pytest.raises(OSError, match=RETRYABLE):
        fenced_insert(second, rows(["c"], [20]))
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 10)]


def test_filtered_upsert_same_new_key_race_second_fails_retryably(lx: Lx) -> None:
    """Two upserts inserting the same new key race: the second raises the retryable conflict (the
    inserted-rows filter also covers when_matched_update_all). Rule: upserts go through the door too."""
    name = seeded(lx)
    first, second = stale_pair(lx, name)
    fenced_upsert(first, rows(["c"], [10]))
    with pytest.raises(OSError, match=RETRYABLE):
        fenced_upsert(second, rows(["c"], [20]))
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 10)]


def test_filtered_insert_disjoint_keys_race_both_land(lx: Lx) -> None:
    """Disjoint-key strict-insert race: the second rebases and both rows land. Rule: the fence costs
    nothing for non-conflicting writers, so the engine need not serialise keyed inserts."""
    name = seeded(lx)
    first, second = stale_pair(lx, name)
    fenced_insert(first, rows(["c"], [10]))
    fenced_insert(second, rows(["d"], [20]))
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 10), ("d", 20)]


def test_when_matched_fail_reports_existing_row_without_writing(lx: Lx) -> None:
    """when_matched_fail() against an existing key raises "found matching row"; the row and the
    dataset version are unchanged. Rule: strict insert is when_matched_fail(), typed as a key clash."""
    name = seeded(lx)
    ds = lx.open(name)
    before = ds.version
    with pytest.raises(OSError, match=MATCH_FOUND):
        fenced_insert(ds, rows(["a"], [99]))
    assert lx.open(name).version == before
    assert lx.values(name) == [("a", 1), ("b", 2)]


def test_when_matched_update_all_upserts_existing_row(lx: Lx) -> None:
    """when_matched_update_all() on an existing id updates it in place (row count unchanged).
    Rule: upsert is when_matched_update_all() + when_not_matched_insert_all()."""
    name = seeded(lx)
    stats = fenced_upsert(lx.open(name), rows(["a"], [99]))
    assert stats["num_updated_rows"] == 1 and stats["num_inserted_rows"] == 0
    assert lx.values(name) == [("a", 99), ("b", 2)]


# ---------------------------------------------------------------------------------------------
# routes that drop the filter


def test_btree_default_route_same_key_race_lands_duplicate(lx: Lx) -> None:
    """With a BTREE on ``id`` and no use_index(False), the default (indexed) route attaches no filter:
    a same-key race lands a duplicate. Rule: always .use_index(False)."""
    name = seeded(lx)
    lx.open(name).create_scalar_index("id", "BTREE")
    first, second = stale_pair(lx, name)
    indexed_insert(first, rows(["c"], [10]))
    indexed_insert(second, rows(["c"], [20]))
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 10), ("c", 20)]


def test_btree_with_use_index_false_same_key_race_fails_retryably(lx: Lx) -> None:
    """With a BTREE on ``id`` but .use_index(False), the same-key race is fenced (second raises).
    Rule: always .use_index(False), even when an index exists."""
    name = seeded(lx)
    lx.open(name).create_scalar_index("id", "BTREE")
    first, second = stale_pair(lx, name)
    fenced_insert(first, rows(["c"], [10]))
    with pytest.raises(OSError, match=RETRYABLE):
        fenced_insert(second, rows(["c"], [20]))
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 10)]


def test_execute_uncommitted_then_commit_lands_duplicate(lx: Lx) -> None:
    """execute_uncommitted() returns (Transaction, stats); committing it via LanceDataset.commit from
    the stale read version after a filtered insert of the same key lands a duplicate (the filter is
    dropped). Rule: never stage-then-commit a keyed write."""
    name = seeded(lx)
    staged, racer = stale_pair(lx, name)
    tx, stats = (
        staged.merge_insert("id")
        .when_matched_fail()
        .when_not_matched_insert_all()
        .conflict_retries(0)
        .use_index(False)
        .execute_uncommitted(rows(["c"], [20]))
    )
    assert isinstance(tx, lance.Transaction)
    assert stats["num_inserted_rows"] == 1
    fenced_insert(racer, rows(["c"], [10]))
    lx.commit(name, tx, read_version=staged.version)
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 10), ("c", 20)]


def test_bare_append_after_filtered_insert_lands_duplicate(lx: Lx) -> None:
    """A bare append (write_dataset mode="append") after a filtered insert of the same key lands a
    duplicate: PK metadata does not make appends unique. Rule: no Append to a keyed table, ever."""
    name = seeded(lx)
    fenced_insert(lx.open(name), rows(["c"], [10]))
    lx.append(name, rows(["c"], [20]))
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 10), ("c", 20)]


@pytest.mark.parametrize("on", ["v", ["id", "v"]], ids=["on-v", "on-id-and-v"])
def test_merge_on_other_columns_after_filtered_insert_lands_duplicate(lx: Lx, on) -> None:
    """A stale merge ON a column set other than exactly ``id`` (``v``, or ``id`` plus ``v``) that
    commits after a filtered insert of the same id carries no filter and lands a duplicate id.
    Rule: no merge ON anything but ``id`` on a keyed table."""
    name = seeded(lx)
    filtered, other = stale_pair(lx, name)
    fenced_insert(filtered, rows(["c"], [10]))
    fenced_upsert(other, rows(["c"], [99]), on=on)
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 10), ("c", 99)]


# ---------------------------------------------------------------------------------------------
# commit order: the conflict check is directional (RFC-023 2.2)


def test_unsafe_order_stale_bare_append_after_filtered_update_lands_duplicate(lx: Lx) -> None:
    """UNSAFE ORDER - filtered Update first, stale bare Append second: an Append staged from the old
    version (write_fragments + LanceOperation.Append, committed with the stale read_version) treats
    the committed filtered Update as compatible and lands a duplicate. Rule: no Append to a keyed
    table; and this is why the fleet barrier exists: an old (unfenced) writer still running after a
    fenced writer won can land a duplicate, so every old writer must be gone before activation."""
    name = seeded(lx)
    stale_version = lx.open(name).version
    fragments = lance.fragment.write_fragments(rows(["c"], [20]), lx.uri(name), storage_options=lx.opts)
    fenced_insert(lx.open(name), rows(["c"], [10]))
    lx.commit(name, lance.LanceOperation.Append(fragments), read_version=stale_version)
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 10), ("c", 20)]


def test_safe_order_filtered_update_after_bare_append_fails_retryably(lx: Lx) -> None:
    """SAFE ORDER - bare Append first, stale filtered Update second: the filtered writer (current
    Some vs committed Append) retries conservatively. Only this direction is fenced, which is why the
    fenced writer alone cannot protect against old appenders (fleet barrier)."""
    name = seeded(lx)
    filtered = lx.open(name)
    lx.append(name, rows(["c"], [20]))
    with pytest.raises(OSError, match=RETRYABLE):
        fenced_insert(filtered, rows(["c"], [10]))
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 20)]


def test_unsafe_order_unfiltered_update_after_filtered_update_lands_duplicate(lx: Lx) -> None:
    """UNSAFE ORDER - filtered Update first, stale unfiltered Update second (an indexed default-route
    merge, as a pre-fence writer with a BTREE does): current None vs committed Some has no
    conservative arm, it rebases and lands a duplicate. Rule: always use_index(False); and this is
    why the fleet barrier exists: a filtered winner cannot stop a stale unfiltered writer."""
    name = seeded(lx)
    lx.open(name).create_scalar_index("id", "BTREE")
    filtered, unfiltered = stale_pair(lx, name)
    fenced_insert(filtered, rows(["c"], [10]))
    indexed_insert(unfiltered, rows(["c"], [20]))
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 10), ("c", 20)]


UNFILTERED_UPDATES = {
    "indexed-on-id": lambda ds, table: indexed_insert(ds, table),
    "on-v": lambda ds, table: fenced_upsert(ds, table, on="v"),
    "on-id-and-v": lambda ds, table: fenced_upsert(ds, table, on=["id", "v"]),
}


@pytest.mark.parametrize("unfiltered_kind", sorted(UNFILTERED_UPDATES))
def test_safe_order_filtered_update_after_unfiltered_update_fails_retryably(lx: Lx, unfiltered_kind) -> None:
    """SAFE ORDER - unfiltered Update first (indexed default-route merge on ``id``, or a merge ON
    another column set), stale filtered Update second: current Some vs committed None retries
    conservatively (second raises the retryable conflict). Only this direction is fenced; the
    reverse order is not, hence the fleet barrier."""
    name = seeded(lx)
    lx.open(name).create_scalar_index("id", "BTREE")
    unfiltered, filtered = stale_pair(lx, name)
    UNFILTERED_UPDATES[unfiltered_kind](unfiltered, rows(["c"], [20]))
    with pytest.raises(OSError, match=RETRYABLE):
        fenced_insert(filtered, rows(["c"], [10]))
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 20)]


# ---------------------------------------------------------------------------------------------
# PK metadata lifecycle


def test_overwrite_without_pk_schema_silently_drops_pk(lx: Lx) -> None:
    """An overwrite whose schema lacks the PK metadata succeeds and silently drops the PK.
    Rule: every overwrite carries the catalog schema, then is checked."""
    name = seeded(lx)
    lx.overwrite(name, rows(["x"], [1], pk=False))
    assert not lx.open(name).schema.field("id").metadata


def test_overwrite_with_pk_schema_keeps_pk(lx: Lx) -> None:
    """An overwrite carrying the PK schema keeps the PK. Rule: overwrite with the catalog schema."""
    name = seeded(lx)
    lx.overwrite(name, rows(["x"], [1], pk=True))
    ds = lx.open(name)
    assert ds.schema.field("id").metadata == {PK_KEY.encode(): b"true"}
    assert lx.values(name) == [("x", 1)]


@pytest.mark.parametrize(
    "updates",
    [
        {"id": {PK_KEY: None}},
        {"id": {PK_KEY: "true"}},
        {"id": {PK_KEY: "false"}},
        {"v": {PK_KEY: "true"}},
    ],
    ids=["remove", "reset-same-value", "change", "other-field"],
)
def test_pk_metadata_cannot_be_changed_once_set(lx: Lx, updates) -> None:
    """Once set, the PK metadata cannot be removed, re-set to the same value, changed, or added to
    another field: "cannot be changed once set", schema unchanged. Rule: read the schema before
    installing; "already [id]" is success, anything else is refused."""
    name = seeded(lx)
    ds = lx.open(name)
    schema_before, version_before = ds.schema, ds.version
    with pytest.raises(OSError, match=PK_FROZEN):
        ds.update_field_metadata(updates)
    after = lx.open(name)
    assert after.version == version_before
    assert after.schema.equals(schema_before, check_metadata=True)


def test_update_field_metadata_installs_pk_on_table_without_one(lx: Lx) -> None:
    """On a table created without a PK, update_field_metadata({"id": {PK_KEY: "true"}}) installs it
    as a new version (operation "UpdateConfig"). Rule: this is how the migrator installs the PK."""
    name = seeded(lx, pk=False)
    ds = lx.open(name)
    assert not ds.schema.field("id").metadata
    before = ds.version
    ds.update_field_metadata({"id": {PK_KEY: "true"}})
    after = lx.open(name)
    assert after.version == before + 1
    assert after.schema.field("id").metadata == {PK_KEY.encode(): b"true"}
    assert op_name(after, after.version) == "UpdateConfig"
    assert lx.values(name) == [("a", 1), ("b", 2)]


# ---------------------------------------------------------------------------------------------
# manifest table (PK object_id)


def manifest(lx: Lx, name: str = "manifest") -> str:
    lx.create(name, rows(["head", "t1", "t2"], [1, 1, 1], key="object_id"))
    return name


def test_manifest_upserts_of_same_row_race_second_fails(lx: Lx) -> None:
    """Two manifest upserts from the same base that both update row "head": the second raises the
    retryable conflict. Rule: the manifest "head" row is the graph-commit CAS point."""
    name = manifest(lx)
    first, second = stale_pair(lx, name)
    fenced_upsert(first, rows(["head"], [2], key="object_id"), on="object_id")
    with pytest.raises(OSError, match=RETRYABLE):
        fenced_upsert(second, rows(["head"], [3], key="object_id"), on="object_id")
    assert lx.values(name, key="object_id") == [("head", 2), ("t1", 1), ("t2", 1)]


def test_manifest_upserts_of_disjoint_rows_race_both_land(lx: Lx) -> None:
    """Two manifest upserts from the same base updating disjoint rows both land (the second rebases).
    Rule: only rows a commit touches conflict; the "head" row must be in every graph commit."""
    name = manifest(lx)
    first, second = stale_pair(lx, name)
    fenced_upsert(first, rows(["t1"], [2], key="object_id"), on="object_id")
    fenced_upsert(second, rows(["t2"], [3], key="object_id"), on="object_id")
    assert lx.values(name, key="object_id") == [("head", 1), ("t1", 2), ("t2", 3)]


def test_schema_metadata_survives_merge_insert(lx: Lx) -> None:
    """update_schema_metadata() then a merge_insert keeps the schema metadata. Rule: the manifest's
    format marker lives in schema metadata and survives ordinary manifest writes."""
    name = manifest(lx)
    lx.open(name).update_schema_metadata({"omnigraph:format": "5"})
    fenced_upsert(lx.open(name), rows(["head"], [2], key="object_id"), on="object_id")
    assert lx.open(name).schema.metadata == {b"omnigraph:format": b"5"}


def test_branch_keeps_schema_metadata_from_before_main_update(lx: Lx) -> None:
    """A Lance branch created before a schema-metadata update on main keeps the old metadata.
    Rule: the format marker is per-branch; migration must visit every branch."""
    name = manifest(lx)
    ds = lx.open(name)
    ds.update_schema_metadata({"omnigraph:format": "4"})
    ds = lx.open(name)
    ds.create_branch("b", reference=("main", ds.version), storage_options=lx.opts)
    lx.open(name).update_schema_metadata({"omnigraph:format": "5"})
    assert lx.open(name).schema.metadata == {b"omnigraph:format": b"5"}
    branch = lx.open(name).checkout_version(("b", None))
    assert branch.schema.metadata == {b"omnigraph:format": b"4"}


# ---------------------------------------------------------------------------------------------
# branches


def test_branch_starts_at_fork_version_and_writes_stay_on_branch(lx: Lx) -> None:
    """create_branch("b", reference=("main", v)) returns a dataset on the branch whose version starts
    at v; a merge_insert on it writes to the branch only. Rule: branch writes go through a handle
    checked out on that branch."""
    name = seeded(lx)
    main = lx.open(name)
    fork = main.version
    branch = main.create_branch("b", reference=("main", fork), storage_options=lx.opts)
    assert branch.version == fork
    fenced_insert(branch, rows(["c"], [10]))
    assert lx.open(name).version == fork
    assert lx.keys(name) == ["a", "b"]
    latest = lx.open(name).checkout_version(("b", None))
    assert latest.version == fork + 1
    assert sorted(latest.to_table()["id"].to_pylist()) == ["a", "b", "c"]


def test_checkout_branch_latest_and_fork_point(lx: Lx) -> None:
    """checkout_version(("b", None)) opens the branch's latest version, ("b", v) its fork point.
    Rule: the engine opens branch heads and fork points by (branch, version)."""
    name = seeded(lx)
    main = lx.open(name)
    fork = main.version
    branch = main.create_branch("b", reference=("main", fork), storage_options=lx.opts)
    fenced_insert(branch, rows(["c"], [10]))
    reopened = lx.open(name)
    latest = reopened.checkout_version(("b", None))
    at_fork = reopened.checkout_version(("b", fork))
    assert latest.version == fork + 1
    assert sorted(latest.to_table()["id"].to_pylist()) == ["a", "b", "c"]
    assert at_fork.version == fork
    assert sorted(at_fork.to_table()["id"].to_pylist()) == ["a", "b"]


def test_branches_list_reports_parentage(lx: Lx) -> None:
    """branches.list() maps names to dicts with parent_branch (None when forked from main),
    parent_version and branch_identifier; a branch of a branch has parent_branch set. Rule: migration walks every
    branch using this listing."""
    name = seeded(lx)
    main = lx.open(name)
    fork = main.version
    b = main.create_branch("b", reference=("main", fork), storage_options=lx.opts)
    fenced_insert(b, rows(["c"], [10]))
    b = lx.open(name).checkout_version(("b", None))
    b.create_branch("c", reference=("b", b.version), storage_options=lx.opts)
    listing = lx.open(name).branches.list()
    assert set(listing) == {"b", "c"}
    assert all(isinstance(record, dict) for record in listing.values())
    assert listing["b"]["parent_branch"] is None  # forked from main
    assert listing["b"]["parent_version"] == fork
    assert listing["c"]["parent_branch"] == "b"
    assert listing["c"]["parent_version"] == fork + 1
    # branch_identifier is the lineage: a list of (version, uuid) pairs, the child extending its parent's
    b_ident, c_ident = listing["b"]["branch_identifier"], listing["c"]["branch_identifier"]
    assert len(b_ident) == 1 and len(c_ident) == 2
    assert c_ident[0] == b_ident[0]
    assert all(isinstance(part, tuple) and len(part) == 2 for part in c_ident)


def test_one_branch_ref_document_agrees_with_the_listing(lx: Lx) -> None:
    """Each branch has one ref document, ``_refs/branches/<name>.json``, holding what
    branches.list() reports for it (parentBranch, parentVersion, identifier.version_mapping);
    it is gone once the branch is deleted, and a name never created has none. Rule: the engine
    reads one branch's incarnation from that one document (read_branch), not from a listing."""
    name = seeded(lx)
    store = open_store(lx.root)
    main = lx.open(name)
    b = main.create_branch("b", reference=("main", main.version), storage_options=lx.opts)
    fenced_insert(b, rows(["c"], [10]))
    b = lx.open(name).checkout_version(("b", None))
    b.create_branch("c-1.x_y", reference=("b", b.version), storage_options=lx.opts)
    listed = list_branches(lx.open(name))
    assert sorted(listed) == ["b", "c-1.x_y"]
    for branch, expected in listed.items():
        assert read_branch(store, name, branch) == expected
    assert read_branch(store, name, "never") is None
    lx.open(name).branches.delete("c-1.x_y")
    assert read_branch(store, name, "c-1.x_y") is None
    assert read_branch(store, name, "b") == listed["b"]


def test_deleting_a_branch_with_a_child_is_refused(lx: Lx) -> None:
    """Deleting a branch another branch was created from is refused ("referenced by").
    Rule: branch deletion order is children first."""
    name = seeded(lx)
    main = lx.open(name)
    b = main.create_branch("b", reference=("main", main.version), storage_options=lx.opts)
    b.create_branch("c", reference=("b", b.version), storage_options=lx.opts)
    with pytest.raises(OSError, match="referenced by"):
        lx.open(name).branches.delete("b")
    assert set(lx.open(name).branches.list()) == {"b", "c"}


def test_branch_fork_unaffected_by_later_main_writes(lx: Lx) -> None:
    """A branch's fork is unaffected by later writes to main. Rule: a branch is an isolated line."""
    name = seeded(lx)
    main = lx.open(name)
    main.create_branch("b", reference=("main", main.version), storage_options=lx.opts)
    fenced_insert(lx.open(name), rows(["m"], [5]))
    assert lx.keys(name) == ["a", "b", "m"]
    branch = lx.open(name).checkout_version(("b", None))
    assert sorted(branch.to_table()["id"].to_pylist()) == ["a", "b"]


# ---------------------------------------------------------------------------------------------
# restore


def test_restore_creates_a_new_restore_version(lx: Lx) -> None:
    """restore() of an older version creates a new version whose operation is "Restore" and whose
    data is the old version's. Rule: a restore is a write; the manifest is republished after it."""
    name = seeded(lx)
    fenced_insert(lx.open(name), rows(["c"], [10]))
    latest = lx.open(name).version
    lx.open(name, version=1).restore()
    ds = lx.open(name)
    assert ds.version == latest + 1
    assert op_name(ds, ds.version) == "Restore"
    assert lx.keys(name) == ["a", "b"]


def test_merge_insert_from_before_a_restore_is_incompatible(lx: Lx) -> None:
    """A merge_insert from a read version older than a restore fails as "Incompatible transaction".
    Rules: the project republishes the manifest after any restore; the door reads the message as a
    commit conflict; and the roll-back of a stalled writer's commit restores every table it targets,
    so an effect that writer attempts after waking up is refused here."""
    name = seeded(lx)
    fenced_insert(lx.open(name), rows(["c"], [10]))
    stale = lx.open(name)
    lx.open(name, version=1).restore()
    with pytest.raises(OSError, match="Incompatible transaction"):
        fenced_insert(stale, rows(["d"], [20]))
    assert lx.keys(name) == ["a", "b"]


def test_overwrite_from_before_a_restore_lands(lx: Lx) -> None:
    """An overwrite is not refused by a later restore: it replaces whatever is there. Rule: the
    restore fences a stalled writer's merges and deletes, not its overwrite loads (docs/operations.md
    section 7 says so)."""
    name = seeded(lx)
    stale = lx.open(name)
    lx.open(name, version=1).restore()
    lance.write_dataset(rows(["z"], [9]), stale, mode="overwrite")
    assert lx.keys(name) == ["z"]


def test_a_merge_insert_on_a_stale_version_is_rebased_over_a_disjoint_commit(lx: Lx) -> None:
    """A merge_insert read at version v, committed after another commit landed v+1, lands as v+2
    carrying that commit's rows (a silent rebase; the transaction then records v+1 as its read
    version). Rule: a table effect must come out at exactly its read version plus its own number of
    commits, or it carries another commit's rows and is rolled back, never published."""
    name = seeded(lx)
    first, second = lx.open(name), lx.open(name)
    read = second.version
    fenced_insert(first, rows(["c"], [3]))
    fenced_insert(second, rows(["d"], [4]))
    assert second.version == read + 2
    assert sorted(lx.open(name, version=second.version).to_table()["id"].to_pylist()) == ["a", "b", "c", "d"]


# ---------------------------------------------------------------------------------------------
# transaction operation names


def test_read_transaction_operation_names(lx: Lx) -> None:
    """read_transaction(v).operation type names: create and overwrite -> "Overwrite", merge_insert ->
    "Update", update_field_metadata -> "UpdateConfig", append -> "Append". Rule: recovery and the
    version-walk classify history by these names."""
    name = seeded(lx, pk=False)
    lx.open(name).update_field_metadata({"id": {PK_KEY: "true"}})
    fenced_insert(lx.open(name), rows(["c"], [10]))
    lx.append(name, rows(["d"], [20]))
    lx.overwrite(name, rows(["x"], [1]))
    ds = lx.open(name)
    assert [op_name(ds, v) for v in range(1, ds.version + 1)] == [
        "Overwrite",
        "UpdateConfig",
        "Update",
        "Append",
        "Overwrite",
    ]


# ---------------------------------------------------------------------------------------------
# out-of-band maintenance commits (engine/reconcile/drift/detect.py, engine/maintenance/optimize.py)


def fragment_layout(ds: lance.LanceDataset) -> list[str]:
    return sorted(str(f.metadata.to_json()) for f in ds.get_fragments())


def test_index_and_metadata_commits_keep_every_fragment(lx: Lx) -> None:
    """create_scalar_index -> "CreateIndex", update_schema_metadata -> "UpdateConfig", and both
    leave the fragment list exactly as it was; delete -> "Delete". Rule: drift classification
    names commits by these records and treats an unchanged fragment list as "no row changed"."""
    name = seeded(lx)
    before = fragment_layout(lx.open(name))
    lx.open(name).create_scalar_index("id", "BTREE")
    lx.open(name).update_schema_metadata({"k": "v"})
    ds = lx.open(name)
    assert [op_name(ds, v) for v in (2, 3)] == ["CreateIndex", "UpdateConfig"]
    assert fragment_layout(ds) == before
    ds.delete("id = 'a'")
    ds = lx.open(name)
    assert op_name(ds, ds.version) == "Delete"
    assert fragment_layout(ds) != before


@pytest.mark.parametrize("indexed", [False, True], ids=["no-index", "btree-on-id"])
def test_compaction_records_and_the_undecodable_rewrite(lx: Lx, indexed: bool) -> None:
    """compact_files commits two versions: an operation pylance has no class for (BaseOperation,
    fragments unchanged), then the Rewrite. With a BTREE on id, read_transaction of the Rewrite
    raises TypeError naming RewrittenIndex (a binding defect of 14.0.2). Rule: engine/reconcile/drift/detect.py
    names that failure a Rewrite and proves row preservation by comparing rows."""
    name = seeded(lx)
    for key in ("c", "d"):
        fenced_insert(lx.open(name), rows([key], [3]))
    if indexed:
        lx.open(name).create_scalar_index("id", "BTREE")
    base = lx.open(name)
    lx.open(name).optimize.compact_files()
    ds = lx.open(name)
    assert ds.version == base.version + 2
    assert type(ds.read_transaction(base.version + 1).operation).__name__ == "BaseOperation"
    assert fragment_layout(lx.open(name, version=base.version + 1)) == fragment_layout(base)
    if indexed:
        with pytest.raises(TypeError, match="RewrittenIndex"):
            ds.read_transaction(ds.version)
    else:
        assert op_name(ds, ds.version) == "Rewrite"
    assert len(ds.get_fragments()) == 1
    assert lx.values(name) == [("a", 1), ("b", 2), ("c", 3), ("d", 3)]


def test_cleanup_with_a_version_list_deletes_exactly_those_versions(lx: Lx) -> None:
    """cleanup_old_versions(versions=[...]) deletes exactly the listed versions of the checked-out
    branch, whatever their age, and no other (older unlisted versions and the other branch stay).
    Rule: optimize computes what may go and hands Lance that exact list."""
    name = seeded(lx)
    for key in ("c", "d", "e"):
        fenced_insert(lx.open(name), rows([key], [3]))
    lx.open(name).create_branch("b", reference=("main", 3))
    fenced_insert(lx.open(name).checkout_version(("b", None)), rows(["x"], [9]))
    fenced_insert(lx.open(name).checkout_version(("b", None)), rows(["y"], [9]))
    lx.open(name).cleanup_old_versions(versions=[2])
    assert [v["version"] for v in lx.open(name).versions()] == [1, 3, 4]
    branch = lx.open(name).checkout_version(("b", None))
    branch.cleanup_old_versions(versions=[4])
    assert [v["version"] for v in lx.open(name).checkout_version(("b", None)).versions()] == [3, 5]
    assert sorted(lx.open(name).checkout_version(("b", 5)).to_table()["id"].to_pylist()) == ["a", "b", "c", "d", "x", "y"]
    assert [v["version"] for v in lx.open(name).versions()] == [1, 3, 4]
    assert isinstance(lx.open(name).versions()[0]["timestamp"], dt.datetime)


# ---------------------------------------------------------------------------------------------
# Blob columns (omnigraph.engine.storage.blobs, omnigraph.engine.ops.blobs, the door's overwrite)


def blob_schema() -> pa.Schema:
    from lance.blob import blob_field

    return pa.schema([pa.field("id", pa.string(), nullable=False, metadata={PK_KEY: "true"}), blob_field("b")])


def blob_rows(values: dict[str, object]) -> pa.Table:
    from lance.blob import blob_array

    return pa.table({"id": list(values), "b": blob_array(list(values.values()))}, schema=blob_schema())


def descriptors(ds: lance.LanceDataset) -> dict[str, dict[str, object] | None]:
    table = ds.to_table()
    return dict(zip(table["id"].to_pylist(), table["b"].to_pylist(), strict=True))


def test_blob_columns_read_as_descriptors_and_bytes_come_by_row_id(lx: Lx) -> None:
    """A ``blob_field`` column is stored as ``lance.blob.v2``; a scan gives descriptors
    ``{kind, position, size, blob_id, blob_uri}`` (kind 0 inline, 1 packed, 2 dedicated, by
    size), and ``take_blobs(ids=_rowid)`` gives file-like cells (None for null). Rule: the
    engine reads payloads through take_blobs, one cell at a time, and sizes cells by descriptor."""
    lx.create("blob", blob_rows({"a": b"x", "big": b"y" * (5 << 20), "mid": b"z" * 100_000, "n": None}))
    ds = lx.open("blob")
    assert str(ds.schema.field("b").type) == "extension<lance.blob.v2<BlobType>>"
    found = descriptors(ds)
    assert found["n"] is None and {d["kind"] for d in found.values() if d} == {0, 1, 2}
    assert {k: d["size"] for k, d in found.items() if d} == {"a": 1, "big": 5 << 20, "mid": 100_000}
    scanned = ds.to_table(columns=["id"], with_row_id=True)
    by_id = dict(zip(scanned["id"].to_pylist(), scanned["_rowid"].to_pylist(), strict=True))
    cells = ds.take_blobs("b", ids=[by_id["mid"], by_id["n"], by_id["a"]])
    assert cells[1] is None and cells[0].readall() == b"z" * 100_000 and cells[2].size() == 1


def test_external_blob_uris_need_the_overwrite_flag_and_merge_insert_refuses_them(lx: Lx, tmp_path) -> None:
    """An external URI (outside the dataset's bases) is refused by merge_insert, and by overwrite
    unless ``allow_external_blob_outside_bases=True``, which stores it as a reference (kind 3,
    position and size 0 for the whole object) read through on every take. Rules: load overwrite
    keeps references (the door passes the flag); inserts and upserts copy the bytes first; a
    reference whose object is gone is not_found."""
    from lance.blob import Blob

    target = tmp_path / "object.bin"
    target.write_bytes(b"first")
    uri = target.as_uri()
    lx.create("ext", blob_rows({"seed": b"s"}))
    with pytest.raises(OSError, match="outside registered external bases"):
        fenced_insert(lx.open("ext"), blob_rows({"r": Blob.from_uri(uri)}))
    with pytest.raises(OSError, match="allow_external_blob_outside_bases"):
        lx.overwrite("ext", blob_rows({"r": Blob.from_uri(uri)}))
    lance.write_dataset(
        blob_rows({"r": Blob.from_uri(uri)}),
        lx.uri("ext"),
        mode="overwrite",
        storage_options=lx.opts,
        allow_external_blob_outside_bases=True,
    )
    ds = lx.open("ext")
    assert descriptors(ds)["r"] == {"kind": 3, "position": 0, "size": 0, "blob_id": 0, "blob_uri": uri}
    target.write_bytes(b"second!")
    assert ds.take_blobs("b", indices=[0])[0].readall() == b"second!"
    target.unlink()  # a gone object fails the whole take, "Not found" (omnigraph.engine.storage.blobs)
    with pytest.raises((OSError, ValueError), match="Not found"):
        ds.take_blobs("b", indices=[0])


def test_an_upsert_rewrites_only_matched_rows_and_may_repeat_a_descriptor(lx: Lx) -> None:
    """A fenced upsert of one row of a blob table deletes it from its fragment (a deletion file,
    the fragment's data files untouched) and writes it, payload included, to a new fragment; the
    new inline cell can carry the very descriptor the old one had although its bytes differ.
    Rules: an update rewrites the payloads of matched rows only; the merge diff and drift
    comparisons digest payloads, never descriptors."""
    lx.create("up", blob_rows({"a": b"1", "b": b"2", "c": b"3"}))
    before = {f.fragment_id: [d.path for d in f.data_files()] for f in lx.open("up").get_fragments()}
    was = descriptors(lx.open("up"))["a"]
    fenced_upsert(lx.open("up"), blob_rows({"a": b"9"}))
    ds = lx.open("up")
    fragments = {f.fragment_id: f for f in ds.get_fragments()}
    (old,) = before
    assert [d.path for d in fragments[old].data_files()] == before[old]
    assert fragments[old].metadata.deletion_file.num_deleted_rows == 1
    (new,) = set(fragments) - {old}
    assert fragments[new].count_rows() == 1
    assert descriptors(ds)["a"] == was
    row = ds.to_table(columns=["id"], filter="id = 'a'", with_row_id=True)["_rowid"].to_pylist()
    assert ds.take_blobs("b", ids=row)[0].readall() == b"9"


# ---------------------------------------------------------------------------------------------
# vector index (omnigraph.engine.maintenance.declared_indexes, omnigraph.engine.query.search)


def vector_rows(points: dict[str, list[float] | None]) -> pa.Table:
    schema = pa.schema([pa.field("id", pa.string(), nullable=False, metadata={PK_KEY: "true"}), pa.field("vec", pa.list_(pa.float32(), 2))])
    return pa.table({"id": list(points), "vec": list(points.values())}, schema=schema)


def test_a_vector_index_search_covers_later_rows_and_skips_nulls(lx: Lx) -> None:
    """create_index(IVF_FLAT, replace=True) is a "CreateIndex" commit that keeps every fragment,
    described with a ``type_url`` ending in "VectorIndexDetails"; count_rows takes ``IS NOT NULL``;
    the door's fenced insert lands on the indexed table; a ``nearest`` search with ``columns=["id",
    "_distance"]`` also searches the fragment written after the index and never returns a null
    vector. Rules: optimize builds vector indexes as drift-adoptable commits and skips a column with
    no vector; the query engine takes the index's ids as candidates and ranks them itself."""
    points: dict[str, list[float] | None] = {f"p{i:02d}": [float(i), float(i % 7)] for i in range(40)}
    points["nul"] = None
    lx.create("vec", vector_rows(points))
    before = fragment_layout(lx.open("vec"))
    assert lx.open("vec").count_rows(filter="vec IS NOT NULL") == 40
    lx.open("vec").create_index("vec", "IVF_FLAT", metric="l2", num_partitions=4, replace=True)
    ds = lx.open("vec")
    assert op_name(ds, ds.version) == "CreateIndex" and fragment_layout(ds) == before
    (index,) = ds.describe_indices()
    assert index.type_url.endswith("VectorIndexDetails") and list(index.field_names) == ["vec"]
    fenced_insert(ds, vector_rows({"new": [100.0, 100.0]}))
    query = {"column": "vec", "q": [99.0, 99.0], "k": 45, "nprobes": 20}
    found = lx.open("vec").to_table(columns=["id", "_distance"], nearest=query)
    assert found.column_names == ["id", "_distance"]
    assert found["id"][0].as_py() == "new" and "nul" not in found["id"].to_pylist() and found.num_rows == 41


def test_a_full_text_index_scores_bm25_over_letter_and_digit_tokens(lx: Lx) -> None:
    """An INVERTED index built with the declared tokenizer settings (simple, lower-cased, no
    stemming, stop words or folding) tokenizes into runs of letters and digits; a MatchQuery on
    its column returns every matching row (no default limit) with the BM25 score (k1 1.2, b 0.75,
    statistics over the non-null texts); its description's segments list the indexed fragments, and
    ``num_rows_indexed`` counts the non-null texts, deleted ones included even after a rebuild, which
    scores the live rows only; a deletion shows as a fragment's deletion file. Rules: the query engine reads bm25 from a
    covering index only and computes the same formula itself otherwise."""
    import math

    from lance.query import MatchQuery

    from omnigraph.engine.maintenance.declared_indexes import TEXT_TOKENS

    texts = ["Quick, quick! fox-trot", "the fox", "Über café", None] + [f"filler {i}" for i in range(120)] + ["fox"] * 110
    schema = pa.schema([pa.field("id", pa.string(), nullable=False, metadata={PK_KEY: "true"}), pa.field("body", pa.string())])
    lx.create("fts", pa.table({"id": [f"t{i:03d}" for i in range(len(texts))], "body": texts}, schema=schema))
    lx.open("fts").create_scalar_index("body", "INVERTED", replace=True, **TEXT_TOKENS)
    ds = lx.open("fts")
    (index,) = ds.describe_indices()
    assert index.type_url.endswith("InvertedIndexDetails")
    assert {f for s in index.segments for f in s.fragment_ids} == {f.fragment_id for f in ds.get_fragments()}
    found = ds.to_table(columns=["id", "_score"], full_text_query=MatchQuery("fox", "body"))
    assert found.num_rows == 112
    documents = [t for t in texts if t is not None]
    average = (4 + 2 + 2 + 120 * 2 + 110) / len(documents)  # quick quick fox trot; the fox; über café; filler N; fox
    idf = math.log(1 + (len(documents) - 112 + 0.5) / (112 + 0.5))
    scores = dict(zip(found["id"].to_pylist(), found["_score"].to_pylist(), strict=True))
    assert scores["t001"] == pytest.approx(idf * 2.2 / (1 + 1.2 * (1 - 0.75 + 0.75 * 2 / average)), rel=1e-5)
    assert ds.to_table(columns=["id", "_score"], full_text_query=MatchQuery("über", "body"))["id"].to_pylist() == ["t002"]
    assert ds.to_table(columns=["id", "_score"], full_text_query=MatchQuery("trot", "body"))["id"].to_pylist() == ["t000"]
    ds.delete("id = 't001'")
    ds = lx.open("fts")
    texts_left = ds.count_rows(filter="body IS NOT NULL")
    assert ds.describe_indices()[0].num_rows_indexed == len(documents) and texts_left == len(documents) - 1
    ds.create_scalar_index("body", "INVERTED", replace=True, **TEXT_TOKENS)
    ds = lx.open("fts")
    assert ds.describe_indices()[0].num_rows_indexed == len(documents)  # still counts the deleted text
    assert any(f.metadata.deletion_file is not None for f in ds.get_fragments())
    rebuilt = ds.to_table(columns=["id", "_score"], full_text_query=MatchQuery("fox", "body"))
    idf = math.log(1 + (len(documents) - 1 - 111 + 0.5) / (111 + 0.5))
    average = (4 + 2 + 120 * 2 + 110) / (len(documents) - 1)
    assert dict(zip(rebuilt["id"].to_pylist(), rebuilt["_score"].to_pylist(), strict=True))["t200"] == pytest.approx(
        idf * 2.2 / (1 + 1.2 * (1 - 0.75 + 0.75 * 1 / average)), rel=1e-5
    )


def test_an_ngram_index_serves_a_contains_filter_exactly(lx: Lx) -> None:
    """An NGRAM index created with an explicit name (``body:ngram``) stands beside an INVERTED
    index on the same column. A scan filtered on ``contains(`body`, '...')`` (quotes doubled) is
    planned as a query of the column's index built first: with the NGRAM first, of it; with the
    INVERTED first, of none (the whole column is read, the same rows). Served, Lance checks each
    row the index proposes, also scans the fragment written after the index, and skips deleted
    rows: exactly the rows whose text holds the substring, case-sensitively. Rules: optimize builds
    the NGRAM before the INVERTED for ``String @index`` (and rebuilding both keeps that order); the
    query engine reads a served ``contains``'s rows through it."""
    from omnigraph.engine.maintenance.declared_indexes import build, index_kinds
    from omnigraph.engine.schema.types import ScalarType

    texts = ["it's a fox", "Quick fox-trot", "the fax", "Über café", None] + [f"filler {i}" for i in range(60)]
    schema = pa.schema([pa.field("id", pa.string(), nullable=False, metadata={PK_KEY: "true"}), pa.field("body", pa.string())])

    def served(name: str) -> bool:
        return "ScalarIndexQuery" in lx.open(name).scanner(columns=["id"], filter="contains(`body`, 'fox')").explain_plan()

    for name, kinds in (("declared", index_kinds(ScalarType("String"))), ("reversed", ("INVERTED", "NGRAM"))):
        lx.create(name, pa.table({"id": [f"t{i:03d}" for i in range(len(texts))], "body": texts}, schema=schema))
        for kind in kinds:
            build(lx.open(name), "body", kind)
        assert served(name) == (name == "declared")
    for kind in index_kinds(ScalarType("String")):  # rebuilt, in the declared order again
        build(lx.open("declared"), "body", kind)
    ds = lx.open("declared")
    assert sorted((i.name, i.type_url.rsplit(".", 1)[-1]) for i in ds.describe_indices()) == [
        ("body:ngram", "NGramIndexDetails"),
        ("body_idx", "InvertedIndexDetails"),
    ]
    fenced_insert(ds, pa.table({"id": ["new"], "body": ["a new fox"]}, schema=schema))
    lx.open("declared").delete("id = 't001'")
    ds = lx.open("declared")
    assert served("declared")
    assert sorted(ds.to_table(columns=["id"], filter="contains(`body`, 'fox')")["id"].to_pylist()) == ["new", "t000"]
    assert ds.to_table(columns=["id"], filter="contains(`body`, 'it''s')")["id"].to_pylist() == ["t000"]
    assert ds.to_table(columns=["id"], filter="contains(`body`, 'ber caf')")["id"].to_pylist() == ["t003"]
    assert ds.to_table(columns=["id"], filter="contains(`body`, 'Fox')").num_rows == 0
