"""Refused loads write nothing: no table version, no manifest version, no fork, no intent.

Every refused load runs against a graph with two branches (``feat`` owns a fork of node:Person);
the storage state of every branch and every dataset (:func:`graph_helpers.storage_state`) is
compared before and after all of them, so a write by any refused load shows. The row-limit and
usage refusals run through the real console script; the many per-line refusals run the same
click command in-process (:func:`graph_helpers.invoke`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnigraph.engine.errors import BadRequest, KeyConflict, exit_code_for
from omnigraph.engine.ops.branches import create_branch
from tests.support.graph_helpers import (
    OMNIGRAPH,
    SCHEMA_PATH,
    commit_ids,
    export_text,
    init,
    invoke,
    knows,
    load_lines,
    make_example_graph,
    omnigraph,
    person,
    run_parallel,
    snapshot,
    storage_state,
    write_jsonl,
)

LIMIT = 8192


def _people(prefix: str, count: int) -> list[str]:
    return [json.dumps({"type": "Person", "data": {"name": f"{prefix}{i:05d}"}}) for i in range(count)]


# name -> (lines, branch, expected line, words the message must contain)
BAD_FILES: dict[str, tuple[list[str], str, int, list[str]]] = {
    "malformed_json": (  # blank lines are counted
        [person("Zed"), "", '{"type": "Person", "data": {"name": "Quin"', person("Yon")],
        "main",
        3,
        ["malformed JSON"],
    ),
    "unknown_type": (
        [person("Zed"), person("Quin"), '{"type": "Robot", "data": {"name": "R2"}}'],
        "main",
        3,
        ["Robot"],
    ),
    "unknown_property": (
        [person("Zed"), person("Quin", height=180)],
        "feat",
        2,
        ["height"],
    ),
    "wrong_type": (
        [person("Zed"), '{"type": "Person", "data": {"name": "Quin", "age": "old"}}'],
        "main",
        2,
        ["age"],
    ),
    "missing_endpoint": (
        [person("Zed"), person("Yon"), knows("Zed", "Yon", "knows-zed-yon"), knows("Zed", "Nobody", "knows-zed-nobody")],
        "feat",
        4,
        ["missing endpoint", "Nobody"],
    ),
    "duplicate_id": (
        [person("Zed"), person("Yon"), person("Zed", age=3)],
        "main",
        3,
        ["Zed", "line 1"],
    ),
}

# More per-line refusals of REFERENCE "JSONL records"; the CLI test runs BAD_FILES, the
# every-mode library test runs both.
MORE_BAD_FILES: dict[str, tuple[list[str], str, int, list[str]]] = {
    "duplicate_unique_value": (
        [person("Zed", email="z@example.org"), person("Yon", email="z@example.org")],
        "feat",
        2,
        ["z@example.org", "line 1"],
    ),
    "duplicate_json_member": (
        [person("Zed"), '{"type": "Person", "data": {"name": "Quin", "name": "Quinn"}}'],
        "main",
        2,
        ["duplicate JSON member"],
    ),
    "unexpected_top_level_key": (
        [person("Zed"), '{"type": "Person", "data": {"name": "Quin"}, "note": "x"}'],
        "main",
        2,
        ["note"],
    ),
    "endpoint_of_the_wrong_type": (
        [person("Zed"), knows("Acme", "Zed", "knows-acme-zed")],
        "main",
        2,
        ["missing endpoint", "Acme"],
    ),
    "explicit_id_differs_from_key": (
        [person("Zed"), '{"type": "Person", "data": {"id": "Bob", "name": "Robert"}}'],
        "main",
        2,
        ["Bob", "Robert"],
    ),
}


def _graph_with_two_branches(uri: str) -> None:
    graph = make_example_graph(uri)
    create_branch(graph, "feat")
    load_lines(uri, [person("Yan")], branch="feat")


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_refused_loads_change_nothing(root_uri: str, tmp_path: Path) -> None:
    _graph_with_two_branches(root_uri)
    before = storage_state(root_uri)
    assert set(before["branches"]) == {"main", "feat"}

    # per-line refusals: bad_request, exit 1, "line N:" in the message and details.line
    per_line: dict[str, tuple[list, int, list[str]]] = {}
    for name, (lines, branch, line, words) in BAD_FILES.items():
        data = write_jsonl(tmp_path, f"{name}.jsonl", lines)
        per_line[name] = (["--mode", "append", "--branch", branch, "--data", data], line, words)
    for mode in ("merge", "overwrite"):  # a duplicate within one file is an error in every mode
        per_line[f"duplicate_id/{mode}"] = (["--mode", mode, "--data", tmp_path / "duplicate_id.jsonl"], *BAD_FILES["duplicate_id"][2:])
    taken = write_jsonl(tmp_path, "taken.jsonl", [person("Zed"), person("Quin", email="alice@example.com")])
    per_line["unique_taken"] = (["--mode", "merge", "--data", taken], 2, ["alice@example.com"])
    for name, (args, line, words) in per_line.items():
        result = invoke(OMNIGRAPH, "load", *args, "--json", root_uri)
        assert result.returncode == 1, (name, result.describe())
        error = result.json()["error"]
        assert error["code"] == "bad_request", (name, result.describe())
        assert error["message"].startswith(f"line {line}:"), (name, result.describe())
        assert error["details"]["line"] == line, (name, result.describe())
        for word in words:
            assert word in error["message"], (name, result.describe())
        assert f"line {line}" in result.stderr, (name, result.describe())

    # other refusals: (args, exit status, error code or None for a usage error)
    empty = write_jsonl(tmp_path, "empty.jsonl", b"")
    others: dict[str, tuple[list, int, str | None]] = {
        "unknown_branch": (["--mode", "append", "--branch", "nope", "--data", taken], 1, "not_found"),
        "missing_file": (["--mode", "append", "--data", tmp_path / "absent.jsonl"], 1, "bad_request"),
        "chunked_overwrite": (["--mode", "overwrite", "--chunk-rows", "2", "--data", taken], 1, "bad_request"),
        "chunk_rows_0": (["--mode", "append", "--chunk-rows", "0", "--data", taken], 2, None),
        "bad_mode": (["--mode", "upsert", "--data", taken], 2, None),
    }
    for name, (args, status, code) in others.items():
        result = invoke(OMNIGRAPH, "load", *args, "--json", root_uri)
        assert result.returncode == status, (name, result.describe())
        if code is not None:
            assert result.json()["error"]["code"] == code, (name, result.describe())
    # an empty file is not an error, but publishes no commit
    document = invoke(OMNIGRAPH, "load", "--mode", "append", "--data", empty, "--json", root_uri).ok().json()
    assert document["commits"] == [] and document["rows"] == {}, document

    # through the real console script: the row limit, in both limited modes, and a usage error
    too_many = write_jsonl(tmp_path, "too_many.jsonl", _people("p", LIMIT + 1))
    *limited, usage = run_parallel(
        [OMNIGRAPH, "load", "--mode", "append", "--data", too_many, "--json", root_uri],
        [OMNIGRAPH, "load", "--mode", "merge", "--branch", "feat", "--data", too_many, "--json", root_uri],
        [OMNIGRAPH, "load", "--data", tmp_path / "unknown_type.jsonl", root_uri],
    )
    for result in limited:
        assert result.returncode == 1, result.describe()
        error = result.json()["error"]
        assert error["code"] == "resource_limit", result.describe()
        assert {k: error["details"].get(k) for k in ("resource", "limit", "actual")} == {
            "resource": "rows",
            "limit": LIMIT,
            "actual": LIMIT + 1,
        }, result.describe()
    assert usage.returncode == 2, usage.describe()
    assert "--mode" in usage.stderr and usage.stdout == ""

    assert storage_state(root_uri) == before


def test_every_mode_refuses_every_bad_file(tmp_path: Path) -> None:
    """The same files through the library in all three modes.

    Local only: these refusals come from validating the file, which does not depend on the
    backend (the CLI test above runs them on both backends).
    """
    uri = str(tmp_path / "g")
    _graph_with_two_branches(uri)
    before = storage_state(uri)
    for mode in ("append", "merge", "overwrite"):
        for name, (lines, branch, line, words) in {**BAD_FILES, **MORE_BAD_FILES}.items():
            with pytest.raises(BadRequest) as caught:
                load_lines(uri, lines, mode, branch=branch)
            assert caught.value.details["line"] == line, (mode, name)
            assert caught.value.message.startswith(f"line {line}:"), (mode, name)
            assert all(word in caught.value.message for word in words), (mode, name, caught.value.message)
            assert exit_code_for(caught.value) == 1
    assert storage_state(uri) == before


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_row_limit_is_inclusive_and_chunking_splits_commits(root_uri: str, tmp_path: Path) -> None:
    init(root_uri)
    exactly = write_jsonl(tmp_path, "exactly.jsonl", _people("a", LIMIT))
    result = omnigraph("load", "--mode", "append", "--data", exactly, "--json", root_uri).ok()
    assert len(result.json()["commits"]) == 1
    assert result.json()["rows"] == {"node:Person": LIMIT}
    assert len(commit_ids(root_uri)) == 2

    over = write_jsonl(tmp_path, "over.jsonl", _people("b", LIMIT + 1))
    chunked = omnigraph("load", "--mode", "append", "--chunk-rows", "4096", "--data", over, "--json", root_uri).ok()
    document = chunked.json()  # progress goes to stderr: stdout is one JSON document
    assert len(document["commits"]) == 3
    assert document["rows"] == {"node:Person": LIMIT + 1}
    listed = invoke(OMNIGRAPH, "commit", "list", "--json", root_uri).ok().json()["commits"]
    assert len(listed) == 2 + 3  # commit list grew by 3
    assert [c["commit_id"] for c in listed[:3]] == list(reversed(document["commits"]))
    assert [c["message"] for c in listed[:3]] == [f"load --mode append (chunk {i}/3)" for i in (3, 2, 1)]
    tables = {t["table_key"]: t for t in snapshot(root_uri)["tables"]}
    assert tables["node:Person"]["rows"] == 2 * LIMIT + 1
    assert tables["node:Person"]["pk"] == ["id"]


def test_a_chunked_load_that_fails_part_way_names_the_chunks_that_landed(tmp_path: Path) -> None:
    """Chunks are separate commits: a failure in a later chunk reports what already landed."""
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    with pytest.raises(KeyConflict) as refused:
        load_lines(uri, [person(f"n{i}") for i in range(5)] + [person("Alice")], chunk_rows=2)
    details = refused.value.details
    assert details["chunks_total"] == 3 and len(details["committed_chunks"]) == 2
    assert "2 of 3 chunks were committed" in refused.value.message
    exported = export_text(uri)
    assert all(f'"id": "n{i}"' in exported for i in range(4)) and '"id": "n4"' not in exported


def test_init_over_an_interrupted_init_says_so(tmp_path: Path) -> None:
    uri = tmp_path / "g"
    crashed = omnigraph("init", "--schema", str(SCHEMA_PATH), str(uri), env={"OMNIGRAPH_FAILPOINTS": "init.before_manifest"})
    assert crashed.returncode == 86
    again = omnigraph("init", "--schema", str(SCHEMA_PATH), str(uri))
    assert again.returncode == 1 and "interrupted init" in again.stderr
