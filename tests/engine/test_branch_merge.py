"""``omnigraph branch merge``: REFERENCE.md's truth table, fast-forward, up to date, the full
conflict list with nothing written, merges into lazy branches, endpoint and ``@unique`` refusals,
and ``commit list`` showing both parents of a merge commit. Both backends."""

from __future__ import annotations

import pytest

from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import OMNIGRAPH, invoke, person, run_cli, storage_state
from tests.support.merge_helpers import add_edges, delete, edges, new_graph, people, upsert


def _merge(uri: str, source: str, into: str = "main") -> dict:
    result = invoke(OMNIGRAPH, "branch", "merge", source, "--into", into, "--json", uri)
    document = result.json()
    assert result.returncode == (0 if "error" not in document else 1), result.describe()
    return document


def _head(uri: str, branch: str) -> str:
    return Manifest(open_store(uri)).snapshot(branch).head.commit_id


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_every_truth_table_row_in_one_merge(root_uri: str) -> None:
    base = {"keep": 1, "src_upd": 2, "tgt_upd": 3, "same": 4, "src_del": 5, "tgt_del": 6, "both_del": 7}
    graph = new_graph(root_uri, base)
    create_branch(graph, "feature")
    # source: update, same change as target, delete, insert, both-delete
    upsert(graph, "feature", {"src_upd": 20, "same": 40, "new_src": 9})
    delete(graph, "feature", "node:Person", ["src_del", "both_del"])
    # target: update, same change, delete, insert
    upsert(graph, "main", {"tgt_upd": 30, "same": 40, "new_tgt": 10})
    delete(graph, "main", "node:Person", ["tgt_del", "both_del"])
    target_head, source_head = _head(root_uri, "main"), _head(root_uri, "feature")

    document = _merge(root_uri, "feature")

    assert document["outcome"] == "merged"
    assert document["parents"] == [target_head, source_head]
    assert document["changes"] == {"node:Person": {"inserted": 1, "updated": 1, "deleted": 1}}
    assert people(root_uri, "main") == {
        "keep": 1,
        "src_upd": 20,
        "tgt_upd": 30,
        "same": 40,
        "new_src": 9,
        "new_tgt": 10,
    }
    assert _head(root_uri, "main") == document["commit"]
    assert people(root_uri, "feature") == {
        "keep": 1,
        "src_upd": 20,
        "tgt_upd": 3,
        "same": 40,
        "tgt_del": 6,
        "new_src": 9,
    }
    # commit list: both parents, in JSON and in the human rendering; history includes both lines
    listed = invoke(OMNIGRAPH, "commit", "list", "--json", root_uri).ok().json()["commits"]
    assert listed[0]["commit_id"] == document["commit"]
    assert listed[0]["parents"] == [target_head, source_head]
    assert {target_head, source_head} <= {c["commit_id"] for c in listed}
    human = invoke(OMNIGRAPH, "commit", "list", root_uri).ok().stdout.splitlines()
    assert human[0].startswith(document["commit"])
    assert human[0].endswith(f"merge feature into main  (parents {target_head} {source_head})")


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_fast_forward_then_up_to_date(root_uri: str) -> None:
    graph = new_graph(root_uri, {"a": 1, "b": 2})
    create_branch(graph, "feature")
    upsert(graph, "feature", {"a": 10, "c": 3})
    delete(graph, "feature", "node:Person", ["b"])
    source_head, target_head = _head(root_uri, "feature"), _head(root_uri, "main")

    document = _merge(root_uri, "feature")

    assert document["outcome"] == "fast_forward"
    assert document["base"] == target_head
    assert document["parents"] == [target_head, source_head]
    assert people(root_uri, "main") == people(root_uri, "feature") == {"a": 10, "c": 3}
    human = invoke(OMNIGRAPH, "branch", "merge", "feature", root_uri).ok()
    assert human.stdout.strip() == "main is already up to date with feature"
    before = storage_state(root_uri)
    again = _merge(root_uri, "feature")
    assert again["outcome"] == "up_to_date" and again["commit"] is None
    assert storage_state(root_uri) == before
    # the other way: feature's head is main's merge base, and no row differs: a fast-forward commit
    # that moves no table records main's lineage on feature; after it, feature is up to date
    tables_before = Manifest(open_store(root_uri)).snapshot("feature").tables
    back = _merge(root_uri, "main", "feature")
    assert back["outcome"] == "fast_forward" and back["commit"] is not None
    assert Manifest(open_store(root_uri)).snapshot("feature").tables == tables_before
    assert _merge(root_uri, "main", "feature")["outcome"] == "up_to_date"
    # a branch with no commits of its own is up to date with its parent
    create_branch(graph, "empty")
    assert _merge(root_uri, "empty")["outcome"] == "up_to_date"
    # after the fast-forward, main's history continues feature's
    history = [c["commit_id"] for c in invoke(OMNIGRAPH, "commit", "list", "--json", root_uri).ok().json()["commits"]]
    assert history[0] == document["commit"] and source_head in history
    assert target_head in history
    # deleting the merged branch keeps main's own history reachable
    invoke(OMNIGRAPH, "branch", "delete", "empty", root_uri).ok()
    invoke(OMNIGRAPH, "branch", "delete", "feature", root_uri).ok()
    after_delete = [c["commit_id"] for c in invoke(OMNIGRAPH, "commit", "list", "--json", root_uri).ok().json()["commits"]]
    assert after_delete[0] == document["commit"] and target_head in after_delete
    first = invoke(OMNIGRAPH, "commit", "list", "--json", root_uri).json()["commits"][0]
    assert first["message"] == "merge feature into main (fast-forward)"
    assert invoke(OMNIGRAPH, "commit", "list", "--json", root_uri).json()["commits"][-1]["message"] == "init"


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_every_conflict_is_listed_and_nothing_is_written(root_uri: str) -> None:
    graph = new_graph(root_uri, {"upd": 1, "del_src": 2, "del_tgt": 3, "fine": 4})
    create_branch(graph, "feature")
    upsert(graph, "feature", {"upd": 10, "ins": 5, "del_tgt": 30, "fine": 40})
    delete(graph, "feature", "node:Person", ["del_src"])
    upsert(graph, "main", {"upd": 11, "ins": 6, "del_src": 20})
    delete(graph, "main", "node:Person", ["del_tgt"])
    before = storage_state(root_uri)

    result = invoke(OMNIGRAPH, "branch", "merge", "feature", "--json", root_uri)

    assert result.returncode == 1, result.describe()
    error = result.json()["error"]
    assert error["code"] == "merge_conflict"
    assert error["details"]["conflicts"] == [
        {"table_key": "node:Person", "id": "del_src", "kind": "delete_vs_update"},
        {"table_key": "node:Person", "id": "del_tgt", "kind": "delete_vs_update"},
        {"table_key": "node:Person", "id": "ins", "kind": "divergent_insert"},
        {"table_key": "node:Person", "id": "upd", "kind": "divergent_update"},
    ]
    text = invoke(OMNIGRAPH, "branch", "merge", "feature", root_uri)
    assert text.returncode == 1 and "error [merge_conflict]" in text.stderr, text.describe()
    listed = [line.split()[:3] for line in text.stderr.splitlines() if line.startswith("  node:Person ")]
    assert listed == [["node:Person", "del_src", "(delete_vs_update)"], ["node:Person", "del_tgt", "(delete_vs_update)"],
                      ["node:Person", "ins", "(divergent_insert)"], ["node:Person", "upd", "(divergent_update)"]]  # fmt: skip
    assert storage_state(root_uri) == before
    # resolving: make the rows equal on both sides (main takes feature's values), merge again
    upsert(graph, "main", {"upd": 10, "ins": 5})
    delete(graph, "main", "node:Person", ["del_src"])
    upsert(graph, "main", {"del_tgt": 30})
    document = _merge(root_uri, "feature")
    assert document["outcome"] == "merged"
    assert people(root_uri, "main") == {"upd": 10, "ins": 5, "del_tgt": 30, "fine": 40}


def test_merge_into_a_lazy_branch_forks_its_tables(root_uri: str) -> None:
    graph = new_graph(root_uri, {"a": 1})
    create_branch(graph, "lazy")
    create_branch(graph, "feature")
    upsert(graph, "feature", {"b": 2})
    add_edges(graph, "feature", {"k1": ("a", "b")})
    upsert(graph, "main", {"z": 26})  # main moves on; lazy still pins main's older images
    main_before = storage_state(root_uri)["branches"]["main"]
    lazy = Manifest(open_store(root_uri)).snapshot("lazy")
    assert {entry.table_branch for entry in lazy.tables.values()} == {None}

    document = _merge(root_uri, "feature", "lazy")

    assert document["outcome"] == "fast_forward"
    assert people(root_uri, "lazy") == {"a": 1, "b": 2}
    assert edges(root_uri, "lazy") == {"k1": ("a", "b")}
    forked = Manifest(open_store(root_uri)).snapshot("lazy")
    assert {entry.table_branch for entry in forked.tables.values()} == {"lazy"}
    assert storage_state(root_uri)["branches"]["main"] == main_before
    # a true merge whose target still inherits the table the source changed
    create_branch(graph, "target")
    create_branch(graph, "source")
    upsert(graph, "target", {"t": 20})  # forks only node:Person on target
    add_edges(graph, "source", {"k2": ("a", "z")})
    assert Manifest(open_store(root_uri)).snapshot("target").table("edge:Knows").table_branch is None
    assert _merge(root_uri, "source", "target")["outcome"] == "merged"
    assert edges(root_uri, "target") == {"k2": ("a", "z")}
    assert Manifest(open_store(root_uri)).snapshot("target").table("edge:Knows").table_branch == "target"
    assert edges(root_uri, "main") == {}


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_edits_that_net_to_zero_merge_as_a_fast_forward_commit(root_uri: str) -> None:
    """An edge added then deleted on the branch: the base is main's head, so a fast-forward commit
    that moves no table records the branch's lineage (real ``omnigraph branch merge`` processes)."""
    graph = new_graph(root_uri, {"a": 1, "b": 2})
    create_branch(graph, "feature")
    add_edges(graph, "feature", {"k1": ("a", "b")})
    delete(graph, "feature", "edge:Knows", ["k1"])
    source_head, target_head = _head(root_uri, "feature"), _head(root_uri, "main")
    tables_before = Manifest(open_store(root_uri)).snapshot("main").tables
    merged = run_cli(OMNIGRAPH, "branch", "merge", "feature", "--json", root_uri).ok().json()
    assert merged["outcome"] == "fast_forward" and merged["parents"] == [target_head, source_head]
    assert merged["changes"] == {}  # no row differs
    assert Manifest(open_store(root_uri)).snapshot("main").tables == tables_before
    assert _head(root_uri, "main") == merged["commit"]
    assert run_cli(OMNIGRAPH, "branch", "merge", "feature", "--json", root_uri).ok().json()["outcome"] == "up_to_date"


def _without_fix(problems: list[dict]) -> list[dict]:
    return [{key: value for key, value in problem.items() if key != "fix"} for problem in problems]


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_missing_endpoints_and_unique_values_are_refused(root_uri: str) -> None:
    graph = new_graph(root_uri, {"a": 1, "b": 2, "c": 3})
    add_edges(graph, "main", {"kc": ("a", "c")})
    create_branch(graph, "feature")
    add_edges(graph, "feature", {"k1": ("a", "b")})  # the source adds an edge to b ...
    upsert(graph, "feature", {"e1": 5}, {"e1": "x@example.com"})
    delete(graph, "main", "node:Person", ["b"])  # ... which the target deletes
    upsert(graph, "main", {"e2": 6}, {"e2": "x@example.com"})  # same @unique value, another id
    before = storage_state(root_uri)

    result = invoke(OMNIGRAPH, "branch", "merge", "feature", "--json", root_uri)

    assert result.returncode == 1, result.describe()
    error = result.json()["error"]
    assert error["code"] == "merge_conflict"
    assert _without_fix(error["details"]["conflicts"]) == [
        {"table_key": "edge:Knows", "id": "k1", "kind": "missing_endpoint", "column": "dst", "node_type": "Person", "node_id": "b"},
        {
            "table_key": "node:Person",
            "id": "e1",
            "kind": "unique_violation",
            "property": "email",
            "value": "x@example.com",
            "existing_id": "e2",
        },
    ]
    fixes = [p["fix"] for p in error["details"]["conflicts"]]
    assert fixes[0].startswith("feature brings edge k1 whose dst is Person 'b', which main does not have")
    assert "insert that node on main" in fixes[0] and "delete the edge on feature" in fixes[0]
    assert "would both have email 'x@example.com'" in fixes[1]
    assert storage_state(root_uri) == before


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_source_delete_of_a_node_the_target_links_to_is_refused(root_uri: str) -> None:
    graph = new_graph(root_uri, {"a": 1, "b": 2})
    create_branch(graph, "feature")
    delete(graph, "feature", "node:Person", ["b"])
    add_edges(graph, "main", {"k1": ("a", "b")})
    before = storage_state(root_uri)
    result = invoke(OMNIGRAPH, "branch", "merge", "feature", "--json", root_uri)
    [problem] = result.json()["error"]["details"]["conflicts"]
    assert _without_fix([problem]) == [
        {"table_key": "edge:Knows", "id": "k1", "kind": "missing_endpoint", "column": "dst", "node_type": "Person", "node_id": "b"},
    ]
    assert problem["fix"] == (
        "edge k1 on main has dst Person 'b', which feature deletes: delete the edge on main, or undo the delete on feature"
    )
    assert storage_state(root_uri) == before


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_refusals_name_the_problem(root_uri: str) -> None:
    new_graph(root_uri, {"a": 1})
    same = invoke(OMNIGRAPH, "branch", "merge", "main", "--json", root_uri)
    assert same.returncode == 1 and same.json()["error"]["code"] == "bad_request"
    missing = invoke(OMNIGRAPH, "branch", "merge", "nope", "--json", root_uri)
    assert missing.returncode == 1 and missing.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_row_conflicts_and_endpoint_problems_come_in_one_answer_then_the_fixes_merge(root_uri: str, tmp_path) -> None:
    """A divergent update and an edge to a node the target deleted are listed by the same merge
    (real ``omnigraph branch merge`` processes); doing what each entry says makes the next merge pass."""
    graph = new_graph(root_uri, {"a": 1, "b": 2})
    create_branch(graph, "feature")
    upsert(graph, "feature", {"a": 10})
    add_edges(graph, "feature", {"k1": ("a", "b")})
    upsert(graph, "main", {"a": 20})
    delete(graph, "main", "node:Person", ["b"])
    before = storage_state(root_uri)

    refused = run_cli(OMNIGRAPH, "branch", "merge", "feature", "--json", root_uri)
    assert refused.returncode == 1, refused.describe()
    listed = refused.json()["error"]["details"]["conflicts"]
    assert [(p["kind"], p["id"]) for p in listed] == [("divergent_update", "a"), ("missing_endpoint", "k1")]
    assert "insert that node on main" in listed[1]["fix"]
    assert storage_state(root_uri) == before

    fixes = tmp_path / "fixes.jsonl"
    fixes.write_text(person("a", 10) + "\n" + person("b", 2) + "\n")  # a equal on both sides; b back on main
    run_cli(OMNIGRAPH, "load", "--mode", "merge", "--data", fixes, root_uri).ok()
    merged = run_cli(OMNIGRAPH, "branch", "merge", "feature", "--json", root_uri)
    assert merged.returncode == 0, merged.describe()
    assert edges(root_uri, "main") == {"k1": ("a", "b")} and people(root_uri, "main") == {"a": 10, "b": 2}


def test_a_long_conflict_list_in_text_is_sorted_and_capped_with_a_count() -> None:
    from omnigraph.cli.branch_merge import LISTED_ROWS, conflict_lines

    rows = [{"table_key": "node:Person", "id": f"p{n:03d}", "kind": "divergent_update"} for n in reversed(range(LISTED_ROWS + 5))]
    lines = conflict_lines(rows)
    assert [line.split()[1] for line in lines[:-1]] == [f"p{n:03d}" for n in range(LISTED_ROWS)]
    assert lines[-1] == "  ... and 5 more (`--json` lists every one)"
