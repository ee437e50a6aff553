"""Blob properties (issue 23, item 4): the 32 MiB aggregate of declared sizes, exactly at and one
byte over; an external URI kept as a reference by overwrite and copied by append; an update that
rewrites the payloads of the rows it matches only (seen in the table's files); a branch merge
that sees a changed payload; ``blob get`` through the CLI, a real server and the Python API; and
hostile values refused with nothing written. Lance itself and the S3 server are real (moto on
loopback, started by the session)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import boto3
import lance
import pytest

import omnigraph
from omnigraph.engine.storage.store import open_store
from tests.support.check_helpers import assert_check_clean
from tests.support.graph_helpers import OMNIGRAPH, run_cli, storage_state
from tests.support.serve_helpers import error_of, start_fenced

SCHEMA = "node Doc { slug: String @key  body: Blob?  n: I32? }\n"
LIMIT = 32 * 1024 * 1024
PUT = "query put($slug: String, $body: Blob?) { insert Doc { slug: $slug, body: $body } }"
PUT_TWO = (
    "query two($a: String, $b: String, $body: Blob) {\n  insert Doc { slug: $a, body: $body }\n  insert Doc { slug: $b, body: $body }\n}"
)
BUMP = "query bump($slug: String) { update Doc set { n: 5 } where slug = $slug }"


def delete_object(uri: str) -> None:
    if uri.startswith("s3://"):
        bucket, key = uri[len("s3://") :].split("/", 1)
        boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).delete_object(Bucket=bucket, Key=key)
    else:
        Path(uri[len("file://") :]).unlink()


def put_object(root: str, tmp_path: Path, name: str, data: bytes) -> str:
    """An external object beside the graph (same bucket on S3, outside the root); its URI."""
    if root.startswith("s3://"):
        bucket = root[len("s3://") :].split("/", 1)[0]
        boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).put_object(Bucket=bucket, Key=f"objects/{name}", Body=data)
        return f"s3://{bucket}/objects/{name}"
    path = tmp_path / "objects" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return path.as_uri()


def doc(slug: str, body: str | bytes | None = None) -> dict[str, Any]:
    """A Doc record; bytes are given as bytes (the API spells them ``base64:``)."""
    return {"type": "Doc", "data": {"slug": slug, **({} if body is None else {"body": body})}}


def doc_table(root: str) -> tuple[str, int]:
    """The Doc table's dataset path (relative to the root) and version at the main branch's pin."""
    with omnigraph.open(root, read_only=True) as graph:
        table = next(t for t in graph.snapshot().tables if t.table_key == "node:Doc")
    return table.path, table.version


def table_dataset(root: str) -> lance.LanceDataset:
    """The Doc table at the main branch's pin."""
    store, (path, version) = open_store(root), doc_table(root)
    return lance.dataset(store.dataset_uri(path), version=version, storage_options=store.storage_options)


def descriptors(root: str) -> dict[str, Any]:
    rows = table_dataset(root).to_table(columns=["id", "body"])
    return dict(zip(rows["id"].to_pylist(), rows["body"].to_pylist(), strict=True))


def refusal(call: Any) -> omnigraph.OmnigraphError:
    with pytest.raises(omnigraph.OmnigraphError) as raised:
        call()
    return raised.value


def test_the_aggregate_of_declared_sizes_is_limited_at_exactly_32_mib(root_uri: str, tmp_path: Path) -> None:
    """One external object of 32 MiB - 4 KiB plus managed bytes in another row: the limit counts
    the declared sizes once (the overhead of the other columns is a few bytes), refuses one byte
    over with nothing written, accepts exactly the limit, and copies the object's bytes in."""
    big = os.urandom(1 << 20) * 32
    big = big[: LIMIT - 4096]
    uri = put_object(root_uri, tmp_path, "big.bin", big)
    graph = omnigraph.init(root_uri, SCHEMA)

    def load(managed: int) -> omnigraph.LoadResult:
        return graph.load([doc("big", uri), doc("small", b"m" * managed)], mode="append")

    probe = refusal(lambda: load(4096))  # declared sizes alone are exactly the limit
    assert probe.code == "resource_limit" and probe.details["resource"] == "arrow_bytes"
    overhead = probe.details["actual"] - LIMIT
    assert 0 < overhead < 256, probe.details  # counted once: neither ignored nor doubled
    before = storage_state(root_uri)
    over = refusal(lambda: load(4096 - overhead + 1))
    assert (over.code, over.details["limit"], over.details["actual"]) == ("resource_limit", LIMIT, LIMIT + 1)
    two = refusal(lambda: graph.mutate(PUT_TWO, params={"a": "m1", "b": "m2", "body": uri}))
    assert two.code == "resource_limit" and two.details["actual"] > 2 * len(big)
    assert storage_state(root_uri) == before
    load(4096 - overhead)
    found = descriptors(root_uri)
    assert found["big"]["kind"] != 3 and found["big"]["size"] == len(big)  # copied, not referenced
    with graph.open_blob("Doc", "big", "body") as reader:
        assert reader.size == len(big)
        assert hashlib.sha256(b"".join(reader.chunks())).digest() == hashlib.sha256(big).digest()
    graph.close()


def test_overwrite_keeps_an_external_uri_and_append_copies_it(root_uri: str, tmp_path: Path) -> None:
    """After the object changes, the overwritten cell reads the new bytes (a reference) and the
    appended one the old (a copy); export spells them as load accepts them, and they load back.
    Once the object is gone, reading the reference or updating its row is ``not_found``."""
    uri = put_object(root_uri, tmp_path, "shared.bin", b"version one")
    with omnigraph.init(root_uri, SCHEMA) as graph:
        graph.load([doc("ref", uri), doc("none")], mode="overwrite")
        graph.load([doc("copy", uri)], mode="append")
        found = descriptors(root_uri)
        assert found["ref"] == {"kind": 3, "position": 0, "size": 0, "blob_id": 0, "blob_uri": uri}
        assert found["copy"]["kind"] in (0, 1, 2) and found["none"] is None
        put_object(root_uri, tmp_path, "shared.bin", b"version two!")
        assert graph.blob("Doc", "ref", "body") == b"version two!"
        assert graph.blob("Doc", "copy", "body") == b"version one"
        exported = list(graph.export())
    bodies = {record["data"]["id"]: record["data"].get("body") for record in exported}
    assert bodies == {"copy": "base64:dmVyc2lvbiBvbmU=", "none": None, "ref": uri}
    again = f"{root_uri}-again"
    with omnigraph.init(again, SCHEMA) as copy:
        copy.load(exported, mode="overwrite")
        assert list(copy.export()) == exported
    delete_object(uri)
    before = storage_state(root_uri)
    with omnigraph.open(root_uri) as graph:
        assert refusal(lambda: graph.blob("Doc", "ref", "body")).code == "not_found"
        assert refusal(lambda: graph.mutate(BUMP, params={"slug": "ref"})).code == "not_found"
        assert graph.blob("Doc", "copy", "body") == b"version one"
    assert storage_state(root_uri) == before
    assert_check_clean(root_uri)


def _files(root: str) -> dict[str, int]:
    """Every data and blob file of the Doc table, with its size."""
    store = open_store(root)
    return {path: store.fs.size(path) for path in store.fs.find(store.path(doc_table(root)[0])) if "/data/" in path}


def test_an_update_rewrites_the_payloads_of_the_rows_it_matches_only(root_uri: str) -> None:
    """An update of one row of three (300 KB payloads) leaves the old data and blob files as they
    were, adds files holding about one payload, moves only that row to a new fragment, and keeps
    every payload's bytes."""
    payloads = {slug: os.urandom(300_000) for slug in ("a", "b", "c")}
    with omnigraph.init(root_uri, SCHEMA) as graph:
        graph.load([doc(slug, data) for slug, data in payloads.items()], mode="append")
        before, was = _files(root_uri), descriptors(root_uri)
        fragments_before = {f.fragment_id for f in table_dataset(root_uri).get_fragments()}
        assert graph.mutate(BUMP, params={"slug": "b"}).affected_nodes == 1
        after, now = _files(root_uri), descriptors(root_uri)
        assert {path: after[path] for path in before} == before  # nothing rewritten in place
        added = sum(size for path, size in after.items() if path not in before)
        assert 300_000 <= added < 2 * 300_000  # b's payload, not a's or c's
        assert {k: now[k] for k in ("a", "c")} == {k: was[k] for k in ("a", "c")}
        fragments = table_dataset(root_uri).get_fragments()
        new = [f for f in fragments if f.fragment_id not in fragments_before]
        assert len(new) == 1 and new[0].count_rows() == 1
        assert {slug: graph.blob("Doc", slug, "body") for slug in payloads} == payloads


def test_a_merge_takes_a_changed_payload_and_refuses_divergent_ones(tmp_path: Path) -> None:
    """A one-byte payload changed to another on a branch (the same size, so possibly the same
    descriptor) is seen by the merge; both branches changing it differently is a conflict."""
    root = str(tmp_path / "graph")
    with omnigraph.init(root, SCHEMA) as graph:
        graph.load([doc("a", b"x"), doc("b", b"1")], mode="append")
        graph.create_branch("dev")
        graph.mutate(PUT, params={"slug": "a", "body": "base64:eQ=="}, branch="dev")  # "y"
        assert graph.merge("dev").outcome == "fast_forward"
        assert graph.blob("Doc", "a", "body") == b"y"
        graph.create_branch("other")
        graph.mutate(PUT, params={"slug": "b", "body": "base64:Mg=="}, branch="other")  # "2"
        graph.mutate(PUT, params={"slug": "b", "body": "base64:Mw=="})  # "3"
        conflict = refusal(lambda: graph.merge("other"))
        assert conflict.code == "merge_conflict"
        assert conflict.details["conflicts"] == [{"table_key": "node:Doc", "id": "b", "kind": "divergent_update"}]
    assert_check_clean(root)


def test_blob_get_through_the_cli_a_server_and_the_python_api(tmp_path: Path) -> None:
    """Bytes out through every door; a server also refuses Blob URIs in bodies (it would read its
    own files for the caller) with nothing written, and takes bytes."""
    root, payload = str(tmp_path / "graph"), os.urandom(700_000)
    with omnigraph.init(root, SCHEMA) as graph:
        graph.load([doc("a", payload), doc("empty")], mode="append")
    assert run_cli(OMNIGRAPH, "blob", "get", "--type", "Doc", "--id", "a", "--property", "body", root).ok().stdout_bytes == payload
    target = tmp_path / "out.bin"
    run_cli(OMNIGRAPH, "blob", "get", "--id", "a", "--output", target, "--property", "body", "--type", "Doc", root).ok()
    assert target.read_bytes() == payload
    for args, code, fix in (
        (("--id", "zz", "--property", "body"), "not_found", f"omnigraph export --type Doc --branch main {root}`"),
        (("--id", "empty", "--property", "body"), "not_found", "the cell is null"),
        (("--id", "a", "--property", "slug"), "bad_request", f"omnigraph export --type Doc {root}`"),
    ):
        refused = run_cli(OMNIGRAPH, "blob", "get", "--type", "Doc", *args, root)
        assert refused.returncode == 1 and f"[{code}]" in refused.stderr and fix in refused.stderr, refused.describe()
        assert refused.stdout_bytes == b""
    server = start_fenced(root)
    try:
        served = server.client.get("/branches/main/blob", params={"type": "Doc", "id": "a", "property": "body"})
        assert served.status_code == 200 and served.content == payload
        assert served.headers["content-length"] == str(len(payload))
        error_of(server.client.get("/branches/main/blob", params={"type": "Doc", "id": "zz", "property": "body"}), 404, "not_found")
        error_of(server.client.get("/branches/main/blob", params={"type": "Doc", "id": "a", "property": "n"}), 400, "bad_request")
        error_of(server.client.get("/branches/nope/blob", params={"type": "Doc", "id": "a", "property": "body"}), 404, "not_found")
        secret = (tmp_path / "secret.txt").as_uri()
        (tmp_path / "secret.txt").write_text("the server's own file")
        before = storage_state(root)
        loaded = error_of(server.load([json.dumps(doc("leak", secret))]), 400, "bad_request")
        assert "bytes only" in loaded["message"] and loaded["details"]["line"] == 1
        mutated = server.client.post("/branches/main/mutate", json={"query": PUT, "params": {"slug": "leak", "body": secret}})
        assert "bytes only" in error_of(mutated, 400, "bad_request")["message"]
        assert storage_state(root) == before
        assert server.load([json.dumps(doc("sent", "base64:c2VudA=="))]).status_code == 200
    finally:
        server.stop()
    with omnigraph.open(root, read_only=True) as graph:
        assert graph.blob("Doc", "a", "body") == payload
        with graph.open_blob("Doc", "a", "body") as reader:
            assert reader.size == len(payload) and reader.read(10) == payload[:10]
        assert refusal(lambda: graph.blob("Nope", "a", "body")).code == "not_found"


@pytest.mark.parametrize(
    ("value", "mode", "says"),
    [
        ("base64:not base64!", "append", "is not valid base64"),
        (42, "merge", "expected a Blob"),
        ("https://example.com/x", "append", "expected a Blob"),
        ("file:///nonexistent/object.bin", "append", "which does not exist"),
        ("file:///nonexistent/object.bin", "overwrite", "which does not exist"),
    ],
)
def test_hostile_values_are_refused_with_nothing_written(tmp_path: Path, value: Any, mode: str, says: str) -> None:
    root = str(tmp_path / "graph")
    with omnigraph.init(root, SCHEMA) as graph:
        graph.load([doc("kept", b"k")], mode="append")
        before = storage_state(root)
        error = refusal(lambda: graph.load([doc("kept", b"k"), doc("bad", value)], mode=mode))  # type: ignore[arg-type]
        assert (error.code, error.details["line"], error.details["property"]) == ("bad_request", 2, "body")
        assert says in error.message
        if isinstance(value, str) and value.startswith("file:"):
            mutated = refusal(lambda: graph.mutate(PUT, params={"slug": "m", "body": value}))
            assert mutated.code == "bad_request" and says in mutated.message
        assert storage_state(root) == before
        assert graph.blob("Doc", "kept", "body") == b"k"
