"""The HTTP contract of ``omnigraph serve`` through a real uvicorn process on 127.0.0.1 (httpx),
and locally a bounded load: 8 clients, 2,000 mixed requests.

One server (two worker processes, so concurrent requests really cross processes) per backend
serves one example graph for every check; the checks write disjoint rows so that they can share it.
The server runs with a tokens file; the checks call it with a token holding every grant but
``impersonate`` (the grants themselves are checked in test_serve_auth).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from omnigraph.engine.access.fleet import list_records
from omnigraph.engine.door import table_store
from omnigraph.engine.storage.lance_io import open_dataset
from omnigraph.engine.storage.store import open_store
from omnigraph.server.grants import Grant
from tests.conftest import new_root
from tests.support.graph_helpers import (
    OMNIGRAPH,
    export_text,
    invoke,
    jsonl,
    knows,
    make_example_graph,
    person,
    record_key,
    snapshot,
)
from tests.support.raw_http import connect, head, read_response
from tests.support.serve_helpers import NDJSON, Server, error_of, start_fenced, write_tokens

LIMIT = 8192


@pytest.fixture
def served(backend: str, tmp_path: Path) -> Iterator[Server]:
    """The example graph served by ``omnigraph serve --workers 2`` on the parametrised backend."""
    uri = new_root(backend, tmp_path)
    make_example_graph(uri)
    tokens = write_tokens(tmp_path, {"contract": [g for g in Grant if g != Grant.IMPERSONATE]})
    server = start_fenced(uri, workers=2, tokens=tokens.path, token=tokens.by_actor["contract"])
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_http_contract(served: Server, backend: str) -> None:
    """Every endpoint and error status against one server process pair (the checks share the
    graph and write disjoint rows; one test so that a parallel run starts one server per backend).
    Locally it ends with the bounded mixed load (on S3 the loopback S3 server, not the server
    under test, would be the bottleneck)."""
    for check in CHECKS + (LOCAL_CHECKS if backend == "local" else []):
        try:
            check(served)
        except AssertionError as failure:
            raise AssertionError(f"{check.__name__}: {failure}") from failure


def _health_version_docs_and_fleet_record(served: Server) -> None:
    client = served.client
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["writable"] is True and ready.json()["format"] == "5", ready.text
    assert client.get("/version").json() == {"program": "omnigraph", "version": "0.1.0", "format": "5"}
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/branches/{branch}/load", "/branches/{branch}/export", "/branches/{branch}/mutate", "/readyz"):
        assert path in paths, sorted(paths)
    records = [r for r in list_records(open_store(served.graph)) if r.role == "server"]
    assert len(records) == 2, records  # one per worker process
    assert {(r.program, r.writes_format, r.address) for r in records} == {("omnigraph", "5", served.base_url)}
    assert len({r.pid for r in records}) == 2


def _reads_match_the_cli(served: Server) -> None:
    client = served.client
    assert client.get("/branches/main/snapshot").json() == snapshot(served.graph)
    exported = client.get("/branches/main/export")
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    assert exported.text == export_text(served.graph)
    only = client.get("/branches/main/export", params=[("type", "Company"), ("type", "Knows")]).text
    assert only == export_text(served.graph, types=["Company", "Knows"])
    chunks = _export_chunk_sizes(served)
    assert len(chunks) == 1 and chunks[0] == len(exported.content), chunks  # sent in blocks, not a line per send
    commits = client.get("/branches/main/commits").json()
    cli = invoke(OMNIGRAPH, "commit", "list", "--json", served.graph).ok().json()
    assert commits == cli
    assert next(b["name"] for b in client.get("/branches").json()["branches"]) == "main"


def _export_chunk_sizes(served: Server) -> list[int]:
    """The HTTP chunk sizes of ``GET /branches/main/export`` (raw, ``Transfer-Encoding: chunked``)."""
    port = int(served.base_url.rsplit(":", 1)[1])
    with connect(port) as sock:
        sock.sendall(head("GET", "/branches/main/export", port, authorization=f"Bearer {served.token}", connection="close"))
        response = read_response(sock, timeout=30)
    assert response.status == 200 and response.headers.get("transfer-encoding") == "chunked", response.headers
    sizes, rest = [], response.body
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return sizes
        sizes.append(size)
        rest = rest[size + 2 :]


def _read_errors(served: Server) -> None:
    client = served.client
    error_of(client.get("/branches/nope/snapshot"), 404, "not_found")
    error_of(client.get("/branches/nope/commits"), 404, "not_found")
    error_of(client.get("/branches/nope/export"), 404, "not_found")
    unknown = error_of(client.get("/branches/main/export", params={"type": "Nope"}), 400, "bad_request")
    assert unknown["details"] == {"unknown": ["Nope"]}
    error_of(client.get("/no/such/endpoint"), 404, "not_found")


def _branch_lifecycle_and_errors(served: Server) -> None:
    client = served.client
    created = client.post("/branches", json={"name": "http-feat", "from": "main"})
    assert created.status_code == 201, created.text
    assert created.json()["name"] == "http-feat" and created.json()["parent_branch"] == "main"
    error_of(client.post("/branches", json={"name": "http-feat"}), 409, "branch_exists")
    error_of(client.post("/branches", json={"name": "x", "from": "nope"}), 404, "not_found")
    error_of(client.post("/branches", json={"name": "bad..name"}), 400, "bad_request")
    error_of(client.post("/branches", json={"nom": "x"}), 400, "bad_request")
    error_of(client.post("/branches", content=b"{not json", headers={"content-type": "application/json"}), 400, "bad_request")
    names = [b["name"] for b in client.get("/branches").json()["branches"]]
    assert "http-feat" in names
    assert served.load([person("BranchOnly", 1)], branch="http-feat").status_code == 200
    assert "BranchOnly" in client.get("/branches/http-feat/export", params={"type": "Person"}).text
    assert "BranchOnly" not in client.get("/branches/main/export", params={"type": "Person"}).text
    merged = client.post("/branches/http-feat/merge", json={"into": "main"})
    assert merged.status_code == 200, merged.text
    assert merged.json()["outcome"] == "fast_forward" and merged.json()["changes"] == {
        "node:Person": {"inserted": 1, "updated": 0, "deleted": 0}
    }, merged.json()
    assert "BranchOnly" in client.get("/branches/main/export", params={"type": "Person"}).text
    # both sides change one id differently: 409 merge_conflict with the list, nothing written
    assert client.post("/branches", json={"name": "http-side"}).status_code == 201
    assert served.load([person("BranchOnly", 2)], mode="merge", branch="http-side").status_code == 200
    assert served.load([person("BranchOnly", 3)], mode="merge").status_code == 200
    before = client.get("/branches/main/export").text
    conflict = error_of(client.post("/branches/http-side/merge", json={"into": "main"}), 409, "merge_conflict")
    assert conflict["details"]["conflicts"] == [{"table_key": "node:Person", "id": "BranchOnly", "kind": "divergent_update"}], conflict
    assert client.get("/branches/main/export").text == before
    error_of(client.post("/branches/nope/merge", json={"into": "main"}), 404, "not_found")
    error_of(client.post("/branches/main/merge", json={"into": "main"}), 400, "bad_request")
    assert client.delete("/branches/http-side").json() == {"deleted": "http-side"}
    assert client.delete("/branches/http-feat").json() == {"deleted": "http-feat"}
    error_of(client.delete("/branches/http-feat"), 404, "not_found")
    error_of(client.delete("/branches/main"), 400, "bad_request")


def _load_modes_and_errors(served: Server) -> None:
    client = served.client
    added = served.load([person("Http1", 1), person("Http2", 2), knows("Http1", "Http2", "k-http-1")])
    assert added.status_code == 200, added.text
    body = added.json()
    assert body["mode"] == "append" and len(body["commits"]) == 1
    assert body["rows"] == {"edge:Knows": 1, "node:Person": 2}
    new = {"inserted": 2, "updated": 0, "unchanged": 0, "deleted": 0}
    assert body["changes"] == {"edge:Knows": {**new, "inserted": 1}, "node:Person": new}
    conflict = error_of(served.load([person("Http1", 5)]), 409, "key_conflict")
    assert conflict["details"] == {"entity_kind": "node", "type_name": "Person", "entity_id": "Http1"}
    updated = served.load([person("Http1", 7), person("Http2", 2)], mode="merge").json()
    assert updated["changes"] == {"node:Person": {"inserted": 0, "updated": 1, "unchanged": 1, "deleted": 0}}
    again = served.load(['{"edge": "Knows", "from": "Http2", "to": "Http1"}'], mode="merge").json()
    assert again["changes"]["edge:Knows"]["inserted"] == 1 and len(again["commits"]) == 1
    rerun = served.load(['{"edge": "Knows", "from": "Http2", "to": "Http1"}'], mode="merge").json()  # an id-less edge is not added twice
    assert rerun["changes"]["edge:Knows"] == {"inserted": 0, "updated": 0, "unchanged": 1, "deleted": 0}
    people = [json.loads(line) for line in client.get("/branches/main/export", params={"type": "Person"}).text.splitlines()]
    assert [p["data"]["age"] for p in people if p["data"]["name"] == "Http1"] == [7]
    bad = error_of(served.load(['{"type": "Person", "data": {"name": 3}}']), 400, "bad_request")
    assert bad["details"]["line"] == 1
    too_many = error_of(served.load([person(f"big{i}") for i in range(LIMIT + 1)]), 413, "resource_limit")
    assert {k: too_many["details"][k] for k in ("resource", "limit", "actual")} == {"resource": "rows", "limit": LIMIT, "actual": LIMIT + 1}
    error_of(client.post("/branches/main/load", params={"mode": "upsert"}, content=b""), 400, "bad_request")
    error_of(client.post("/branches/main/load", content=b""), 400, "bad_request")
    error_of(served.load([person("Nowhere")], branch="nope"), 404, "not_found")
    # overwrite replaces the tables present in the body, here Tag only
    tags = ['{"type": "Tag", "data": {"id": "t-http", "label": "http"}}']
    replaced = client.post("/branches/main/load", params={"mode": "overwrite"}, content=("\n".join(tags) + "\n").encode(), headers=NDJSON)
    assert replaced.status_code == 200 and replaced.json()["rows"] == {"node:Tag": 1}, replaced.text
    exported_tags = client.get("/branches/main/export", params={"type": "Tag"}).text.splitlines()
    assert [json.loads(line) for line in exported_tags] == [{"type": "Tag", "data": {"id": "t-http", "label": "http"}}]
    assert client.get("/branches/main/export").text == export_text(served.graph)


def _mutate(served: Server) -> None:
    client = served.client
    source = "query put($name: String, $age: I32) { insert Person { name: $name, age: $age } }"
    done = client.post("/branches/main/mutate", json={"query": source, "params": {"name": "Gq1", "age": 40}})
    assert done.status_code == 200, done.text
    assert done.json()["affected_nodes"] == 1 and done.json()["commit"]
    head = client.get("/branches/main/commits").json()["commits"][0]["commit_id"]
    assert head == done.json()["commit"]
    stale = error_of(
        client.post("/branches/main/mutate", json={"query": source, "params": {"name": "Gq2", "age": 1}}, headers={"If-Match": "01STALE"}),
        412,
        "precondition_failed",
    )
    assert stale["details"]["expected"] == "01STALE", stale
    matched = client.post("/branches/main/mutate", json={"query": source, "params": {"name": "Gq2", "age": 1}}, headers={"If-Match": head})
    assert matched.status_code == 200, matched.text
    people = client.get("/branches/main/export", params={"type": "Person"}).text
    assert '"Gq1"' in people and '"Gq2"' in people
    # the body field `if_commit` says the same as If-Match; a stale one writes nothing
    head = matched.json()["commit"]
    third = {"query": source, "params": {"name": "Gq3", "age": 1}}
    stale_body = error_of(
        client.post("/branches/main/mutate", json={**third, "if_commit": done.json()["commit"]}), 412, "precondition_failed"
    )
    assert stale_body["details"] == {"expected": done.json()["commit"], "actual": head}, stale_body
    both = {**third, "if_commit": head}
    error_of(client.post("/branches/main/mutate", json=both, headers={"If-Match": "01OTHER"}), 400, "bad_request")
    assert client.get("/branches/main/export", params={"type": "Person"}).text == people
    assert client.get("/branches/main/commits").json()["commits"][0]["commit_id"] == head
    by_body = client.post("/branches/main/mutate", json=both, headers={"If-Match": head})
    assert by_body.status_code == 200 and by_body.json()["commit"], by_body.text
    nothing = client.post("/branches/main/mutate", json={"query": 'query r() { delete Person where name = "nobody" }'})
    assert nothing.status_code == 200 and nothing.json()["commit"] is None, nothing.text
    error_of(client.post("/branches/main/mutate", json={"query": "query broken( {"}), 400, "bad_request")
    error_of(client.post("/branches/main/mutate", json={"query": source, "params": {"name": "x"}}), 400, "bad_request")
    error_of(client.post("/branches/nope/mutate", json={"query": source, "params": {"name": "x", "age": 1}}), 404, "not_found")
    error_of(client.post("/branches/main/mutate", json={}), 400, "bad_request")


def _sixteen_concurrent_strict_inserts_of_one_id(served: Server) -> None:
    def insert(_: int) -> tuple[int, dict]:
        response = served.load([person("Racer", 30)])
        return response.status_code, response.json()

    with ThreadPoolExecutor(max_workers=16) as pool:
        outcomes = list(pool.map(insert, range(16)))
    statuses = sorted(status for status, _ in outcomes)
    assert statuses == [200] + [409] * 15, outcomes
    for status, body in outcomes:
        if status == 409:
            assert body["error"]["code"] == "key_conflict" and body["error"]["details"]["entity_id"] == "Racer", body
    lines = served.client.get("/branches/main/export", params={"type": "Person"}).text.splitlines()
    assert sum(1 for line in lines if json.loads(line)["data"]["id"] == "Racer") == 1


def _out_of_band_commit_is_table_drift(served: Server) -> None:
    """A table's rows changed outside the engine: writes to it are 503 ``table_drift`` naming the
    commands, reads and other tables keep working, and the named ``revert`` resolves it, run as
    printed on the server with its root for ``GRAPH`` (an HTTP error never names the root)."""
    entry = next(t for t in snapshot(served.graph)["tables"] if t["table_key"] == "node:Company")
    store = open_store(served.graph)
    dataset = open_dataset(store, entry["path"])
    table_store.upsert(dataset, pa.table({"id": ["Rogue"], "name": ["Rogue"]}, schema=dataset.schema))
    company = ['{"type": "Company", "data": {"name": "Acme2"}}']
    error = error_of(served.load(company), 503, "table_drift")
    assert error["details"]["table_key"] == "node:Company"
    assert served.client.get("/branches/main/snapshot").status_code == 200
    assert served.load([person("AfterRogue")]).status_code == 200  # other tables still take writes
    revert = error["details"]["commands"]["revert"].split()
    assert revert[:3] == ["omnigraph", "drift", "revert"] and "GRAPH" in revert, revert
    assert served.graph not in json.dumps(error), error
    revert = [served.graph if word == "GRAPH" else word for word in revert]
    invoke(OMNIGRAPH, *revert[1:]).ok()
    assert served.load(company).status_code == 200


def _export_keys_are_unique(served: Server) -> None:
    keys = [record_key(line) for line in served.client.get("/branches/main/export").text.splitlines()]
    assert len(keys) == len(set(keys))


CLIENTS = 8
REQUESTS_PER_CLIENT = 250
SHARED = 7
READS = ["/healthz", "/readyz", "/version", "/branches", "/branches/main/snapshot"]


def _client_run(server: Server, client_id: int) -> list[tuple[str, str, int, str]]:
    """(kind, key, status, error code) per request of one client."""
    outcomes = []
    with server.new_client(server.token, **NDJSON) as client:
        for i in range(REQUESTS_PER_CLIENT):
            if i % 20 == 0:
                name = f"load-{client_id}-{i}"
                response = client.post("/branches/main/load", params={"mode": "append"}, content=jsonl([person(name, i)]))
                kind, key = "insert", name
            elif i % 40 == 5:
                name = f"shared-{i % SHARED}"
                response = client.post("/branches/main/load", params={"mode": "merge"}, content=jsonl([person(name, i)]))
                kind, key = "upsert", f"{name}={i}"
            elif i % 40 == 15:
                response = client.post("/branches/main/load", params={"mode": "append"}, content=jsonl([person("Alice")]))
                kind, key = "conflict", "Alice"
            elif i % 50 == 7:
                response = client.get("/branches/main/export", params={"type": "Person"})
                kind, key = "export", ""
            else:
                path = READS[i % len(READS)]
                response = client.get(path)
                kind, key = "read", path
            code = response.json().get("error", {}).get("code", "") if response.status_code >= 400 else ""
            outcomes.append((kind, key, response.status_code, code))
    return outcomes


def _mixed_load_loses_nothing(server: Server) -> None:
    """8 clients, 2,000 mixed requests: no unexpected status, every accepted write exported."""
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        runs = list(pool.map(lambda c: _client_run(server, c), range(CLIENTS)))
    outcomes = [outcome for run in runs for outcome in run]
    assert len(outcomes) == CLIENTS * REQUESTS_PER_CLIENT
    by_kind = Counter((kind, status, code) for kind, _, status, code in outcomes)
    unexpected = {
        k: n
        for k, n in by_kind.items()
        if not ((k[0] in ("insert", "upsert", "read", "export") and k[1] == 200) or k == ("conflict", 409, "key_conflict"))
    }
    assert unexpected == {}, by_kind
    exported = server.client.get("/branches/main/export").text.splitlines()
    keys = [record_key(line) for line in exported]
    assert len(keys) == len(set(keys)), "duplicate ids in the export"
    people = {json.loads(line)["data"]["name"]: json.loads(line)["data"] for line in exported if '"Person"' in line}
    inserted = [key for kind, key, status, _ in outcomes if kind == "insert" and status == 200]
    assert len(inserted) == CLIENTS * len(range(0, REQUESTS_PER_CLIENT, 20))
    missing = [name for name in inserted if name not in people]
    assert missing == [], missing
    upserted: dict[str, set[int]] = {}
    for kind, key, status, _ in outcomes:
        if kind == "upsert" and status == 200:
            name, age = key.split("=")
            upserted.setdefault(name, set()).add(int(age))
    for name, ages in upserted.items():
        assert people[name]["age"] in ages, (name, people[name], ages)


CHECKS = [
    _health_version_docs_and_fleet_record,
    _reads_match_the_cli,
    _read_errors,
    _branch_lifecycle_and_errors,
    _load_modes_and_errors,
    _mutate,
    _sixteen_concurrent_strict_inserts_of_one_id,
    _out_of_band_commit_is_table_drift,
    _export_keys_are_unique,
]
LOCAL_CHECKS = [_mixed_load_loses_nothing]
