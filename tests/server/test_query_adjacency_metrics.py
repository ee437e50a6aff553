"""A server worker keeps the adjacency of an edge table across requests, and ``/metrics`` says so:
one real ``omnigraph serve`` process (one worker) answers the same variable-length traversal three
times. The first request builds the adjacency; the second finds it, and builds the id index and
columns of the person table its probes read by id (on their second read); the third builds
nothing and finds everything in its cache.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.graph_helpers import make_example_graph
from tests.support.serve_helpers import Server, start_fenced

WALK = "query walk() { match { $a: Person  $a knows{1,3} $b } return { $a.name, $b.name } order { $a.name, $b.name } }"


def _adjacency_samples(server: Server) -> dict[str, float]:
    scraped = server.client.get("/metrics")
    assert scraped.status_code == 200, scraped.text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
        if sample.name.startswith("omnigraph_query_adjacency_") and not sample.name.endswith("_created")
    }


def test_a_worker_reuses_the_adjacency_across_requests(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    server = start_fenced(uri)
    try:
        assert _adjacency_samples(server) == {
            "omnigraph_query_adjacency_entries": 0.0,
            "omnigraph_query_adjacency_bytes": 0.0,
            "omnigraph_query_adjacency_hits_total": 0.0,
            "omnigraph_query_adjacency_builds_total": 0.0,
            "omnigraph_query_adjacency_evictions_total": 0.0,
        }
        answers, samples = [], []
        for _ in range(3):
            answers.append(server.client.post("/branches/main/query", json={"query": WALK}))
            samples.append(_adjacency_samples(server))
    finally:
        assert server.stop() == 0
    assert all(answer.status_code == 200 for answer in answers), answers[0].text
    assert answers[0].json()["rows"] == answers[1].json()["rows"] == answers[2].json()["rows"] != []
    builds = [sample["omnigraph_query_adjacency_builds_total"] for sample in samples]
    hits = [sample["omnigraph_query_adjacency_hits_total"] for sample in samples]
    assert builds[0] == 1 and builds[1] > builds[0] and builds[2] == builds[1], builds  # the adjacency; then the person table's
    assert hits[0] == 0 and hits[2] > hits[1] >= 1, hits
    assert samples[2]["omnigraph_query_adjacency_entries"] == builds[2] and samples[2]["omnigraph_query_adjacency_bytes"] > 0
    assert samples[2]["omnigraph_query_adjacency_evictions_total"] == 0
