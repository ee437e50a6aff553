"""``omnigraph.migrate`` refuses as ``omnigraph-migrate`` does, with the same errors and exit codes:
on a format-4 graph holding a duplicate id, ``preflight --validate`` and ``run`` raise
``ValidationFailed`` (exit 4) with the inventory; the run keeps the barrier and the claim, whose
token ``status`` shows; ``abort`` with it puts stamp 4 back; and ``resume`` with a wrong token is
refused. Local only (the migrator's own suites cover S3)."""

from __future__ import annotations

from pathlib import Path

import pytest

import omnigraph
from tests.support.migration_fixtures import build_duplicate


def test_a_duplicate_stops_the_migration_and_abort_lowers_the_barrier(tmp_path: Path) -> None:
    uri = str(tmp_path / "graph")
    twin = build_duplicate(uri, tmp_path, compact=False)
    with pytest.raises(omnigraph.ValidationFailed) as scanned:
        omnigraph.migrate.preflight(uri, validate=True)
    assert scanned.value.exit_code == 4 and {e["entity_id"] for e in scanned.value.details["inventory"]} == {twin}

    with pytest.raises(omnigraph.ValidationFailed) as stopped:
        omnigraph.migrate.run(uri, owner="ci")
    assert stopped.value.exit_code == 4
    status = omnigraph.migrate.status(uri)
    assert status.stamp == "migrating" and status.claim is not None and status.claim["owner"] == "ci"
    token = status.claim["token"]
    assert token in status.next

    with pytest.raises(omnigraph.errors.OmnigraphError) as wrong:
        omnigraph.migrate.resume(uri, token="0" * 32)
    assert wrong.value.code == "precondition_failed" and wrong.value.exit_code == 1

    aborted = omnigraph.migrate.abort(uri, token=token)
    assert aborted.stamp == "4" and aborted.migration_id == status.migration_id
    assert omnigraph.migrate.status(uri).claim is None
    with omnigraph.open(uri, read_only=True) as graph:
        assert graph.format == "4"
