"""A bounded load test: 8 clients, 2,000 mixed requests against a real ``omnigraph serve --workers 2``.

Local only (the S3 server on loopback is the bottleneck there, not the server under test; the HTTP
contract runs on both backends in test_serve_http). Bounded: a few thousand small requests.
"""

from __future__ import annotations

import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.graph_helpers import jsonl, make_example_graph, person, record_key
from tests.serve_helpers import start_fenced

CLIENTS = 8
REQUESTS_PER_CLIENT = 250
SHARED = 7
READS = ["/healthz", "/readyz", "/version", "/branches", "/branches/main/snapshot"]


def _client_run(base_url: str, client_id: int) -> list[tuple[str, str, int, str]]:
    """(kind, key, status, error code) per request of one client."""
    outcomes = []
    with httpx.Client(base_url=base_url, timeout=120.0) as client:
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


def test_mixed_load_loses_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    server = start_fenced(uri, workers=2)
    try:
        with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            runs = list(pool.map(lambda c: _client_run(server.base_url, c), range(CLIENTS)))
        outcomes = [outcome for run in runs for outcome in run]
        assert len(outcomes) == CLIENTS * REQUESTS_PER_CLIENT
        by_kind = Counter((kind, status, code) for kind, _, status, code in outcomes)
        unexpected = {
            k: n for k, n in by_kind.items()
            if not ((k[0] in ("insert", "upsert", "read", "export") and k[1] == 200)
                    or k == ("conflict", 409, "key_conflict"))
        }
        assert unexpected == {}, by_kind
        exported = server.client.get("/branches/main/export").text.splitlines()
    finally:
        server.stop()
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
