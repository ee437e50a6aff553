"""GraphStore: URI parsing and the atomic create-if-absent primitive, on both backends."""

from __future__ import annotations

import subprocess
import sys

import pytest

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.storage.store import open_store

RACE_SCRIPT = r"""
import sys, time
from omnigraph.engine.storage.store import open_store
store = open_store(sys.argv[1])
start = float(sys.argv[3])
while time.time() < start:
    time.sleep(0.001)
print("won" if store.put_if_absent("race/object.json", sys.argv[2].encode()) else "lost")
"""


def test_put_if_absent_creates_once(root_uri: str) -> None:
    store = open_store(root_uri)
    assert store.put_if_absent("a/b.json", b"first")
    assert not store.put_if_absent("a/b.json", b"second")
    assert store.read_bytes("a/b.json") == b"first"
    assert store.list("a") == ["b.json"]
    store.delete("a/b.json")
    assert not store.exists("a/b.json")
    assert store.put_if_absent("a/b.json", b"third")


def test_put_if_absent_has_one_winner_across_processes(root_uri: str) -> None:
    import time

    start = time.time() + 1.5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACE_SCRIPT, root_uri, f"writer-{i}", str(start)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    outputs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(outputs).count("won") == 1, outputs
    winner = outputs.index("won")
    assert open_store(root_uri).read_bytes("race/object.json") == f"writer-{winner}".encode()


def test_local_put_if_absent_leaves_no_temp_files(tmp_path) -> None:
    store = open_store(str(tmp_path / "g"))
    store.put_if_absent("x.json", b"1")
    store.put_if_absent("x.json", b"2")
    assert store.list("") == ["x.json"]


@pytest.mark.parametrize("uri", ["", "s3://", "gs://bucket/x"])
def test_bad_uris_are_refused(uri: str) -> None:
    with pytest.raises(BadRequest):
        open_store(uri)


def test_file_url_and_path_agree(tmp_path) -> None:
    assert open_store(f"file://{tmp_path}/g").uri == open_store(str(tmp_path / "g")).uri
