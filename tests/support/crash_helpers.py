"""What every write-protocol crash test checks after the next read-write open."""

from __future__ import annotations

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.graph import open_graph
from omnigraph.engine.manifest.rows import lance_branch_name
from omnigraph.engine.reconcile.recovery import list_intents
from omnigraph.engine.storage.lance_io import latest_version, list_branches, open_dataset
from omnigraph.engine.storage.store import open_store


def assert_write_converged(uri: str, branch: str) -> None:
    """No intent left; every table ``branch`` owns is pinned at its HEAD; no fork of ``branch``
    is left on a table it still inherits; no pinned image holds a duplicate id."""
    store = open_store(uri)
    assert list_intents(store) == []
    snapshot = open_graph(open_store(uri), FENCED_PROFILE, write=False).manifest.snapshot(branch)
    own = lance_branch_name(branch)
    for entry in snapshot.tables.values():
        if entry.table_branch == own:
            assert latest_version(store, entry.table_path, entry.table_branch) == entry.table_version, entry
        else:
            assert str(own) not in list_branches(open_dataset(store, entry.table_path)), entry
        ids = open_dataset(store, entry.table_path, entry.table_branch, entry.table_version).to_table(columns=["id"])
        assert ids.num_rows == len(set(ids.column("id").to_pylist())), f"duplicate id in {entry.table_key}"
