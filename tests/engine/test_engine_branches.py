"""Lazy graph branches (DESIGN section 3): pinned inherited images, fork on first write, delete rules."""

from __future__ import annotations

import json

import pytest

from omnigraph.engine.errors import BadRequest, BranchExists, NotFound
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.ops.branches import create_branch, delete_branch
from omnigraph.engine.storage.lance_io import list_branches, open_dataset
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import (
    OMNIGRAPH,
    export_text,
    graph_for,
    init,
    invoke,
    invoke_all,
    knows,
    lance_branch_names,
    load_lines,
    make_example_graph,
    omnigraph,
    person,
    snapshot,
    storage_state,
)

EXAMPLE_PEOPLE = ["Alice", "Bob", "Carol", "Dave", "Eve", "Frank", "Grace", "Heidi"]


def _tables(document: dict) -> dict[str, dict]:
    return {table["table_key"]: table for table in document["tables"]}


def _people(uri: str, branch: str) -> list[str]:
    return [json.loads(line)["data"]["name"] for line in export_text(uri, branch, ["Person"]).splitlines()]


def _fork(uri: str, path: str, branch: str):
    return list_branches(open_dataset(open_store(uri), path)).get(branch)


def _pinned(uri: str, branch: str, table_key: str) -> tuple[str | None, int]:
    """(table_branch, version) that ``branch`` pins for ``table_key`` (manifest only)."""
    entry = Manifest(open_store(uri)).snapshot(branch).table(table_key)
    return entry.table_branch, entry.table_version


def _rw(uri: str):
    return graph_for(uri, write=True)


def test_branch_pins_its_fork_point_and_forks_a_table_on_first_write(root_uri: str) -> None:
    graph = make_example_graph(root_uri)
    export_at_fork = export_text(root_uri, "main")
    snapshot_at_fork = snapshot(root_uri, "main")
    old = _tables(snapshot_at_fork)
    create_branch(graph, "feat")

    # main moves on after the fork
    load_lines(root_uri, [person("Zed", age=1), '{"type": "Company", "data": {"name": "Umbrella"}}'])
    main_now = _tables(snapshot(root_uri, "main"))
    assert main_now["node:Person"]["version"] > old["node:Person"]["version"]

    # feat still reads exactly main's image at the fork point
    feat = snapshot(root_uri, "feat")
    assert feat["branch"] == "feat"
    assert feat["tables"] == snapshot_at_fork["tables"]
    assert all(table["table_branch"] is None for table in feat["tables"])
    assert export_text(root_uri, "feat") == export_at_fork

    # the first write on feat to node:Person forks that table from exactly the pinned version
    load_lines(root_uri, [person("Yan", age=7)], branch="feat")
    feat = _tables(snapshot(root_uri, "feat"))
    person_table = feat["node:Person"]
    assert person_table["table_branch"] == "feat"
    assert person_table["path"] == old["node:Person"]["path"]
    assert person_table["pk"] == ["id"]
    assert person_table["rows"] == len(EXAMPLE_PEOPLE) + 1
    fork = _fork(root_uri, person_table["path"], "feat")
    assert fork is not None
    assert fork.parent_version == old["node:Person"]["version"]
    assert fork.parent_branch in (None, "main")
    # every other table is still the inherited image
    for key, table in feat.items():
        if key != "node:Person":
            assert table == old[key], key
            assert _fork(root_uri, table["path"], "feat") is None, key

    assert _people(root_uri, "feat") == sorted([*EXAMPLE_PEOPLE, "Yan"])
    assert _people(root_uri, "main") == sorted([*EXAMPLE_PEOPLE, "Zed"])
    assert "Umbrella" not in export_text(root_uri, "feat", ["Company"])

    # committed-state checks on feat read feat's images, not main's newer ones
    with pytest.raises(BadRequest, match="missing endpoint"):
        load_lines(root_uri, [knows("Yan", "Zed", "knows-yan-zed")], branch="feat")
    load_lines(root_uri, [person("Zed", age=99)], branch="feat")  # no key conflict with main's Zed
    load_lines(root_uri, [knows("Yan", "Zed", "knows-yan-zed")], branch="feat")
    assert json.loads(export_text(root_uri, "feat", ["Person"]).splitlines()[-1])["data"]["age"] == 99
    assert '"age": 1' in export_text(root_uri, "main", ["Person"])
    assert "knows-yan-zed" not in export_text(root_uri, "main", ["Knows"])


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # local only: table branches on S3 are the fork-point test's
def test_branch_of_a_branch_and_the_delete_rules(root_uri: str) -> None:
    graph = make_example_graph(root_uri)
    old_main = _tables(snapshot(root_uri, "main"))
    person_path = old_main["node:Person"]["path"]
    create_branch(graph, "feat")
    load_lines(root_uri, [person("Yan")], branch="feat")
    feat_person_version = _pinned(root_uri, "feat", "node:Person")[1]

    invoke(OMNIGRAPH, "branch", "create", "feat2", "--from", "feat", root_uri).ok()
    load_lines(root_uri, [person("Later")], branch="feat")  # feat moves on after feat2 forked
    load_lines(root_uri, [person("Zed")])  # and so does main

    feat2 = _tables(snapshot(root_uri, "feat2"))
    assert feat2["node:Person"]["table_branch"] == "feat"
    assert feat2["node:Person"]["version"] == feat_person_version
    assert feat2["node:Company"] == old_main["node:Company"]
    assert _people(root_uri, "feat2") == sorted([*EXAMPLE_PEOPLE, "Yan"])

    load_lines(root_uri, [person("Kid"), '{"type": "Company", "data": {"name": "Kidco"}}'], branch="feat2")
    feat2 = _tables(snapshot(root_uri, "feat2"))
    assert feat2["node:Person"]["table_branch"] == "feat2"
    assert feat2["node:Company"]["table_branch"] == "feat2"
    person_fork = _fork(root_uri, person_path, "feat2")
    assert (person_fork.parent_branch, person_fork.parent_version) == ("feat", feat_person_version)
    company_fork = _fork(root_uri, old_main["node:Company"]["path"], "feat2")
    assert company_fork.parent_branch in (None, "main")
    assert company_fork.parent_version == old_main["node:Company"]["version"]
    assert _people(root_uri, "feat2") == sorted([*EXAMPLE_PEOPLE, "Kid", "Yan"])
    assert _people(root_uri, "feat") == sorted([*EXAMPLE_PEOPLE, "Later", "Yan"])
    assert _people(root_uri, "main") == sorted([*EXAMPLE_PEOPLE, "Zed"])

    # refusals: a parent branch, main, an existing name, bad names
    before = storage_state(root_uri)
    parent = omnigraph("branch", "delete", "feat", root_uri)
    main, existing = invoke_all(
        [OMNIGRAPH, "branch", "delete", "main", root_uri],
        [OMNIGRAPH, "branch", "create", "--json", "feat", root_uri],
    )
    assert parent.returncode == 1, parent.describe()
    assert "feat2" in parent.stderr, parent.describe()
    assert main.returncode == 1, main.describe()
    assert existing.returncode == 1, existing.describe()
    assert existing.json()["error"]["code"] == "branch_exists", existing.describe()
    graph = _rw(root_uri)
    with pytest.raises(BranchExists, match="already exists"):
        create_branch(graph, "feat2")
    with pytest.raises(NotFound):
        create_branch(graph, "other", "no-such-branch")
    with pytest.raises(NotFound):
        delete_branch(graph, "no-such-branch")
    assert storage_state(root_uri) == before

    # delete the child, then the parent: both graph branches and their table forks are gone
    invoke(OMNIGRAPH, "branch", "delete", "feat2", root_uri).ok()
    names = lance_branch_names(root_uri)
    assert all("feat2" not in branches for branches in names.values()), names
    assert names["__manifest"] == ["feat"]
    invoke(OMNIGRAPH, "branch", "delete", "feat", root_uri).ok()
    names = lance_branch_names(root_uri)
    assert all(branches == [] for branches in names.values()), names
    listed = invoke(OMNIGRAPH, "branch", "list", "--json", root_uri).ok().json()
    assert [b["name"] for b in listed["branches"]] == ["main"]

    # a new branch of the same name starts from main's current state, not the deleted fork
    create_branch(_rw(root_uri), "feat")
    assert _pinned(root_uri, "feat", "node:Person") == _pinned(root_uri, "main", "node:Person")
    load_lines(root_uri, [person("Fresh")], branch="feat")
    assert _fork(root_uri, person_path, "feat").parent_version == _pinned(root_uri, "main", "node:Person")[1]
    assert _people(root_uri, "feat") == sorted([*EXAMPLE_PEOPLE, "Fresh", "Zed"])


BAD_NAMES = ["", "main", "-lead", ".hidden", "a/b", "a b", "x" * 101, "naïve", "tab\t", "a..b", "x.lock"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_branch_names_are_refused(name: str, tmp_path) -> None:
    """A bad name is a ``bad_request`` (exit 1) and creates nothing.

    Local only: the names are checked before anything is created, whatever the backend.
    ``a..b`` and ``x.lock`` pass a naive character check but are refused by Lance's ref rules;
    they must still be reported as a bad name, not as an internal error.
    """
    uri = str(tmp_path / "g")
    graph = init(uri)
    result = invoke(OMNIGRAPH, "branch", "create", "--json", "--", name, uri)
    assert result.returncode == 1, result.describe()
    assert result.json()["error"]["code"] == "bad_request", result.describe()
    with pytest.raises(BadRequest):
        create_branch(graph, name)
    assert list(graph.manifest.branches()) == ["main"]
    assert all(branches == [] for branches in lance_branch_names(uri).values())
