"""Driving ``omnigraph-migrate`` as a real process, and the end state a finished migration leaves."""

from __future__ import annotations

import os
import subprocess

import pytest

from omnigraph.claims.claim import inspect
from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import FormatRefused
from omnigraph.engine.failpoints import FAILPOINT_ENV
from omnigraph.engine.graph import open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.reconcile.recovery import list_intents
from omnigraph.engine.storage.key_indexes import btree_indexes, key_columns
from omnigraph.engine.storage.lance_io import latest_version, open_pinned, primary_key
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.ledger import Ledger
from omnigraph.migrator import layout
from omnigraph.migrator.layout import CLAIM_PATH, ledger_dir
from tests.support.check_helpers import assert_check_clean
from tests.support.migration_fixtures import BIN, BRANCHES, exports

MIGRATE = str(BIN / "omnigraph-migrate")


def migrate(*args: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    """``omnigraph-migrate ARGS`` in a new process, optionally exiting at ``failpoint``."""
    env = dict(os.environ)
    if failpoint:
        env[FAILPOINT_ENV] = failpoint
    return subprocess.run([MIGRATE, *args], env=env, capture_output=True, text=True, timeout=300)


def claim_token(uri: str) -> str:
    """The token of the migration claim the graph holds now (the test fails if none)."""
    holder = inspect(open_store(uri), CLAIM_PATH)
    assert holder is not None
    return holder.token


def assert_fully_migrated(uri: str, before: dict[str, list[str]], migration_id: str, tables: int = 9) -> None:
    """Every branch of the standard fixture is fenced in place, with the data of ``before`` and
    the key indexes, and the migration left nothing behind (claim, sidecars,
    intents), its ledger released."""
    store = open_store(uri)
    manifest = Manifest(store)
    assert manifest.read_stamp() == ("5", None)
    assert sorted(manifest.branches()) == BRANCHES
    for branch in manifest.branches():
        for table_key, entry in manifest.snapshot(branch).tables.items():
            dataset = open_pinned(store, entry.image)
            assert primary_key(dataset.schema) == ["id"], (branch, table_key)
            indexes = btree_indexes(dataset)  # the key indexes (rows written after the migration are not covered yet)
            assert sorted(column for column in indexes if column in ("id", "src", "dst")) == sorted(key_columns(dataset.schema))
            assert latest_version(store, entry.table_path, entry.table_branch) == entry.table_version
            expected_branch = None if branch == "main" else branch
            assert entry.table_branch == expected_branch, (branch, table_key, entry.table_branch)
    assert exports(uri) == before
    assert inspect(store, CLAIM_PATH) is None
    assert layout.remaining(store, migration_id) == []
    assert list_intents(store) == []
    state = Ledger(store, ledger_dir(migration_id)).replay().state
    assert state.phase == "released" and state.stamp_written and state.claim_released
    assert {u.status for u in state.units.values()} == {"completed"}
    assert len(state.units) == len(BRANCHES) * tables
    open_graph(open_store(uri), FENCED_PROFILE, write=True)
    with pytest.raises(FormatRefused):
        open_graph(open_store(uri), LEGACY_PROFILE, write=False)
    assert_check_clean(uri)
