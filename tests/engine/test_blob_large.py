"""Blob cells over the 32 MiB per-commit limit (issue 40, item 2): a row that counts more than the
limit on its own is staged alone (one Lance commit of its own inside the same graph commit) and
its cells are held to the per-cell limit (``OMNIGRAPH_BLOB_CELL_MB``). One 33 MiB cell goes
through a crash between its two Lance commits (rolled back whole), append, merge, a ``.gq``
update of another property, export and a reload, and a ``.gq`` insert; every limit refusal names
a setting or ``--chunk-rows`` that the test then runs as printed. Local storage only: the path is
storage-independent, and large cells are costly."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import omnigraph
from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from tests.engine.test_blob import BUMP, PUT, SCHEMA, doc, doc_table
from tests.support.advice import run_printed
from tests.support.check_helpers import assert_check_clean
from tests.support.crash_helpers import assert_write_converged
from tests.support.graph_helpers import OMNIGRAPH, invoke, run_cli, storage_state

MIB = 1024 * 1024


def line(slug: str, payload: bytes) -> str:
    return json.dumps({"type": "Doc", "data": {"slug": slug, "body": "base64:" + base64.b64encode(payload).decode()}})


def digest(root: str, slug: str) -> str:
    with omnigraph.open(root, read_only=True) as graph, graph.open_blob("Doc", slug, "body") as reader:
        return hashlib.sha256(b"".join(reader.chunks())).hexdigest()


def rows(root: str) -> dict[str, Any]:
    with omnigraph.open(root, read_only=True) as graph:
        result = graph.query("query q() { match { $d: Doc } return { $d.slug, $d.n } }").to_dict()
    return {row["d.slug"]: row["d.n"] for row in result["rows"]}


def test_a_33_mib_cell_is_appended_merged_updated_exported_and_reloaded(tmp_path: Path) -> None:
    big = os.urandom(33 * MIB)
    root = str(tmp_path / "graph")
    omnigraph.init(root, SCHEMA).close()
    data = tmp_path / "docs.jsonl"
    data.write_text(line("big", big) + "\n" + line("small", b"tiny") + "\n")
    _, before = doc_table(root)

    # a crash between the two Lance commits of the one graph commit: recover rolls it back whole
    crashed = run_cli(OMNIGRAPH, "load", "--mode", "append", "--data", data, root, env={FAILPOINT_ENV: "write.after_merge_step"})
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.describe()
    run_cli(OMNIGRAPH, "recover", root).ok()
    assert rows(root) == {}
    assert_write_converged(root, "main")
    _, before = doc_table(root)

    appended = invoke(OMNIGRAPH, "load", "--mode", "append", "--data", data, "--json", root).ok().json()
    assert len(appended["commits"]) == 1  # one graph commit ...
    assert doc_table(root)[1] == before + 2  # ... of two Lance commits: the small row, then the big one alone
    with omnigraph.open(root) as graph:
        graph.load([doc("big", big), doc("small", b"tiny")], mode="merge")
        graph.mutate(BUMP, params={"slug": "big"})  # an update of another property carries the cell
    assert rows(root) == {"big": 5, "small": None}

    exported = tmp_path / "export.jsonl"
    exported.write_bytes(invoke(OMNIGRAPH, "export", root).ok().stdout_bytes)
    again = str(tmp_path / "again")
    omnigraph.init(again, SCHEMA).close()
    invoke(OMNIGRAPH, "load", "--mode", "append", "--data", exported, again).ok()
    assert rows(again) == rows(root)
    assert digest(again, "big") == hashlib.sha256(big).hexdigest()

    with omnigraph.open(root) as graph:
        graph.mutate(PUT, params={"slug": "copy", "body": "base64:" + base64.b64encode(big).decode()})
    assert digest(root, "big") == digest(root, "copy") == hashlib.sha256(big).hexdigest()
    assert_check_clean(root)


def test_every_limit_refusal_names_what_makes_the_write_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two 17 MiB rows fit no commit together: the refusal names ``--chunk-rows 1`` even when
    ``--chunk-rows 8192`` was given (checked before it is printed), and the load then runs as
    printed. A cell over ``OMNIGRAPH_BLOB_CELL_MB`` is refused by every write, nothing written,
    naming the setting that stores it; with that setting the write goes through."""
    root = str(tmp_path / "graph")
    omnigraph.init(root, SCHEMA).close()
    data = tmp_path / "two.jsonl"
    data.write_text(line("a", os.urandom(17 * MIB)) + "\n" + line("b", os.urandom(17 * MIB)) + "\n")
    before = storage_state(root)
    refused = invoke(OMNIGRAPH, "load", "--mode", "append", "--data", data, "--chunk-rows", "8192", "--json", root)
    error = refused.json()["error"]
    assert (refused.returncode, error["code"], error["details"]["chunk_rows"]) == (1, "resource_limit", 1), refused.describe()
    assert storage_state(root) == before
    advised = re.search(r"--chunk-rows (\d+) ", error["message"])
    assert advised is not None and advised.group(1) == "1"
    done = run_printed(f"omnigraph load --mode append --data {data} --chunk-rows {advised.group(1)} --json {root}")
    assert done.returncode == 0 and len(json.loads(done.stdout)["commits"]) == 2, done.describe()

    monkeypatch.setenv("OMNIGRAPH_BLOB_CELL_MB", "1")
    payload = os.urandom(MIB + 1)
    writes = {
        "append": lambda graph: graph.load([doc("c", payload)], mode="append"),
        "merge": lambda graph: graph.load([doc("a", payload)], mode="merge"),
        "overwrite": lambda graph: graph.load([doc("c", payload)], mode="overwrite"),
        "insert": lambda graph: graph.mutate(PUT, params={"slug": "c", "body": "base64:" + base64.b64encode(payload).decode()}),
        "update": lambda graph: graph.mutate(BUMP, params={"slug": "a"}),  # carries a stored 17 MiB cell
    }
    before = storage_state(root)
    with omnigraph.open(root) as graph:
        for name, write in writes.items():
            with pytest.raises(omnigraph.OmnigraphError) as raised:
                write(graph)
            assert (raised.value.code, raised.value.details["resource"]) == ("resource_limit", "blob_cell_bytes"), name
            assert raised.value.details["limit"] == MIB, name
    assert storage_state(root) == before
    setting = re.search(r"set OMNIGRAPH_BLOB_CELL_MB=(\d+) ", str(raised.value))
    assert setting is not None and setting.group(1) == "17"
    monkeypatch.setenv("OMNIGRAPH_BLOB_CELL_MB", setting.group(1))
    with omnigraph.open(root) as graph:
        writes["update"](graph)
        writes["insert"](graph)
    assert rows(root) == {"a": 5, "b": None, "c": None}
