"""Duplicate repair refusals: every row must be decided, new ids must be free; nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.storage.store import open_store
from omnigraph.migrator import repair
from tests.conftest import new_root
from tests.support.check_helpers import assert_check_clean
from tests.support.migration_cli import claim_token, migrate
from tests.support.migration_fixtures import build_duplicate, count_ids, exports


@pytest.fixture
def stopped(tmp_path: Path) -> tuple[str, str, str]:
    """A migration stopped by a duplicate (barrier up): (graph, token, duplicated id)."""
    uri = new_root("local", tmp_path)
    twin = build_duplicate(uri, tmp_path)
    assert migrate("run", uri, "--owner", "ci").returncode == 4
    return uri, claim_token(uri), twin


def _template(uri: str, token: str, tmp_path: Path) -> dict:
    path = tmp_path / "decisions.yaml"
    repair.write_decisions(path, repair.template(open_store(uri), token))
    return yaml.safe_load(path.read_text())


def _apply(uri: str, token: str, tmp_path: Path, document: dict) -> None:
    path = tmp_path / "filled.yaml"
    path.write_text(yaml.safe_dump(document))
    repair.apply(open_store(uri), token, repair.read_decisions(path), "ci")


def test_a_decisions_file_that_omits_a_row_is_refused(stopped: tuple[str, str, str], tmp_path: Path) -> None:
    uri, token, twin = stopped
    document = _template(uri, token, tmp_path)
    [entry] = document["decisions"]
    rows = [row["row_id"] for row in entry["rows"]]
    entry.update(action="keep", keep_row_id=rows[0], rows=entry["rows"][:-1])
    before = exports(uri)
    with pytest.raises(BadRequest, match="every row must be listed"):
        _apply(uri, token, tmp_path, document)
    assert exports(uri) == before and count_ids(uri, "dup", "node:Person", twin) == len(rows)


def _graph_with_a_duplicate_edge(tmp_path: Path) -> tuple[str, str]:
    """Compact fixture whose branch ``dup`` holds edge id ``w-dup`` twice (written by the v4 writer)."""
    import pyarrow as pa

    from omnigraph.engine.door.legacy import LEGACY_PROFILE
    from omnigraph.engine.graph import open_graph
    from omnigraph.engine.ops.branches import create_branch
    from omnigraph.engine.ops.write import CommitPlan, TableWrite, commit
    from tests.support.migration_fixtures import build_fixture

    uri = new_root("local", tmp_path)
    build_fixture(uri, compact=True)
    graph = open_graph(open_store(uri), LEGACY_PROFILE, write=True)
    create_branch(graph, "dup")
    schema = graph.catalog.table("edge:WorksAt").arrow_schema(with_pk=False)
    rows = [
        {"id": "w-alice", "src": "Alice", "dst": "Acme"},
        {"id": "w-dup", "src": "Bob", "dst": "Acme"},
        {"id": "w-dup", "src": "Alice", "dst": "Acme"},
    ]
    table = pa.Table.from_pylist(rows, schema=schema)
    writes = (TableWrite("edge:WorksAt", "overwrite", table),)
    commit(graph, "dup", lambda snapshot, _previous: CommitPlan(writes, (snapshot.head.commit_id,), "dup edge", None), actor="t")
    assert migrate("run", uri, "--owner", "ci").returncode == 4
    return uri, claim_token(uri)


def test_a_rename_must_use_a_free_id_and_then_repairs(tmp_path: Path) -> None:
    uri, token = _graph_with_a_duplicate_edge(tmp_path)
    document = _template(uri, token, tmp_path)
    [entry] = document["decisions"]
    assert (entry["entity_id"], entry["graph_branch"], len(entry["rows"])) == ("w-dup", "dup", 2)
    rows = [row["row_id"] for row in entry["rows"]]
    entry.update(action="rename", keep_row_id=rows[0], new_ids={rows[1]: "w-alice"})
    before = exports(uri)
    with pytest.raises(BadRequest, match="already used"):
        _apply(uri, token, tmp_path, document)
    assert exports(uri) == before
    entry["new_ids"] = {rows[1]: "w-renamed"}
    _apply(uri, token, tmp_path, document)
    edges = [json.loads(line)["data"]["id"] for line in exports(uri)["dup"] if '"edge"' in line]
    assert sorted(edges) == ["w-alice", "w-dup", "w-renamed"]
    assert migrate("resume", uri, "--token", token).returncode == 0
    assert_check_clean(uri)


def test_renaming_a_keyed_node_is_refused(stopped: tuple[str, str, str], tmp_path: Path) -> None:
    uri, token, _ = stopped
    document = _template(uri, token, tmp_path)
    [entry] = document["decisions"]
    rows = [row["row_id"] for row in entry["rows"]]
    entry.update(action="rename", keep_row_id=rows[0], new_ids={r: "generate" for r in rows[1:]})
    before = exports(uri)
    with pytest.raises(BadRequest, match="derived from its @key"):
        _apply(uri, token, tmp_path, document)
    assert exports(uri) == before
