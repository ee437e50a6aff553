"""Property test of ``branch merge`` (hypothesis, local backend, in-process, bounded examples):
random ``.gq`` mutations (keyed insert = upsert, update, delete) on two branches, then a merge,
compared with a pure-Python model of REFERENCE.md's three-way rules; up to two rounds, so the
second merge starts from the first one's commit."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from merge_helpers import new_graph, people

from engine.branches import create_branch
from engine.errors import MergeConflict
from engine.merge import merge_branch
from engine.mutate import mutate

NAMES = ["ann", "bob", "cid", "dee", "eve"]
Rows = dict[str, int | None]
Op = tuple[str, str, int]

QUERIES = """
query put($name: String, $age: I32) { insert Person { name: $name, age: $age } }
query bump($name: String, $age: I32) { update Person set { age: $age } where name = $name }
query remove($name: String) { delete Person where name = $name }
"""
ops = st.lists(st.tuples(st.sampled_from(["put", "bump", "remove"]), st.sampled_from(NAMES), st.integers(0, 2)), max_size=4)


def _model_merge(base: Rows, source: Rows, target: Rows) -> tuple[Rows, list[dict[str, str]]]:
    merged, conflicts = dict(target), []
    for name in sorted(base.keys() | source.keys()):
        was, theirs, ours = base.get(name, "absent"), source.get(name, "absent"), target.get(name, "absent")
        if theirs == was or ours == theirs:
            continue
        if ours == was:
            if theirs == "absent":
                merged.pop(name, None)
            else:
                merged[name] = theirs  # type: ignore[assignment]
            continue
        kind = "divergent_insert" if was == "absent" else (
            "delete_vs_update" if "absent" in (theirs, ours) else "divergent_update")
        conflicts.append({"table_key": "node:Person", "id": name, "kind": kind})
    return merged, conflicts


def _apply(graph, branch: str, model: Rows, operations: list[Op]) -> int:
    """Run ``operations`` as mutations on the branch and its model; returns the commits made."""
    commits = 0
    for op, name, age in operations:
        params: dict[str, object] = {"name": name} if op == "remove" else {"name": name, "age": age}
        result = mutate(graph, QUERIES, name=op, params=params, branch=branch, actor="property")
        if op == "put":
            model[name] = age
        elif op == "bump" and name in model:
            model[name] = age
        elif op == "remove":
            model.pop(name, None)
        commits += result.commit is not None
    return commits


@settings(max_examples=12, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=st.dictionaries(st.sampled_from(NAMES), st.integers(0, 2), max_size=4),
    rounds=st.lists(st.tuples(ops, ops), min_size=1, max_size=2),
)
def test_merge_matches_the_three_way_model(initial: Rows, rounds: list[tuple[list[Op], list[Op]]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        uri = str(Path(directory) / "graph")
        graph = new_graph(uri, initial)  # type: ignore[arg-type]
        create_branch(graph, "feature")
        main, feature = dict(initial), dict(initial)
        base = dict(initial)
        first_round = True
        for source_ops, target_ops in rounds:
            source_commits = _apply(graph, "feature", feature, source_ops)
            target_commits = _apply(graph, "main", main, target_ops)
            expected, conflicts = _model_merge(base, feature, main)
            try:
                result = merge_branch(graph, "feature", "main", actor="property")
            except MergeConflict as error:
                assert error.details["conflicts"] == conflicts
                assert people(uri, "main") == main
                return
            assert conflicts == []
            assert people(uri, "main") == expected
            if source_commits == 0:
                assert result.outcome == "up_to_date"
            elif target_commits > 0:
                assert result.outcome == "merged"
            elif first_round:
                assert result.outcome == ("fast_forward" if expected != main else "up_to_date")
            else:
                assert result.outcome in ({"merged", "fast_forward", "up_to_date"} if expected == main else {"merged", "fast_forward"})
            first_round = False
            main = expected
            base = dict(feature)
            assert people(uri, "feature") == feature
