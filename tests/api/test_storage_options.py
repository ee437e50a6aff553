"""S3 settings given as ``storage_options`` instead of the environment: with no endpoint, keys or
``AWS_ALLOW_HTTP`` in the environment, a graph on the loopback S3 server is created, loaded,
reopened, checked and migrated-verified through the options alone; an unknown option is
``bad_request`` before any I/O."""

from __future__ import annotations

from pathlib import Path

import pytest

import omnigraph
from tests.conftest import new_root
from tests.support.graph_helpers import DATA_PATH, SCHEMA_PATH

CREDENTIAL_ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ALLOW_HTTP")


def test_storage_options_replace_the_environment(s3_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = new_root("s3", tmp_path)
    options = {
        "aws_endpoint": s3_server,
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
        "aws_region": "us-east-1",
        "allow_http": "true",
    }
    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name)
    with omnigraph.init(uri, SCHEMA_PATH, storage_options=options) as graph:
        assert graph.load(DATA_PATH, mode="append").rows["node:Person"] == 8
    with omnigraph.open(uri, read_only=True, storage_options=options) as graph:
        assert graph.uri == uri and graph.snapshot().tables[0].pk == ("id",)
        assert graph.check().ok
    assert omnigraph.migrate.verify(uri, storage_options=options).ok
    with pytest.raises(omnigraph.BadRequest) as refused:
        omnigraph.open(uri, storage_options={"endpoint_url": s3_server})
    assert refused.value.details["unknown"] == ["endpoint_url"]
