"""Out-of-band commits that change no row, made before the upgrade, are adopted under the claim.

Routine Lance maintenance on a format-4 graph (here a scalar index on ``Person.age``) leaves a
table HEAD past its pin. ``omnigraph-migrate run`` looks at every branch for such HEADs (several
branches at once on an object store), adopts them on each branch they were found on with a
recorded graph commit, and the plan then pins them; the upgraded graph checks clean. (Local disk
only: on an object store the same code looks at the branches through ``fan_out``, whose order
and error rules ``tests/migrator/test_migration.py`` checks.)
"""

from __future__ import annotations

import json
from pathlib import Path

from omnigraph.engine.manifest.commit_graph import commit_history
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.lance_io import open_dataset
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import OMNIGRAPH, invoke
from tests.support.migration_cli import migrate
from tests.support.migration_fixtures import compact_copy

_SOURCES: dict[str, str] = {}
INDEXED = ("main", "feat")  # feat owns its Person image; lazy and feat2 inherit theirs


def _index_age_out_of_band(uri: str, branch: str) -> int:
    """A BTREE on ``Person.age`` of ``branch``'s own image, made with Lance directly; its version."""
    store = open_store(uri)
    entry = Manifest(store).snapshot(branch).table("node:Person")
    dataset = open_dataset(store, entry.table_path, entry.table_branch)
    dataset.create_scalar_index("age", "BTREE")
    return int(dataset.version)


def test_index_only_commits_on_several_branches_are_adopted_before_the_plan(tmp_path: Path) -> None:
    uri = compact_copy("local", tmp_path, _SOURCES)
    heads = {branch: _index_age_out_of_band(uri, branch) for branch in INDEXED}
    before = {branch: len(commit_history(Manifest(open_store(uri)), branch)) for branch in INDEXED}

    result = migrate("run", uri, "--owner", "ci", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stamp"] == "5"

    manifest = Manifest(open_store(uri))
    for branch in INDEXED:
        history = commit_history(manifest, branch)
        adoptions = [c for c in history if c.message.startswith("adopted") and "node:Person" in c.message]
        assert len(adoptions) == 1, [c.message for c in history]
        assert f"v{heads[branch]}" in adoptions[0].message
        assert len(history) > before[branch]
        assert manifest.snapshot(branch).table("node:Person").table_version >= heads[branch]
    check = invoke(OMNIGRAPH, "check", "--json", uri)
    assert check.returncode == 0 and json.loads(check.stdout)["ok"], check.describe()
