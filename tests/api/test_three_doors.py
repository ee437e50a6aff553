"""One scenario through the three doors, the Python API, the ``omnigraph`` CLI and the HTTP
server, on three fresh graphs: the results, the refusal, the snapshots, the branch list, the
commit messages and the exports are identical (table paths and commit ids are the only things
that differ: every graph has its own incarnations and its own commits; and the server's mutate
answer, which carries only ``affected_*`` and ``commit``). Both backends.

The scenario: load the example (append), create ``feature``, upsert a person there, update it
with a ``.gq`` mutation, be refused a strict re-insert of it, merge ``feature`` into ``main``,
delete a person (and its edges) on ``main``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import omnigraph
from tests.conftest import new_root
from tests.support.graph_helpers import DATA_PATH, OMNIGRAPH, SCHEMA_PATH, invoke
from tests.support.serve_helpers import NDJSON, start_fenced

IVAN = json.dumps({"type": "Person", "data": {"name": "Ivan", "age": 40}}) + "\n"
QUERIES = """
query birthday($name: String) { update Person set { age: 41 } where name = $name }
query remove($name: String) { delete Person where name = $name }
"""
INCARNATION = re.compile(r"-[0-9a-z]{26}$")

Door = Callable[[str, Path], dict[str, Any]]


def _through_api(uri: str, _work: Path) -> dict[str, Any]:
    with omnigraph.init(uri, SCHEMA_PATH) as graph:
        steps: list[Any] = [graph.load(DATA_PATH, mode="append").to_dict()["rows"]]
        steps.append(graph.create_branch("feature").parent_branch)
        steps.append(graph.load(IVAN.encode(), mode="merge", branch="feature").to_dict()["rows"])
        steps.append(graph.mutate(QUERIES, name="birthday", params={"name": "Ivan"}, branch="feature").to_dict())
        try:
            graph.load(IVAN.encode(), mode="append", branch="feature")
        except omnigraph.KeyConflict as refused:
            steps.append(refused.to_json()["error"])
        merged = graph.merge("feature", into="main")
        steps.append((merged.outcome, merged.to_dict()["changes"]))
        steps.append(graph.mutate(QUERIES, name="remove", params={"name": "Dave"}).to_dict())
        return {"steps": steps, **_state(graph)}


def _state(graph: omnigraph.Graph) -> dict[str, Any]:
    return {
        "snapshots": [graph.snapshot(b).to_dict() for b in ("main", "feature")],
        "branches": [b.to_dict() for b in graph.branches()],
        "commits": [[c.message for c in graph.commits(b)] for b in ("main", "feature")],
        "exports": ["".join(line + "\n" for line in graph.export_jsonl(b)) for b in ("main", "feature")],
    }


def _cli(*args: str | Path) -> Any:
    """One `omnigraph` command, run in this process (the same click command as the console script)."""
    done = invoke(OMNIGRAPH, *args)
    return done.json() if "--json" in args else done.stdout


def _through_cli(uri: str, work: Path) -> dict[str, Any]:
    ivan, queries = work / "ivan.jsonl", work / "people.gq"
    ivan.write_text(IVAN)
    queries.write_text(QUERIES)
    _cli("init", "--schema", SCHEMA_PATH, uri)
    steps: list[Any] = [_cli("load", "--mode", "append", "--data", DATA_PATH, "--json", uri)["rows"]]
    steps.append(_cli("branch", "create", "feature", "--json", uri)["parent_branch"])
    steps.append(_cli("load", "--mode", "merge", "--data", ivan, "--branch", "feature", "--json", uri)["rows"])
    steps.append(
        _cli("mutate", "--query", queries, "--name", "birthday", "--params", '{"name": "Ivan"}', "--branch", "feature", "--json", uri)
    )
    steps.append(_cli("load", "--mode", "append", "--data", ivan, "--branch", "feature", "--json", uri)["error"])
    merged = _cli("branch", "merge", "feature", "--json", uri)
    steps.append((merged["outcome"], merged["changes"]))
    steps.append(_cli("mutate", "--query", queries, "--name", "remove", "--params", '{"name": "Dave"}', "--json", uri))
    return {
        "steps": steps,
        "snapshots": [_cli("snapshot", "--branch", b, "--json", uri) for b in ("main", "feature")],
        "branches": _cli("branch", "list", "--json", uri)["branches"],
        "commits": [[c["message"] for c in _cli("commit", "list", "--branch", b, "--json", uri)["commits"]] for b in ("main", "feature")],
        "exports": [_cli("export", "--branch", b, uri) for b in ("main", "feature")],
    }


def _through_http(uri: str, _work: Path) -> dict[str, Any]:
    _cli("init", "--schema", SCHEMA_PATH, uri)  # the server serves a graph; it does not create one
    server = start_fenced(uri)
    try:
        http = server.client

        def ok(response: Any) -> Any:
            assert response.status_code in (200, 201), response.text
            return response.json()

        steps: list[Any] = [
            ok(http.post("/branches/main/load", params={"mode": "append"}, content=DATA_PATH.read_bytes(), headers=NDJSON))["rows"]
        ]
        steps.append(ok(http.post("/branches", json={"name": "feature", "from": "main"}))["parent_branch"])
        steps.append(ok(http.post("/branches/feature/load", params={"mode": "merge"}, content=IVAN, headers=NDJSON))["rows"])
        steps.append(ok(http.post("/branches/feature/mutate", json={"query": QUERIES, "name": "birthday", "params": {"name": "Ivan"}})))
        refused = http.post("/branches/feature/load", params={"mode": "append"}, content=IVAN, headers=NDJSON)
        assert refused.status_code == 409
        steps.append(refused.json()["error"])
        merged = ok(http.post("/branches/feature/merge", json={"into": "main"}))
        steps.append((merged["outcome"], merged["changes"]))
        steps.append(ok(http.post("/branches/main/mutate", json={"query": QUERIES, "name": "remove", "params": {"name": "Dave"}})))
        return {
            "steps": steps,
            "snapshots": [ok(http.get(f"/branches/{b}/snapshot")) for b in ("main", "feature")],
            "branches": ok(http.get("/branches"))["branches"],
            "commits": [[c["message"] for c in ok(http.get(f"/branches/{b}/commits"))["commits"]] for b in ("main", "feature")],
            "exports": [http.get(f"/branches/{b}/export").text for b in ("main", "feature")],
        }
    finally:
        server.stop()


def _comparable(outcome: dict[str, Any]) -> dict[str, Any]:
    """``outcome`` without what differs by nature between two graphs: table incarnations, commit
    ids, branch incarnations and heads."""
    steps = [
        dict(step, commit=step["commit"] is not None) if isinstance(step, dict) and "commit" in step else step for step in outcome["steps"]
    ]
    snapshots = [omnigraph.Snapshot.from_document(document).to_dict() for document in outcome["snapshots"]]
    for document in snapshots:
        for table in document["tables"]:
            table["path"] = INCARNATION.sub("", table["path"])
    branches = [{k: v for k, v in b.items() if k not in ("incarnation", "head")} for b in outcome["branches"]]
    return {**outcome, "steps": json.loads(json.dumps(steps)), "snapshots": snapshots, "branches": branches}


def test_the_api_the_cli_and_http_agree(backend: str, tmp_path: Path) -> None:
    doors: dict[str, Door] = {"api": _through_api, "cli": _through_cli, "http": _through_http}
    outcomes = {}
    for name, door in doors.items():
        work = tmp_path / name
        work.mkdir()
        outcomes[name] = _comparable(door(new_root(backend, work), work))
    api = outcomes["api"]
    assert api["steps"][4]["code"] == "key_conflict" and api["steps"][5][0] == "fast_forward"
    assert "Dave" not in api["exports"][0] and "Dave" in api["exports"][1] and '"age": 41' in api["exports"][0]
    assert outcomes["cli"] == api
    assert outcomes["http"] == api
