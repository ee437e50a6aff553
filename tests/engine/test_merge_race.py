"""A merge's new rows land through the fenced strict path: real processes released together, one
``branch merge`` bringing id ``x`` into main and three ``load --mode append`` of ``x`` (another
value) into main. Exactly one of them wins, ``x`` exists once, with the winner's value; a merge
that loses reports the id as a ``divergent_insert`` conflict, a load that loses ``key_conflict``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnigraph.engine.errors import MergeConflict
from omnigraph.engine.ops import write as write_protocol
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.merge import merge_branch
from omnigraph.engine.reconcile.recovery import list_intents
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import omnigraph
from tests.support.merge_helpers import new_graph, people, upsert
from tests.support.process_race import race

LOADERS = 3


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # the fence itself on S3: the test below
def test_a_merge_insert_racing_strict_inserts_of_the_same_id_has_one_winner(root_uri: str, tmp_path: Path) -> None:
    graph = new_graph(root_uri, {"a": 1})
    create_branch(graph, "feature")
    upsert(graph, "feature", {"x": 1})
    data = tmp_path / "x.jsonl"
    data.write_text(json.dumps({"type": "Person", "data": {"name": "x", "age": 2}}) + "\n")
    load = ["load", "--mode", "append", "--data", str(data), "--json", root_uri]

    merge, *loads = race("omnigraph", [["branch", "merge", "feature", "--json", root_uri]] + [load] * LOADERS)

    winners = [o for o in [merge, *loads] if o.returncode == 0]
    assert len(winners) == 1, [(o.returncode, o.stdout, o.stderr) for o in [merge, *loads]]
    final = people(root_uri, "main")
    if merge.returncode == 0:
        assert merge.json()["outcome"] == "fast_forward"
        assert final == {"a": 1, "x": 1}
    else:
        assert merge.json()["error"]["details"]["conflicts"] == [{"table_key": "node:Person", "id": "x", "kind": "divergent_insert"}], (
            merge.stderr
        )
        assert final == {"a": 1, "x": 2}
    for loser in (o for o in loads if o.returncode != 0):
        assert loser.json()["error"]["code"] == "key_conflict", loser.stderr


def test_a_same_id_insert_committed_before_the_merge_takes_its_lease_is_a_conflict(
    root_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic: another process commits ``x`` after the merge was prepared and before it
    takes the branch's lease; under the lease the merge sees the branch moved, is prepared again
    and reports ``x`` as a conflict, writing nothing."""
    graph = new_graph(root_uri, {"a": 1})
    create_branch(graph, "feature")
    upsert(graph, "feature", {"x": 1})
    data = tmp_path / "x.jsonl"
    data.write_text(json.dumps({"type": "Person", "data": {"name": "x", "age": 2}}) + "\n")
    real_lease = write_protocol._branch_lease
    calls: list[int] = []

    def lease_after_a_concurrent_writer(graph_, branch, held):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 1:
            omnigraph("load", "--mode", "append", "--data", data, root_uri).ok()
        return real_lease(graph_, branch, held)

    monkeypatch.setattr(write_protocol, "_branch_lease", lease_after_a_concurrent_writer)
    with pytest.raises(MergeConflict) as refused:
        merge_branch(graph, "feature", "main", actor="test")
    assert refused.value.details["conflicts"] == [{"table_key": "node:Person", "id": "x", "kind": "divergent_insert"}]
    assert calls == [1]  # prepared again under the lease, the merge had nothing to write
    assert people(root_uri, "main") == {"a": 1, "x": 2}
    assert list_intents(open_store(root_uri)) == []
