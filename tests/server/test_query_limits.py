"""A read query cannot take a server down: one real ``omnigraph serve`` process with a 2 s query
time limit, on a chain of Person nodes whose unbounded traversal runs far longer than that (~20 s)
when searched in DuckDB, one edge scan per hop (the server runs without an adjacency cache,
``OMNIGRAPH_QUERY_ADJACENCY_MB=0``: over the adjacency the same search takes milliseconds).

A huge ``limit`` is a 400 with line:column and no SQL; the traversal is stopped at the limit (408
``timeout``); 45 such queries in flight do not delay ``/healthz`` or ``/readyz``, which are
answered outside the query pool; and a query whose client hangs up is cancelled at once (the
access log says ``cancelled``, not ``timeout``), including those still waiting for a thread.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.graph_helpers import make_chain_graph
from tests.support.serve_helpers import Server, error_of, start_fenced

CHAIN = 600
LONG = "query walk() { match { $a: Person  $a knows{1,1000000000} $b } return { count($b) as n } }"
TIMEOUT_S = 2
FLOOD = 45


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    uri = str(tmp_path_factory.mktemp("limits") / "graph")
    make_chain_graph(uri, CHAIN)
    server = start_fenced(uri, env={"OMNIGRAPH_QUERY_TIMEOUT_S": str(TIMEOUT_S), "OMNIGRAPH_QUERY_ADJACENCY_MB": "0"})
    try:
        yield server
    finally:
        server.stop()


def _ask(server: Server, query: str) -> httpx.Response:
    return server.client.post("/branches/main/query", json={"query": query})


def _log_lines(server: Server) -> list[dict[str, object]]:
    return [json.loads(line) for line in server.output().splitlines() if line.startswith('{"time"')]


def test_a_huge_limit_is_a_400_without_sql(served: Server) -> None:
    huge = "query q() { match { $p: Person } return { $p.name } limit 99999999999999999999999999 }"
    error = error_of(_ask(served, huge), 400, "bad_request")
    assert error["details"]["line"] == 1 and error["details"]["column"] == 59
    assert "limit is at most 9223372036854775807" in error["message"]
    assert "SELECT" not in json.dumps(error)


def test_an_unbounded_traversal_stops_at_the_time_limit(served: Server) -> None:
    started = time.monotonic()
    error = error_of(_ask(served, LONG), 408, "timeout")
    assert error["details"] == {"timeout_seconds": TIMEOUT_S}
    assert "OMNIGRAPH_QUERY_TIMEOUT_S" in error["message"]
    assert time.monotonic() - started < TIMEOUT_S + 2


def _send_query(port: int) -> socket.socket:
    body = json.dumps({"query": LONG}).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    head = f"POST /branches/main/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    sock.sendall(head.encode() + body)
    return sock


def test_probes_are_answered_during_a_flood_of_queries_which_stop_when_their_clients_hang_up(served: Server) -> None:
    port = int(served.base_url.rsplit(":", 1)[1])
    probe = served.new_client(None)
    timeouts = [line for line in _log_lines(served) if line["error"] == "timeout"]
    socks = [_send_query(port) for _ in range(FLOOD)]
    time.sleep(0.3)  # the query threads are busy and the other queries wait for one
    probes = []
    for path in ("/healthz", "/readyz") * 2:
        started = time.monotonic()
        response = probe.get(path)
        probes.append((path, response.status_code, time.monotonic() - started))
    for sock in socks:
        sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            sock.recv(1)  # no answer yet: every query is still in flight
        sock.close()
    assert [status for _, status, _ in probes] == [200] * 4
    assert all(seconds < 1.0 for _, _, seconds in probes), probes  # before: not until a query thread was free, after 2 s
    deadline = time.monotonic() + 30
    while len(cancelled := [line for line in _log_lines(served) if line["error"] == "cancelled"]) < FLOOD:
        assert time.monotonic() < deadline, served.output()
        time.sleep(0.05)
    assert {line["route"] for line in cancelled} == {"/branches/{branch}/query"}
    assert [line for line in _log_lines(served) if line["error"] == "timeout"] == timeouts  # stopped before the time limit
