"""Real concurrent processes strict-inserting through the CLI (format 5 fenced, format 4 not)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.graph import init_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.reconcile.branch_lease import LEASE_SECONDS_ENV
from omnigraph.engine.storage.lance_io import open_dataset
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import OMNIGRAPH, OMNIGRAPH_V4
from tests.support.process_race import interleave_held, race

SCHEMA = """
node Person { name: String @key  age: I32? }
node Tag { label: String }
"""
WRITERS = 8
ROUNDS = 3  # each round is a fresh same-id race of WRITERS processes


def _person_file(tmp_path: Path, name: str, tag: str) -> str:
    path = tmp_path / f"{tag}.jsonl"
    path.write_text(json.dumps({"type": "Person", "data": {"name": name, "age": 1}}) + "\n")
    return str(path)


def _load_argv(program: Path, uri: str, data: str) -> list[str]:
    return [str(program), "load", "--mode", "append", "--data", data, "--json", uri]


def _ids_on(uri: str, branch: str, table_key: str) -> list[str]:
    store = open_store(uri)
    entry = Manifest(store).snapshot(branch).table(table_key)
    table = open_dataset(store, entry.table_path, entry.table_branch, entry.table_version).to_table(columns=["id"])
    return sorted(table.column("id").to_pylist())


def test_same_id_strict_insert_race_has_exactly_one_winner(backend: str, root_uri: str, tmp_path: Path) -> None:
    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE)
    rounds = ROUNDS if backend == "local" else 1  # on S3 one race: the store's conditional commit
    for round_number in range(rounds):
        name = f"racer-{round_number}"
        files = [_person_file(tmp_path, name, f"r{round_number}-{i}") for i in range(WRITERS)]
        outcomes = race("omnigraph", [["load", "--mode", "append", "--data", f, "--json", root_uri] for f in files])
        winners = [o for o in outcomes if o.returncode == 0]
        losers = [o for o in outcomes if o.returncode != 0]
        assert len(winners) == 1, [o.stderr for o in outcomes]
        assert len(losers) == WRITERS - 1
        for loser in losers:
            assert loser.returncode == 1, loser.stderr
            error = loser.json()["error"]
            assert error["code"] == "key_conflict", loser.stderr
            assert error["details"] == {"entity_kind": "node", "type_name": "Person", "entity_id": name}
        assert _ids_on(root_uri, "main", "node:Person").count(name) == 1
    assert len(_ids_on(root_uri, "main", "node:Person")) == rounds


# local only: the S3 commit race is test_same_id_strict_insert_race_has_exactly_one_winner[s3]
@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_disjoint_ids_from_concurrent_writers_all_land(root_uri: str, tmp_path: Path) -> None:
    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE)
    files = [_person_file(tmp_path, f"person-{i}", f"d{i}") for i in range(WRITERS)]
    outcomes = race("omnigraph", [["load", "--mode", "append", "--data", f, "--json", root_uri] for f in files])
    assert [o.returncode for o in outcomes] == [0] * WRITERS, [o.stderr for o in outcomes]
    assert _ids_on(root_uri, "main", "node:Person") == sorted(f"person-{i}" for i in range(WRITERS))
    commits = {o.json()["commits"][0] for o in outcomes}
    assert len(commits) == WRITERS


# local only: the S3 commit race is test_same_id_strict_insert_race_has_exactly_one_winner[s3]
@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_same_id_race_on_a_lazy_branch_has_one_winner(root_uri: str, tmp_path: Path) -> None:
    graph = init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE)
    from omnigraph.engine.ops.branches import create_branch

    create_branch(graph, "feat")
    files = [_person_file(tmp_path, "lazy-racer", f"l{i}") for i in range(WRITERS)]
    outcomes = race("omnigraph", [["load", "--mode", "append", "--branch", "feat", "--data", f, "--json", root_uri] for f in files])
    assert sorted(o.returncode for o in outcomes) == [0] + [1] * (WRITERS - 1), [o.stderr for o in outcomes]
    assert _ids_on(root_uri, "feat", "node:Person") == ["lazy-racer"]
    assert _ids_on(root_uri, "main", "node:Person") == []


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_format_4_writers_that_pass_the_check_together_both_land(root_uri: str, tmp_path: Path) -> None:
    """The bug the migration exists to fix: v4's check-then-append lets both writers land."""
    init_graph(open_store(root_uri), SCHEMA, LEGACY_PROFILE)
    held, other = interleave_held(_load_argv(OMNIGRAPH_V4, root_uri, _person_file(tmp_path, "twin", "twin")), "write.after_arm")
    assert (held.returncode, other.returncode) == (0, 0), (held.stderr, other.stderr)
    assert _ids_on(root_uri, "main", "node:Person") == ["twin", "twin"]


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_the_same_interleaving_at_format_5_has_one_winner(root_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interleaving above, against the fenced engine: the held writer holds the branch's lease,
    so the other waits for it; held past the lease's expiry it is taken over, the other wins, and
    the held one, resumed, is refused with nothing written."""
    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE)
    monkeypatch.setenv(LEASE_SECONDS_ENV, "1")
    held, other = interleave_held(_load_argv(OMNIGRAPH, root_uri, _person_file(tmp_path, "twin", "twin")), "write.after_arm")
    assert other.returncode == 0, other.stderr
    assert held.returncode == 1 and held.json()["error"]["code"] == "read_set_conflict", held.stderr
    assert _ids_on(root_uri, "main", "node:Person") == ["twin"]
