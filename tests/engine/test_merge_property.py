"""Property test of ``branch merge`` (hypothesis, local backend, in-process, bounded examples):
random ``.gq`` mutations on two branches (keyed Person insert = upsert, update, delete with its
edges, Knows edge insert with an explicit id), then a merge, compared with a pure-Python model of
REFERENCE.md's three-way rules and of the merged-result check (edge endpoints); up to two rounds,
so the second merge starts from the first one's commit."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from omnigraph.engine.errors import BadRequest, KeyConflict, MergeConflict
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.merge import merge_branch
from omnigraph.engine.ops.mutate import mutate
from tests.support.merge_helpers import edges, new_graph, people

NAMES = ["ann", "bob", "cid", "dee"]
EDGE_IDS = ["e1", "e2", "e3"]
ABSENT = "absent"
QUERIES = """
query put($name: String, $age: I32) { insert Person { name: $name, age: $age } }
query bump($name: String, $age: I32) { update Person set { age: $age } where name = $name }
query remove($name: String) { delete Person where name = $name }
query link($id: String, $a: String, $b: String) { insert Knows { id: $id, from: $a, to: $b } }
"""
Op = tuple[str, str, int, str, str]
ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "bump", "remove", "link"]),
        st.sampled_from(NAMES),
        st.integers(0, 2),
        st.sampled_from(EDGE_IDS),
        st.sampled_from(NAMES),
    ),
    min_size=1,
    max_size=4,
)


@dataclass
class Model:
    """One branch: Person name -> age, Knows id -> (src, dst)."""

    people: dict[str, Any] = field(default_factory=dict)
    edges: dict[str, Any] = field(default_factory=dict)

    def copy(self) -> Model:
        return Model(dict(self.people), dict(self.edges))


def _three_way(table_key: str, base: dict, source: dict, target: dict) -> tuple[dict, list[dict[str, str]]]:
    merged, conflicts = dict(target), []
    for key in sorted(base.keys() | source.keys()):
        was, theirs, ours = base.get(key, ABSENT), source.get(key, ABSENT), target.get(key, ABSENT)
        if theirs == was or ours == theirs:
            continue
        if ours == was:
            if theirs == ABSENT:
                merged.pop(key, None)
            else:
                merged[key] = theirs
            continue
        kind = "divergent_insert" if was == ABSENT else ("delete_vs_update" if ABSENT in (theirs, ours) else "divergent_update")
        conflicts.append({"table_key": table_key, "id": key, "kind": kind})
    return merged, conflicts


def _model_merge(base: Model, source: Model, target: Model) -> tuple[Model, list[dict[str, str]], set[tuple[str, str]]]:
    """(merged model, three-way conflicts, dangling (edge id, column) of the merged result)."""
    edges_merged, edge_conflicts = _three_way("edge:Knows", base.edges, source.edges, target.edges)
    people_merged, people_conflicts = _three_way("node:Person", base.people, source.people, target.people)
    dangling = {
        (edge_id, column)
        for edge_id, ends in edges_merged.items()
        for column, end in zip(("src", "dst"), ends, strict=True)
        if end not in people_merged
    }
    return Model(people_merged, edges_merged), edge_conflicts + people_conflicts, dangling


def _apply(graph, branch: str, model: Model, operations: list[Op]) -> int:
    """Run ``operations`` as mutations on the branch and on its model; returns the commits made."""
    commits = 0
    for op, name, age, edge_id, other in operations:
        params: dict[str, object] = {
            "put": {"name": name, "age": age},
            "bump": {"name": name, "age": age},
            "remove": {"name": name},
            "link": {"id": edge_id, "a": name, "b": other},
        }[op]
        try:
            result = mutate(graph, QUERIES, name=op, params=params, branch=branch, actor="property")
        except KeyConflict:
            assert op == "link" and edge_id in model.edges
            continue
        except BadRequest as error:  # a missing endpoint: nothing written
            assert op == "link" and (name not in model.people or other not in model.people), error.message
            continue
        assert not (op == "link" and (edge_id in model.edges or name not in model.people or other not in model.people))
        if op == "put" or (op == "bump" and name in model.people):
            model.people[name] = age
        elif op == "remove" and name in model.people:
            del model.people[name]
            model.edges = {k: v for k, v in model.edges.items() if name not in v}
        elif op == "link":
            model.edges[edge_id] = (name, other)
        commits += result.commit is not None
    return commits


def _observed(uri: str, branch: str) -> Model:
    return Model(people(uri, branch), edges(uri, branch))


@settings(max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=st.dictionaries(st.sampled_from(NAMES), st.integers(0, 2), max_size=4),
    rounds=st.lists(st.tuples(ops, ops), min_size=1, max_size=2),
)
def test_merge_matches_the_three_way_model(initial: dict[str, int], rounds: list[tuple[list[Op], list[Op]]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        uri = str(Path(directory) / "graph")
        graph = new_graph(uri, initial)  # type: ignore[arg-type]
        create_branch(graph, "feature")
        main, feature = Model(dict(initial)), Model(dict(initial))
        base = main.copy()
        first_round = True
        for source_ops, target_ops in rounds:
            source_commits = _apply(graph, "feature", feature, source_ops)
            target_commits = _apply(graph, "main", main, target_ops)
            assert _observed(uri, "feature") == feature and _observed(uri, "main") == main
            expected, conflicts, dangling = _model_merge(base, feature, main)
            try:
                result = merge_branch(graph, "feature", "main", actor="property")
            except MergeConflict as error:
                listed = error.details["conflicts"]
                event("merge_conflict: " + ("three-way" if conflicts else "missing_endpoint"))
                # one answer: the row conflicts, then every endpoint the merged result would miss
                rows = [c for c in listed if c["kind"] != "missing_endpoint"]
                assert rows == sorted(conflicts, key=lambda c: (c["table_key"], c["id"]))
                endpoints = [p for p in listed if p["kind"] == "missing_endpoint"]
                assert {(p["id"], p["column"]) for p in endpoints} == dangling
                assert listed == rows + endpoints and all(p["fix"] for p in endpoints)
                assert _observed(uri, "main") == main
                return
            assert conflicts == [] and dangling == set()
            event(f"merge outcome: {result.outcome}")
            assert _observed(uri, "main") == expected
            if source_commits == 0:
                assert result.outcome == "up_to_date"
            elif target_commits > 0:
                assert result.outcome == "merged"
            elif first_round:  # the base is main's head: recorded as a fast-forward, rows changed or not
                assert result.outcome == "fast_forward"
            else:
                assert result.outcome in ({"merged", "fast_forward", "up_to_date"} if expected == main else {"merged", "fast_forward"})
            first_round = False
            main, base = expected, feature.copy()
