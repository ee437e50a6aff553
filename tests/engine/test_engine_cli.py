"""The engine CLI contract (DESIGN section 6): snapshot/commit list/version/export documents, load
modes, and init refusals."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from omnigraph.engine.errors import BadRequest, KeyConflict
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import (
    OMNIGRAPH,
    OMNIGRAPH_V4,
    SCHEMA_PATH,
    all_objects,
    export_text,
    invoke,
    invoke_all,
    knows,
    load_lines,
    make_example_graph,
    omnigraph,
    person,
    record_key,
    run_parallel,
    snapshot,
    storage_state,
    write_jsonl,
)

EXAMPLE_TABLES = [
    "edge:Knows",
    "edge:WorksAt",
    "edge:Wrote",
    "node:Company",
    "node:Doc",
    "node:Membership",
    "node:Person",
    "node:Tag",
]
EXAMPLE_ROWS = {
    "edge:Knows": 6,
    "edge:WorksAt": 5,
    "edge:Wrote": 5,
    "node:Company": 3,
    "node:Doc": 5,
    "node:Membership": 5,
    "node:Person": 8,
    "node:Tag": 4,
}


def _by_id(text: str) -> dict[tuple[str, str], dict]:
    return {record_key(line): json.loads(line) for line in text.splitlines()}


# -- snapshot, commit list, version ---------------------------------------------------------------


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_snapshot_commit_list_and_export_documents(root_uri: str) -> None:
    graph = make_example_graph(root_uri)
    full_export = export_text(root_uri)
    create_branch(graph, "feat")
    load_lines(root_uri, [person("Yan")], branch="feat")
    load_lines(root_uri, [person("Alice", age=35)], "merge")

    main_snap, feat_log = run_parallel(
        [OMNIGRAPH, "snapshot", "--json", root_uri],
        [OMNIGRAPH, "commit", "list", "--branch", "feat", "--json", root_uri],
    )
    feat_snap, main_log, missing, some, unknown = invoke_all(
        [OMNIGRAPH, "snapshot", root_uri, "--json", "--branch", "feat"],
        [OMNIGRAPH, "commit", "list", "--json", root_uri],
        [OMNIGRAPH, "snapshot", "--json", "--branch", "nope", root_uri],
        [OMNIGRAPH, "export", "--type", "Person", "--type", "Knows", "--branch", "feat", root_uri],
        [OMNIGRAPH, "export", "--type", "Person", "--type", "Robot", root_uri],
    )
    for document, branch in ((main_snap.ok().json(), "main"), (feat_snap.ok().json(), "feat")):
        assert set(document) == {"branch", "manifest_version", "format", "tables"}
        assert document["branch"] == branch
        assert document["format"] == "5"
        assert isinstance(document["manifest_version"], int)
        assert [t["table_key"] for t in document["tables"]] == EXAMPLE_TABLES
        for table in document["tables"]:
            assert set(table) == {"table_key", "path", "table_branch", "version", "rows", "pk"}
            assert table["pk"] == ["id"]
            assert isinstance(table["version"], int) and isinstance(table["rows"], int)
        assert document == snapshot(root_uri, branch)
    feat_tables = {t["table_key"]: t for t in feat_snap.json()["tables"]}
    assert feat_tables["node:Person"]["table_branch"] == "feat"
    assert feat_tables["node:Person"]["rows"] == 9
    assert {t["table_key"]: t["rows"] for t in main_snap.json()["tables"]} == EXAMPLE_ROWS

    main_commits = main_log.ok().json()
    assert main_commits["branch"] == "main"
    assert [c["message"] for c in main_commits["commits"]] == ["load --mode merge", "load --mode append", "init"]
    for commit in main_commits["commits"]:
        assert set(commit) >= {"commit_id", "parents", "actor", "message", "committed_at"}
    ids = [c["commit_id"] for c in main_commits["commits"]]
    assert [c["parents"] for c in main_commits["commits"]] == [[ids[1]], [ids[2]], []]
    stamps = [c["committed_at"] for c in main_commits["commits"]]
    assert stamps == sorted(stamps, reverse=True)

    feat_commits = feat_log.ok().json()["commits"]
    # feat's own commit, then main's commits from before the fork, and not main's later merge
    assert [c["message"] for c in feat_commits] == ["load --mode append", "load --mode append", "init"]
    assert [c["commit_id"] for c in feat_commits][1:] == ids[1:]
    assert feat_commits[0]["parents"] == [ids[1]]

    assert missing.returncode == 1 and missing.json()["error"]["code"] == "not_found", missing.describe()

    # export --type T...: only those tables, in table-key order (of feat: Yan, not main's merge)
    lines = some.ok().stdout.splitlines()
    wanted = ("edge:Knows", "node:Person")
    assert lines == [line for line in export_text(root_uri, "feat").splitlines() if record_key(line)[0] in wanted]
    assert [record_key(line)[0] for line in lines] == ["edge:Knows"] * 6 + ["node:Person"] * 9
    people = _by_id(some.stdout)
    assert ("node:Person", "Yan") in people
    assert people[("node:Person", "Alice")] == _by_id(full_export)[("node:Person", "Alice")]
    assert unknown.returncode == 1, unknown.describe()
    assert "Robot" in unknown.stderr and unknown.stdout == ""


def test_version() -> None:
    human, document = run_parallel([OMNIGRAPH, "version"], [OMNIGRAPH, "version", "--json"])
    assert "omnigraph" in human.ok().stdout and "5" in human.stdout
    assert human.stderr == ""
    parsed = document.ok().json()
    assert parsed["format"] == "5" and isinstance(parsed["version"], str) and parsed["version"]


# -- load modes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_load_modes(root_uri: str, tmp_path: Path) -> None:
    make_example_graph(root_uri)

    # append: an existing id is a key conflict; nothing of the file is written
    before = storage_state(root_uri)
    export_before = export_text(root_uri)
    data = write_jsonl(tmp_path, "conflict.jsonl", [person("Zed", age=3), person("Alice", age=99)])
    result = omnigraph("load", "--mode", "append", "--data", data, "--json", root_uri)
    assert result.returncode == 1, result.describe()
    error = result.json()["error"]
    assert error["code"] == "key_conflict"
    assert error["details"] == {"entity_kind": "node", "type_name": "Person", "entity_id": "Alice"}
    assert "Alice" in error["message"]
    assert export_text(root_uri) == export_before  # Alice untouched, Zed absent
    with pytest.raises(KeyConflict) as caught:  # and for an edge id
        load_lines(root_uri, [knows("Heidi", "Alice", "knows-heidi-alice"), knows("Alice", "Bob", "knows-alice-bob")])
    assert caught.value.details == {"entity_kind": "edge", "type_name": "Knows", "entity_id": "knows-alice-bob"}
    assert storage_state(root_uri) == before

    # merge: whole-row replacement of existing ids, insertion of new ones (options in any order)
    before_rows = _by_id(export_before)
    data = write_jsonl(tmp_path, "merge.jsonl", [person("Alice", age=35), person("Zed", email="zed@example.com")])
    document = invoke(OMNIGRAPH, "load", root_uri, "--json", "--data", data, "--mode", "merge").ok().json()
    assert document["mode"] == "merge" and len(document["commits"]) == 1
    assert document["rows"] == {"node:Person": 2}
    after_rows = _by_id(export_text(root_uri))
    alice = after_rows[("node:Person", "Alice")]["data"]
    assert alice["age"] == 35
    assert alice.get("email") is None  # omitted nullable property became null
    assert after_rows[("node:Person", "Zed")]["data"] == {"id": "Zed", "name": "Zed", "email": "zed@example.com"}
    assert set(after_rows) == set(before_rows) | {("node:Person", "Zed")}
    for key, record in before_rows.items():
        if key != ("node:Person", "Alice"):
            assert after_rows[key] == record, key

    # overwrite: only the tables present in the file are replaced, and they keep the PK
    before_snapshot = {t["table_key"]: t for t in snapshot(root_uri)["tables"]}
    before_lines = export_text(root_uri).splitlines()
    tags = ['{"type": "Tag", "data": {"id": "tag-new", "label": "new"}}', '{"type": "Tag", "data": {"id": "tag-other", "label": "other"}}']
    data = write_jsonl(tmp_path, "tags.jsonl", tags)
    invoke(OMNIGRAPH, "load", "--mode", "overwrite", "--data", data, root_uri).ok()
    after_snapshot = {t["table_key"]: t for t in snapshot(root_uri)["tables"]}
    assert after_snapshot["node:Tag"]["pk"] == ["id"]
    assert after_snapshot["node:Tag"]["rows"] == 2
    assert after_snapshot["node:Tag"]["version"] > before_snapshot["node:Tag"]["version"]
    for key, table in before_snapshot.items():
        if key != "node:Tag":
            assert after_snapshot[key] == table, key
    after_lines = export_text(root_uri).splitlines()
    assert [line for line in after_lines if record_key(line)[0] != "node:Tag"] == [
        line for line in before_lines if record_key(line)[0] != "node:Tag"
    ]
    assert [record_key(line)[1] for line in after_lines if record_key(line)[0] == "node:Tag"] == ["tag-new", "tag-other"]

    # overwriting a node table must not orphan committed edges of tables not in the file
    state = storage_state(root_uri)
    with pytest.raises(BadRequest):
        load_lines(root_uri, ['{"type": "Company", "data": {"name": "Acme"}}'], "overwrite")
    assert storage_state(root_uri) == state


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_piped_load_is_read_in_full_and_a_bad_line_is_named(root_uri: str) -> None:
    """``--data /dev/stdin``: a pipe cannot be read twice, yet a refused line is named by number
    as it is for a file, nothing is written, and a good piped file loads, with ``--data -`` (standard input)."""
    make_example_graph(root_uri)
    before = storage_state(root_uri)
    bad = (person("Zed", age=3) + "\n" + '{"type": "Person", "data": {"name": "Yan", "zz": 1}}' + "\n").encode()
    argv = [str(OMNIGRAPH), "load", "--mode", "append", "--data", "/dev/stdin", "--json", root_uri]
    refused = subprocess.run(argv, input=bad, capture_output=True, timeout=180, check=False)
    assert refused.returncode == 1, refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "bad_request" and error["message"].startswith("line 2:"), error
    assert storage_state(root_uri) == before
    good = (person("Zed", age=3) + "\n").encode()
    argv[argv.index("/dev/stdin")] = "-"
    loaded = subprocess.run(argv, input=good, capture_output=True, timeout=180, check=False)
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout)["rows"] == {"node:Person": 1}


# -- init -----------------------------------------------------------------------------------------


def test_init_over_an_existing_graph_is_refused(root_uri: str) -> None:
    make_example_graph(root_uri)
    before = storage_state(root_uri)
    objects = all_objects(root_uri)
    result = omnigraph("init", "--schema", SCHEMA_PATH, "--json", root_uri)
    assert result.returncode == 1, result.describe()
    assert result.json()["error"]["code"] == "bad_request"
    assert storage_state(root_uri) == before
    assert all_objects(root_uri) == objects


def test_interrupted_init_is_refused_by_every_command(root_uri: str, tmp_path: Path) -> None:
    crashed = omnigraph("init", "--schema", SCHEMA_PATH, root_uri, env={"OMNIGRAPH_FAILPOINTS": "init.before_manifest"})
    assert crashed.returncode == 86, crashed.describe()
    objects = all_objects(root_uri)
    assert objects, "the interrupted init left nothing to refuse"
    data = write_jsonl(tmp_path, "one.jsonl", [person("Zed")])
    results = invoke_all(
        [OMNIGRAPH, "load", "--mode", "append", "--data", data, root_uri],
        [OMNIGRAPH, "snapshot", "--json", root_uri],
        [OMNIGRAPH, "export", root_uri],
        [OMNIGRAPH, "branch", "list", root_uri],
        [OMNIGRAPH, "branch", "create", "feat", root_uri],
        [OMNIGRAPH, "commit", "list", root_uri],
        [OMNIGRAPH_V4, "snapshot", root_uri],
    )
    for result in results:
        assert result.returncode == 1, result.describe()
        assert "interrupted" in result.stderr, result.describe()
    again = invoke(OMNIGRAPH, "init", "--schema", SCHEMA_PATH, root_uri)
    assert again.returncode == 1, again.describe()
    assert all_objects(root_uri) == objects


def test_init_with_a_bad_schema_creates_nothing(root_uri: str, tmp_path: Path) -> None:
    schema = tmp_path / "bad.pg"
    schema.write_text("node Person {\n  name: String @key\n  age: Int32?\n}\n", encoding="utf-8")
    result = omnigraph("init", "--schema", schema, "--json", root_uri)
    assert result.returncode == 1, result.describe()
    error = result.json()["error"]
    assert error["code"] == "bad_request"
    assert "3:8" in error["message"]
    assert error["details"] == {"line": 3, "column": 8}
    assert "3:8" in result.stderr
    assert open_store(root_uri).is_empty_root()
