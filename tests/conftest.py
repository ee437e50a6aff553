"""Shared fixtures: a moto S3 server on a free loopback port (:mod:`tests.support.moto_s3`), and
graph roots on both backends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

MOTO_S3 = Path(__file__).resolve().parent / "support" / "moto_s3.py"


def s3_server_command(port: int) -> list[str]:
    """The command that serves the tests' S3-compatible server on loopback ``port``."""
    return [sys.executable, str(MOTO_S3), "-H", "127.0.0.1", "-p", str(port)]


def _free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"moto server did not listen on 127.0.0.1:{port}")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """Start a moto S3 server on loopback for the session; export the AWS settings it needs."""
    port = _free_loopback_port()
    process = subprocess.Popen(
        s3_server_command(port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in _AWS_ENV}
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_REGION="us-east-1",
        AWS_ENDPOINT_URL=endpoint,
        AWS_ALLOW_HTTP="true",
    )
    try:
        _wait_for_port(port)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ALLOW_HTTP",
)


@pytest.fixture(autouse=True, scope="session")
def playbook_journals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Playbook run journals (``OMNIGRAPH_STATE_DIR``) go to a session temp dir, not the home dir."""
    saved = os.environ.get("OMNIGRAPH_STATE_DIR")
    os.environ["OMNIGRAPH_STATE_DIR"] = str(tmp_path_factory.mktemp("omnigraph-state"))
    yield
    if saved is None:
        os.environ.pop("OMNIGRAPH_STATE_DIR", None)
    else:
        os.environ["OMNIGRAPH_STATE_DIR"] = saved


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest) -> str:
    """Which storage backend a test runs on; S3 tests start the moto server on first use."""
    if request.param == "s3":
        request.getfixturevalue("s3_server")
    return str(request.param)


def new_root(backend: str, tmp_path: Path, name: str = "graph") -> str:
    """A fresh, empty graph root URI on ``backend``.

    On S3 every root gets a bucket of its own: the moto server lists a prefix by scanning its
    bucket, so one shared bucket would make every listing slower as the session goes on.
    """
    if backend == "s3":
        import boto3

        bucket = f"og-{uuid.uuid4().hex}"
        boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1").create_bucket(Bucket=bucket)
        return f"s3://{bucket}/{name}"
    return str(tmp_path / name)


@pytest.fixture
def root_uri(backend: str, tmp_path: Path) -> str:
    """A fresh graph root on the parametrised backend."""
    return new_root(backend, tmp_path)
