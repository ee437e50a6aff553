"""The attacks of a caller on the same host, refused (real server processes on 127.0.0.1 only).

* Browser-borne writes: a ``text/plain``, form or untyped body, or a foreign ``Origin``, and a
  ``Host`` that is not the server's (DNS rebinding): refused, nothing written.
* Bodies: a declared ``Content-Length`` over 64 MiB is 413 before a byte is read; a chunked body
  that grows past the limit is 413 once it has been drained (discarded) to 64 MiB; the server's
  peak RSS stays bounded (printed).
* Stalled clients: 1,100 uploads that announce a body and never send it, and 100 clients that
  never finish their request head, while ``/healthz`` answers within 1 s throughout; the uploads
  get 408 at the body timeout and the heads are closed at the header timeout; beyond
  ``--max-connections`` a request is answered 503 at once.
* A load body is parsed before the write lock: a 30 MiB load ending in a bad line does not hold
  up a small write meanwhile.
* A ``.gq`` source or JSON body nested 50,000 deep is a typed 400, and the connection stays usable.
* ``/docs`` loads its assets from this server only.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.graph_helpers import export_text, make_example_graph, person
from tests.support.raw_http import closed_by_peer, connect, head, memory_kib, read_response, reset_peak
from tests.support.serve_helpers import NDJSON, Server, error_of, start_fenced, stored_state

MIB = 1024 * 1024


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    """An unauthenticated server on loopback: the worst case, as no token stops the caller."""
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    server = start_fenced(uri, "--body-timeout", "6", "--header-timeout", "5")
    try:
        yield server
    finally:
        server.stop()


def _port(server: Server) -> int:
    return int(server.base_url.rsplit(":", 1)[1])


def test_browser_borne_writes_are_refused(served: Server) -> None:
    client = served.client
    before, exported = stored_state(served.graph), export_text(served.graph)
    body = f"{person('Csrf')}\n".encode()
    load = "/branches/main/load"
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        headers = {} if content_type is None else {"content-type": content_type}
        refused = error_of(client.post(load, params={"mode": "overwrite"}, content=body, headers=headers), 415, "unsupported_media_type")
        assert "application/x-ndjson" in refused["message"]
    error_of(
        client.post(
            "/branches/main/mutate",
            content=b'{"query": "query q() { delete Person where age >= 0 }"}',
            headers={"content-type": "text/plain"},
        ),
        415,
        "unsupported_media_type",
    )
    foreign = error_of(
        client.post(load, params={"mode": "overwrite"}, content=body, headers={**NDJSON, "origin": "http://evil.example"}),
        403,
        "origin_refused",
    )
    assert "--allowed-origin http://evil.example" in foreign["message"]
    error_of(client.delete("/branches/main", headers={"origin": "http://evil.example"}), 403, "origin_refused")
    for host in ("evil.example", "evil.example:80", "127.0.0.1.evil.example"):
        rebound = error_of(
            client.post(load, params={"mode": "overwrite"}, content=body, headers={**NDJSON, "host": host}), 421, "misdirected_request"
        )
        assert "--allowed-host NAME" in rebound["message"]
        error_of(client.get("/branches/main/export", headers={"host": host}), 421, "misdirected_request")
    assert client.get("/healthz", headers={"host": "evil.example"}).status_code == 200  # probes name any address
    assert "access-control-allow-origin" not in client.get("/branches", headers={"origin": "http://evil.example"}).headers
    assert stored_state(served.graph) == before and export_text(served.graph) == exported
    same_origin = client.post(load, params={"mode": "append"}, content=body, headers={**NDJSON, "origin": served.base_url})
    assert same_origin.status_code == 200, same_origin.text


def _peak_growth_mib(server: Server, attack: Callable[[], None]) -> float:
    pid = server.process.pid
    reset_peak(pid)
    baseline = memory_kib(pid)["VmRSS"]
    attack()
    return (memory_kib(pid)["VmHWM"] - baseline) / 1024


def _declared_over_limit(server: Server, path: str, length: int) -> None:
    with connect(_port(server)) as sock:
        started = time.monotonic()
        sock.sendall(head("POST", path, _port(server), content_type="application/json", content_length=str(length)))
        response = read_response(sock, timeout=5)
        assert time.monotonic() - started < 1.0
    assert response.status == 413 and response.headers["connection"] == "close", response
    details = json.loads(response.body)["error"]["details"]
    assert details["resource"] == "body_bytes" and details["actual"] == length, details


def _chunked_past_limit(server: Server, path: str, chunks: int) -> None:
    """Stream ``chunks`` MiB chunks until the server refuses and closes; its answer is 413."""
    with connect(_port(server)) as sock:
        sock.sendall(head("POST", path, _port(server), content_type="application/json", transfer_encoding="chunked"))
        piece = b"%x\r\n%s\r\n" % (MIB, b"[" * MIB)
        try:
            for _ in range(chunks):
                sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        response = read_response(sock, timeout=10)
    assert response.status == 413, response
    assert json.loads(response.body)["error"]["code"] == "resource_limit"


def test_bodies_are_bounded(served: Server, capsys: pytest.CaptureFixture[str]) -> None:
    before = stored_state(served.graph)
    growth = {
        "declared 100 MB JSON": _peak_growth_mib(served, lambda: _declared_over_limit(served, "/branches/main/mutate", 100 * 10**6)),
        "declared 1 GB load": _peak_growth_mib(served, lambda: _declared_over_limit(served, "/branches/main/load?mode=overwrite", 10**9)),
        "chunked 100 MiB JSON": _peak_growth_mib(served, lambda: _chunked_past_limit(served, "/branches/main/mutate", 100)),
        "chunked 1 GiB load": _peak_growth_mib(served, lambda: _chunked_past_limit(served, "/branches/main/load?mode=overwrite", 1024)),
    }
    with capsys.disabled():
        print("\nserver peak RSS growth (MiB): " + ", ".join(f"{k}: {v:.1f}" for k, v in growth.items()))
    assert growth["declared 100 MB JSON"] < 16 and growth["declared 1 GB load"] < 16, growth
    assert growth["chunked 100 MiB JSON"] < 24, growth
    assert growth["chunked 1 GiB load"] < 32 + 64, growth  # the 32 MiB the limit lets in, and their join
    assert served.client.get("/healthz").status_code == 200
    assert stored_state(served.graph) == before


def _poll_health(server: Server, seconds: float) -> list[float]:
    """Latencies of /healthz polled for ``seconds`` (each must answer 200 within 1 s)."""
    latencies = []
    with httpx.Client(base_url=server.base_url, timeout=1.0) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.monotonic()
            assert client.get("/healthz").status_code == 200
            latencies.append(time.monotonic() - started)
            time.sleep(0.1)
    return latencies


def test_stalled_clients_do_not_starve_others(served: Server, capsys: pytest.CaptureFixture[str]) -> None:
    """The stalled clients arrive over about a second (100 every 0.1 s) while /healthz is polled,
    from before the first until well after the last, still inside the timeouts."""
    port = _port(served)
    pid = served.process.pid
    reset_peak(pid)
    baseline = memory_kib(pid)["VmRSS"]
    uploads: list[socket.socket] = []
    heads: list[socket.socket] = []

    def stall() -> None:
        for batch in range(12):
            for _ in range(100):
                sock = connect(port)
                if batch < 11:
                    sock.sendall(
                        head("POST", "/branches/main/load?mode=append", port, content_type="application/x-ndjson", content_length="1000")
                    )
                    uploads.append(sock)
                else:
                    sock.sendall(b"POST /branches/main/load HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    heads.append(sock)
            time.sleep(0.1)

    opened = time.monotonic()
    staller = threading.Thread(target=stall)
    staller.start()
    try:
        during = _poll_health(served, 3.5)
        staller.join(timeout=30)
        assert len(uploads) == 1100 and len(heads) == 100
        assert time.monotonic() - opened < 5.0, "the stall must still be on while /healthz is polled"
        answers = [read_response(sock, timeout=15) for sock in uploads]
        assert {a.status for a in answers} == {408}, {a.status for a in answers}
        assert json.loads(answers[0].body)["error"]["code"] == "request_timeout"
        assert all(closed_by_peer(sock, timeout=10) for sock in uploads)
        assert all(closed_by_peer(sock, timeout=10) for sock in heads)
        after = _poll_health(served, 1.0)
    finally:
        staller.join(timeout=30)
        for sock in uploads + heads:
            sock.close()
    growth = (memory_kib(pid)["VmHWM"] - baseline) / 1024
    with capsys.disabled():
        print(
            f"\n1,100 stalled uploads + 100 stalled heads: /healthz max {max(during) * 1000:.0f} ms, "
            f"median {sorted(during)[len(during) // 2] * 1000:.0f} ms during, {max(after) * 1000:.0f} ms after; "
            f"server peak RSS growth {growth:.1f} MiB"
        )
    assert max(during + after) < 1.0
    assert growth < 128, growth
    assert "Traceback" not in served.output() and "accept" not in served.output()


def test_beyond_max_connections_a_request_is_answered_at_once(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    server = start_fenced(uri, "--max-connections", "20")
    idle = []
    try:
        port = _port(server)
        for _ in range(20):
            sock = connect(port)
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            idle.append(sock)
        time.sleep(0.2)
        with connect(port) as sock:
            started = time.monotonic()
            sock.sendall(head("GET", "/healthz", port))
            response = read_response(sock, timeout=5)
            assert time.monotonic() - started < 1.0
        assert response.status == 503, response
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def test_a_load_is_parsed_before_the_write_lock(served: Server, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [f'{{"type": "Tag", "data": {{"id": "t-{i:07d}", "label": "label number {i} of a big load"}}}}' for i in range(330_000)]
    data = ("\n".join(lines) + '\n{"type": "Tag", "data": {"label": 3}}\n').encode()
    assert 28 * MIB < len(data) < 32 * MIB
    tags_before = export_text(served.graph, types=["Tag"])
    outcome: dict[str, object] = {}

    def bad_load() -> None:
        with served.new_client(None, **NDJSON) as client:
            outcome["bad"] = client.post("/branches/main/load", params={"mode": "overwrite"}, content=data)
            outcome["bad_done"] = time.monotonic()

    pid = served.process.pid
    reset_peak(pid)
    baseline = memory_kib(pid)["VmRSS"]
    started = time.monotonic()
    worker = threading.Thread(target=bad_load)
    worker.start()
    time.sleep(1.0)
    small = served.load([person("NotHeldUp")])
    small_done = time.monotonic()
    worker.join(timeout=120)
    bad = outcome["bad"]
    assert isinstance(bad, httpx.Response)
    error = error_of(bad, 400, "bad_request")
    assert error["details"]["line"] == 330_001, error
    assert small.status_code == 200, small.text
    growth = (memory_kib(pid)["VmHWM"] - baseline) / 1024
    with capsys.disabled():
        print(
            f"\n30 MiB load ending in a bad line: refused after {outcome['bad_done'] - started:.1f} s "  # type: ignore[operator]
            f"(peak RSS growth {growth:.0f} MiB); a small write meanwhile took {small_done - started - 1.0:.2f} s"
        )
    assert small_done < outcome["bad_done"], "the small write waited for the bad load"  # type: ignore[operator]
    assert '"NotHeldUp"' in export_text(served.graph, types=["Person"])
    assert export_text(served.graph, types=["Tag"]) == tags_before


def test_deep_nesting_is_a_typed_400_and_the_connection_lives(served: Server) -> None:
    before = stored_state(served.graph)
    with served.new_client(None) as client:
        deep_gq = 'query q() { insert Person { name: "x", age: ' + "[" * 50_000 + " } }"
        error = error_of(client.post("/branches/main/mutate", json={"query": deep_gq}), 400, "bad_request")
        assert error["details"] == {"resource": "nesting_depth"}, error
        deep_json = '{"query": "query q() { insert Person { name: $n } }", "params": {"n": ' + "[" * 50_000 + "]" * 50_000 + "}}"
        error_of(
            client.post("/branches/main/mutate", content=deep_json.encode(), headers={"content-type": "application/json"}),
            400,
            "bad_request",
        )
        assert client.get("/healthz").status_code == 200  # the same connection still answers
    assert stored_state(served.graph) == before
    assert "Traceback" not in served.output()


def test_docs_load_nothing_from_another_site(served: Server) -> None:
    html = served.client.get("/docs").text
    sources = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", html)
    assert sources and all(s.startswith("/") and not s.startswith("//") for s in sources), sources
    for source in sources:
        fetched = served.client.get(source)
        assert fetched.status_code == 200 and fetched.content, source
    assert served.client.get("/docs/assets/elsewhere.js").status_code in (400, 404)


def test_allowed_origins_may_write_and_get_cors_headers(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    server = start_fenced(uri, "--allowed-origin", "https://app.example")
    try:
        client = server.client
        preflight = client.options(
            "/branches/main/load",
            headers={
                "origin": "https://app.example",
                "access-control-request-method": "POST",
                "access-control-request-headers": "authorization, content-type",
            },
        )
        assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == "https://app.example"
        written = client.post(
            "/branches/main/load",
            params={"mode": "append"},
            content=f"{person('FromApp')}\n".encode(),
            headers={**NDJSON, "origin": "https://app.example"},
        )
        assert written.status_code == 200 and written.headers["access-control-allow-origin"] == "https://app.example"
        refused = client.post(
            "/branches/main/load",
            params={"mode": "append"},
            content=f"{person('FromElsewhere')}\n".encode(),
            headers={**NDJSON, "origin": "https://other.example"},
        )
        error_of(refused, 403, "origin_refused")
        assert "access-control-allow-origin" not in refused.headers
    finally:
        server.stop()
