"""What a server tells its operator (real server processes on 127.0.0.1): the JSON access log and
the Prometheus metrics after a scripted sequence of requests (two workers, so the metrics are the
sum over processes), the recovery counter, and a SIGTERM that exits 0 once in-flight requests
have finished, with one worker or two.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.server.grants import Grant
from tests.support.graph_helpers import ACTOR, OMNIGRAPH, export_text, make_example_graph, person, run_cli, write_jsonl
from tests.support.serve_helpers import NDJSON, Server, error_of, start_fenced, write_tokens

LOG_FIELDS = ["time", "method", "path", "route", "status", "duration_ms", "actor", "commit", "error", "client"]


def access_log(server: Server) -> list[dict]:
    return [json.loads(line) for line in server.output().splitlines() if line.startswith('{"time"')]


def samples(server: Server, token: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``: (name, sorted labels) -> value."""
    with server.new_client(token) as client:
        scraped = client.get("/metrics")
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain"), scraped.text
    found = {}
    for family in text_string_to_metric_families(scraped.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_access_log_and_metrics_after_a_scripted_sequence(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    tokens = write_tokens(tmp_path, {"reader": [Grant.READ], "writer": [Grant.READ, Grant.WRITE]})
    server = start_fenced(uri, workers=2, tokens=tokens.path)
    try:
        reader, writer = server.new_client(tokens.by_actor["reader"]), server.new_client(tokens.by_actor["writer"])
        anyone = server.new_client(None)
        assert anyone.get("/healthz").status_code == 200
        error_of(anyone.get("/branches"), 401, "unauthorized")
        assert reader.get("/branches").status_code == 200
        queried = reader.post("/branches/main/query", json={"query": "query people() { match { $p: Person } return { $p.name } }"})
        assert queried.status_code == 200 and "commit" in queried.json(), queried.text  # names the commit it read
        loaded = writer.post("/branches/main/load", params={"mode": "append"}, content=f"{person('Logged')}\n".encode(), headers=NDJSON)
        assert loaded.status_code == 200, loaded.text
        error_of(
            writer.post("/branches/main/load", params={"mode": "append"}, content=f"{person('Logged')}\n".encode(), headers=NDJSON),
            409,
            "key_conflict",
        )
        mutated = writer.post("/branches/main/mutate", json={"query": 'query q() { insert Person { name: "Gq" } }'})
        assert mutated.status_code == 200, mutated.text
        error_of(reader.post("/branches", json={"name": "no"}), 403, "forbidden")
        error_of(anyone.get("/nowhere"), 404, "not_found")
        found = samples(server, tokens.by_actor["reader"])
        for client in (reader, writer, anyone):
            client.close()
    finally:
        assert server.stop() == 0

    load, mutate, query = "/branches/{branch}/load", "/branches/{branch}/mutate", "/branches/{branch}/query"
    lines = access_log(server)
    health_checks = sum(1 for line in lines if line["path"] == "/healthz")  # also the start-up wait's
    assert health_checks >= 1
    expected_requests = {
        ("GET", "/healthz", "200"): health_checks,
        ("GET", "/branches", "401"): 1,
        ("GET", "/branches", "200"): 1,
        ("POST", query, "200"): 1,
        ("POST", load, "200"): 1,
        ("POST", load, "409"): 1,
        ("POST", mutate, "200"): 1,
        ("POST", "/branches", "403"): 1,
        ("GET", "unmatched", "404"): 1,
    }
    requests = {
        tuple(dict(labels)[k] for k in ("method", "route", "status")): value
        for (name, labels), value in found.items()
        if name == "omnigraph_http_requests_total"
    }
    assert requests == expected_requests, requests
    assert found[("omnigraph_http_request_duration_seconds_count", (("method", "POST"), ("route", load)))] == 2
    commits = {dict(labels)["route"]: value for (name, labels), value in found.items() if name == "omnigraph_commits_total"}
    assert commits == {load: 1, mutate: 1}, commits  # a read query names the commit it read: not a commit
    reads = {dict(labels)["route"]: value for (name, labels), value in found.items() if name == "omnigraph_reads_total"}
    assert reads == {"/branches": 1, query: 1}, reads
    assert found[("omnigraph_conflicts_total", (("code", "key_conflict"),))] == 1
    errors = {dict(labels)["code"]: value for (name, labels), value in found.items() if name == "omnigraph_http_errors_total"}
    assert errors == {"unauthorized": 1, "key_conflict": 1, "forbidden": 1, "not_found": 1}, errors
    assert found[("omnigraph_format_stamp", (("stamp", "5"),))] == 1
    assert found[("omnigraph_build_info", (("program", "omnigraph"), ("version", "0.1.0")))] == 1
    assert found[("omnigraph_http_requests_in_flight", ())] == 1  # the scrape itself

    assert all(list(line) == LOG_FIELDS for line in lines), lines[:2]
    assert all(line["client"] == "127.0.0.1" and line["duration_ms"] >= 0 for line in lines)
    seen = Counter(
        (line["method"], line["path"], line["route"], line["status"], line["actor"], line["error"], line["commit"]) for line in lines
    )
    assert seen == Counter(
        {
            ("GET", "/healthz", "/healthz", 200, None, None, None): health_checks,
            ("GET", "/branches", "/branches", 401, None, "unauthorized", None): 1,
            ("GET", "/branches", "/branches", 200, "reader", None, None): 1,
            ("POST", "/branches/main/query", query, 200, "reader", None, None): 1,
            ("POST", "/branches/main/load", load, 200, "writer", None, loaded.json()["commits"][-1]): 1,
            ("POST", "/branches/main/load", load, 409, "writer", "key_conflict", None): 1,
            ("POST", "/branches/main/mutate", mutate, 200, "writer", None, mutated.json()["commit"]): 1,
            ("POST", "/branches", "/branches", 403, "reader", "forbidden", None): 1,
            ("GET", "/nowhere", None, 404, None, "not_found", None): 1,
            ("GET", "/metrics", "/metrics", 200, "reader", None, None): 1,
        }
    ), seen
    for token in tokens.by_actor.values():
        assert token not in server.output()


def test_recoveries_are_counted(tmp_path: Path) -> None:
    """A CLI load killed after its effect leaves an intent; the server's first write opens the
    graph read-write, resolves it, and counts it."""
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    data = write_jsonl(tmp_path, "p.jsonl", [person("Crashed")])
    crashed = run_cli(
        OMNIGRAPH, "load", "--mode", "append", "--data", data, uri, env={FAILPOINT_ENV: "write.after_effect", "OMNIGRAPH_ACTOR": ACTOR}
    )
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.describe()
    tokens = write_tokens(tmp_path, {"ops": [Grant.READ, Grant.WRITE]})
    server = start_fenced(uri, tokens=tokens.path, token=tokens.by_actor["ops"])
    try:
        assert server.load([person("After")]).status_code == 200
        found = samples(server, tokens.by_actor["ops"])
    finally:
        server.stop()
    recovered = {dict(labels)["outcome"]: value for (name, labels), value in found.items() if name == "omnigraph_recoveries_total"}
    assert sum(recovered.values()) == 1 and set(recovered) <= {"published", "rolled_back"}, recovered


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_exits_0_after_in_flight_requests_finish(tmp_path: Path, workers: int) -> None:
    """The request's body is half sent when SIGTERM arrives and the rest only afterwards: the
    load still succeeds, then the process exits 0."""
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    server = start_fenced(uri, workers=workers)
    signalled = threading.Event()
    outcome: dict[str, httpx.Response] = {}

    def body() -> Iterator[bytes]:
        yield f"{person('BeforeTerm')}\n".encode()
        assert signalled.wait(timeout=30)
        time.sleep(0.5)
        yield f"{person('AfterTerm')}\n".encode()

    def in_flight() -> None:
        with server.new_client(None, **NDJSON) as client:
            outcome["load"] = client.post("/branches/main/load", params={"mode": "append"}, content=body())

    worker = threading.Thread(target=in_flight)
    worker.start()
    time.sleep(0.5)
    server.process.send_signal(signal.SIGTERM)
    signalled.set()
    worker.join(timeout=60)
    status = server.process.wait(timeout=60)
    server.stop()
    assert status == 0, server.output()
    assert outcome["load"].status_code == 200 and outcome["load"].json()["rows"] == {"node:Person": 2}, outcome["load"].text
    people = export_text(uri, types=["Person"])
    assert '"BeforeTerm"' in people and '"AfterTerm"' in people
    assert "Traceback" not in server.output()
