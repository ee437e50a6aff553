"""Conditional mutation (``if_commit``): one winner among racing writers, a lost publish refused.

The Python API refuses a stale head with nothing written (also for a query that would write
nothing); real ``omnigraph mutate --if-commit`` processes racing on one head leave exactly one
winner; a conditional mutation whose publish loses to another head (one published without the
branch's lease) is refused with its effects rolled back instead of being rebased onto that head. The CLI refusal of
``--if-commit`` with ``--chunk-rows`` is in ``test_mutate.py``, the HTTP field in
``tests/server/test_serve_http.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pytest

import omnigraph
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.failpoints import run_held
from omnigraph.engine.graph import init_graph, open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import OMNIGRAPH, commit_ids, export_text, load_lines, storage_state
from tests.support.process_race import race

SCHEMA = """
node Person { name: String @key  age: I32? }
node Tag { label: String }
"""
RACERS = 3


def _insert_person(name: str) -> str:
    return f'query add() {{ insert Person {{ name: "{name}", age: 1 }} }}'


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_stale_head_is_refused_through_the_python_api(root_uri: str) -> None:
    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE)
    graph = omnigraph.open(root_uri, actor="tests")
    head = commit_ids(root_uri)[0]
    first = graph.mutate(_insert_person("ann"), if_commit=head)
    assert first.commit is not None and commit_ids(root_uri)[0] == first.commit
    before = storage_state(root_uri)
    for source in (_insert_person("bo"), 'query nothing() { delete Person where name = "nobody" }'):
        with pytest.raises(omnigraph.PreconditionFailed) as refused:
            graph.mutate(source, if_commit=head)
        assert refused.value.details == {"expected": head, "actual": first.commit}
        assert "read the branch again" in refused.value.message
    assert storage_state(root_uri) == before
    assert graph.mutate(_insert_person("bo"), if_commit=first.commit).commit is not None


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_conditional_mutations_racing_on_one_head_have_exactly_one_winner(root_uri: str, tmp_path: Path) -> None:
    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE)
    head = commit_ids(root_uri)[0]
    argv = []
    for index in range(RACERS):
        query = tmp_path / f"racer{index}.gq"
        query.write_text(_insert_person(f"racer{index}"))
        argv.append(["mutate", "--query", str(query), "--if-commit", head, "--json", root_uri])
    outcomes = race("omnigraph", argv)
    winners = [o for o in outcomes if o.returncode == 0]
    assert len(winners) == 1, [o.stderr for o in outcomes]
    won = winners[0].json()["commit"]
    for loser in (o for o in outcomes if o.returncode != 0):
        assert loser.returncode == 1, loser.stderr
        error = loser.json()["error"]
        assert (error["code"], error["details"]) == ("precondition_failed", {"expected": head, "actual": won}), loser.stderr
    assert commit_ids(root_uri)[:2] == [won, head]
    people = [json.loads(line)["data"]["name"] for line in export_text(root_uri, types=["Person"]).splitlines()]
    assert len(people) == 1 and outcomes[int(people[0].removeprefix("racer"))].returncode == 0


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_lost_publish_is_not_rebased_onto_another_head(root_uri: str, tmp_path: Path) -> None:
    """Held after its table effect (holding the branch's lease), a conditional mutation loses its
    publish to a commit that needs no lease: a read-write open adopting an index built by hand on
    another table. It must not be rebased onto that head but rolled back and refused."""
    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE)
    load_lines(root_uri, [json.dumps({"type": "Tag", "data": {"label": "seed"}})])
    head = commit_ids(root_uri)[0]
    query = tmp_path / "held.gq"
    query.write_text(_insert_person("held"))

    def adopt_an_index_by_hand() -> str:
        store = open_store(root_uri)
        entry = Manifest(store).snapshot("main").table("node:Tag")
        lance.dataset(store.dataset_uri(entry.table_path)).create_scalar_index("id", "BTREE")
        assert open_graph(store, FENCED_PROFILE, write=True).adopted  # the read-write open publishes the adoption: a new head
        return commit_ids(root_uri)[0]

    held, adopted = run_held(
        [str(OMNIGRAPH), "mutate", "--query", str(query), "--if-commit", head, "--json", root_uri],
        "write.after_effect",
        adopt_an_index_by_hand,
    )
    assert held.returncode == 1, held.stderr
    error = json.loads(held.stdout)["error"]
    assert (error["code"], error["details"]) == ("precondition_failed", {"expected": head, "actual": adopted}), held.stderr
    assert commit_ids(root_uri)[:2] == [adopted, head]
    assert export_text(root_uri, types=["Person"]) == ""
    assert omnigraph.check(root_uri).ok
