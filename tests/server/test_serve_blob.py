"""The Blob route's ``Range`` support and a too-large body that the client can read the 413 of
(issue 40, items 11 and 17), against one real server process on loopback.

A single byte range is 206 with ``Content-Range`` (clamped to the cell's end; a suffix range
gives the last bytes), one that selects no byte is 416 ``range_not_satisfiable`` with
``Content-Range: bytes */SIZE``, and several ranges or another unit get the whole cell (200).
A load body over the 32 MiB limit sent by Python's urllib (which sends the whole body before it
reads) gets its 413, not a broken pipe, and nothing is written."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import omnigraph
from tests.engine.test_blob import SCHEMA, doc
from tests.support.serve_helpers import Server, error_of, start_fenced, stored_state

PAYLOAD = os.urandom(3 * 1024 * 1024 + 17)
SIZE = len(PAYLOAD)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = str(tmp_path_factory.mktemp("blob") / "graph")
    with omnigraph.init(root, SCHEMA) as graph:
        graph.load([doc("a", PAYLOAD), doc("empty", b"")], mode="append")
    server = start_fenced(root)
    try:
        yield server
    finally:
        server.stop()


def get(server: Server, slug: str, range_header: str | None = None) -> tuple[int, dict[str, str], bytes]:
    headers = {} if range_header is None else {"range": range_header}
    response = server.client.get("/branches/main/blob", params={"type": "Doc", "id": slug, "property": "body"}, headers=headers)
    return response.status_code, dict(response.headers), response.content


@pytest.mark.parametrize(
    ("header", "start", "stop"),
    [
        ("bytes=0-9", 0, 10),
        ("bytes=1048570-1048580", 1048570, 1048581),  # across a read chunk
        (f"bytes={SIZE - 5}-", SIZE - 5, SIZE),
        ("bytes=-7", SIZE - 7, SIZE),
        (f"bytes=-{SIZE + 100}", 0, SIZE),
        ("bytes=100-999999999", 100, SIZE),
    ],
)
def test_a_single_range_is_206_with_its_bytes(served: Server, header: str, start: int, stop: int) -> None:
    status, headers, body = get(served, "a", header)
    assert status == 206 and body == PAYLOAD[start:stop]
    assert headers["content-range"] == f"bytes {start}-{stop - 1}/{SIZE}"
    assert headers["content-length"] == str(stop - start)


@pytest.mark.parametrize(("slug", "header"), [("a", f"bytes={SIZE}-"), ("a", "bytes=-0"), ("empty", "bytes=0-0"), ("empty", "bytes=-1")])
def test_a_range_that_selects_no_byte_is_416(served: Server, slug: str, header: str) -> None:
    response = served.client.get("/branches/main/blob", params={"type": "Doc", "id": slug, "property": "body"}, headers={"range": header})
    error = error_of(response, 416, "range_not_satisfiable")
    size = SIZE if slug == "a" else 0
    assert response.headers["content-range"] == f"bytes */{size}" and error["details"] == {"range": header, "size": size}


@pytest.mark.parametrize("header", [None, "bytes=0-1,5-6", "items=0-5", "bytes=9-3", "bytes=x-"])
def test_no_range_several_ranges_or_another_unit_get_the_whole_cell(served: Server, header: str | None) -> None:
    status, headers, body = get(served, "a", header)
    assert status == 200 and body == PAYLOAD
    assert headers["content-length"] == str(SIZE) and headers["accept-ranges"] == "bytes" and "content-range" not in headers


def test_a_client_that_sends_before_it_reads_gets_the_413_of_a_too_large_body(served: Server, tmp_path: Path) -> None:
    before = stored_state(served.graph)
    body = b"x" * (33 * 1024 * 1024)
    request = urllib.request.Request(
        f"{served.base_url}/branches/main/load?mode=append", data=body, headers={"content-type": "application/x-ndjson"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)  # before the fix: URLError [Errno 32] Broken pipe
    assert refused.value.code == 413 and refused.value.headers["connection"] == "close"
    error = json.loads(refused.value.read())["error"]
    assert error["code"] == "resource_limit" and error["details"] == {
        "resource": "body_bytes",
        "limit": 32 * 1024 * 1024,
        "actual": len(body),
    }
    assert stored_state(served.graph) == before
    assert get(served, "a")[0] == 200  # the server goes on serving
