"""``POST /branches/{branch}/query`` through a real ``omnigraph serve`` process (two workers) on
loopback, on both backends: the answer document, every error status, and 8 concurrent readers
while a writer commits, each of whose answers is the answer at the commit it names."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import new_root
from tests.support.graph_helpers import make_example_graph
from tests.support.serve_helpers import Server, error_of, start_fenced

READS = """
query friends($name: String) {
  match { $p: Person { name: $name }  $p knows $f }
  return { count($f) as n, max($f.age) as oldest }
}
query people() {
  match { $p: Person }
  return { $p.name, $p.age }
  order { $p.age desc }
}
query ties() {
  match { $a: Person { name: "Alice" }  $a $k:<knows> $b }
  return { $b.name, $k.since }
  order { $b.name, $k.since }
}
query some() {
  match { $a: Person { name: "Alice" }  $a knows{1,3} $b }
  return { $b.name }
  limit 2
}
"""
LOGIC = "query q($max: I32?) { match { $p: Person  ($max is null or $p.age < $max)  exists { $p worksAt $_ } } return { $p.name } }"
ADD = 'query add($name: String, $age: I32) { insert Person { name: $name, age: $age }\n insert Knows { from: "Alice", to: $name } }'
READERS = 8
WRITES = 6


@pytest.fixture
def served(backend: str, tmp_path: Path) -> Iterator[Server]:
    uri = new_root(backend, tmp_path)
    make_example_graph(uri)
    server = start_fenced(uri, workers=2)
    try:
        yield server
    finally:
        server.stop()


def _ask(server: Server, name: str, branch: str = "main", **body: Any) -> Any:
    return server.client.post(f"/branches/{branch}/query", json={"query": READS, "name": name, **body})


def test_answers_and_error_statuses(served: Server) -> None:
    response = _ask(served, "friends", params={"name": "Alice"})
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["columns"] == ["n", "oldest"] and document["rows"] == [{"n": 2, "oldest": 41}]
    assert document["branch"] == "main" and document["query"] == "friends"
    people = _ask(served, "people", at=document["commit"]).json()
    assert people["commit"] == document["commit"] and people["rows"][0] == {"p.name": "Grace", "p.age": 52}
    logic = served.client.post("/branches/main/query", json={"query": LOGIC, "params": {"max": 30}})
    assert logic.status_code == 200, logic.text
    assert logic.json()["rows"] == [{"p.name": "Bob"}]  # Eve works nowhere; Dave's unknown age is not under 30
    chained = error_of(
        served.client.post("/branches/main/query", json={"query": LOGIC.replace("$p.age < $max", "1 < $p.age < 9")}), 400, "bad_request"
    )
    assert chained["details"] == {"line": 1, "column": 71, "token": "<"} and "comparisons do not chain" in chained["message"]
    syntax = error_of(served.client.post("/branches/main/query", json={"query": "query q() { match { $p: } }"}), 400, "bad_request")
    assert syntax["details"] == {"line": 1, "column": 25, "token": "}"}
    mutation = error_of(served.client.post("/branches/main/query", json={"query": ADD}), 400, "bad_request")
    assert "omnigraph mutate" in mutation["message"]
    error_of(_ask(served, "friends"), 400, "bad_request")  # a missing required parameter
    error_of(_ask(served, "friends", params={"name": 7}), 400, "bad_request")
    error_of(_ask(served, "friends", params={"name": "Alice"}, limit=3), 400, "bad_request")  # unknown body field
    error_of(_ask(served, "people", branch="nope"), 404, "not_found")
    error_of(_ask(served, "people", at="01UNKNOWNCOMMIT"), 404, "not_found")
    ties = _ask(served, "ties").json()["rows"]  # a bound edge: one row per edge, each way
    assert ties == [
        {"b.name": "Bob", "k.since": "2019-06-01"},
        {"b.name": "Bob", "k.since": "2019-06-01"},
        {"b.name": "Carol", "k.since": None},
    ]
    some = _ask(served, "some").json()["rows"]  # any 2 rows: the search stops after hop 1, which reports Bob and Carol
    assert sorted(row["b.name"] for row in some) == ["Bob", "Carol"]
    refused = served.client.post("/branches/main/mutate", json={"query": READS, "name": "people"})
    assert "omnigraph query" in error_of(refused, 400, "bad_request")["message"]
    plan = served.client.post("/branches/main/explain", json={"query": READS, "name": "friends", "params": {"name": "Alice"}})
    assert plan.status_code == 200, plan.text
    assert plan.json()["commit"] == document["commit"] and plan.json()["variables"][0]["id_lookup"] == "Alice"
    error_of(served.client.post("/branches/nope/explain", json={"query": READS, "name": "people"}), 404, "not_found")


def test_concurrent_readers_during_writes_see_only_committed_states(served: Server) -> None:
    done = threading.Event()
    seen: list[tuple[str, list[dict[str, Any]]]] = []

    def reader() -> None:
        while not done.is_set():
            response = _ask(served, "friends", params={"name": "Alice"})
            assert response.status_code == 200, response.text
            seen.append((response.json()["commit"], response.json()["rows"]))

    with ThreadPoolExecutor(READERS) as pool:
        readers = [pool.submit(reader) for _ in range(READERS)]
        commits = []
        try:
            for index in range(WRITES):
                written = served.client.post(
                    "/branches/main/mutate", json={"query": ADD, "params": {"name": f"W{index}", "age": 60 + index}}
                )
                assert written.status_code == 200, written.text
                commits.append(written.json()["commit"])
        finally:
            done.set()
        for future in readers:
            future.result()
    distinct = {commit for commit, _ in seen}
    assert len(distinct) >= 2, "the readers never overlapped a write"
    history = {c["commit_id"] for c in served.client.get("/branches/main/commits").json()["commits"]}
    assert set(commits) <= history and distinct <= history
    at_commit = {commit: _ask(served, "friends", params={"name": "Alice"}, at=commit).json()["rows"] for commit in distinct}
    for commit, rows in seen:
        assert rows == at_commit[commit], commit
    for index, commit in enumerate(commits):
        expected = [{"n": 3 + index, "oldest": 60 + index}]
        assert _ask(served, "friends", params={"name": "Alice"}, at=commit).json()["rows"] == expected
