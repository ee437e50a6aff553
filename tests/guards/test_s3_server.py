"""The tests' S3-compatible server keeps S3's promise on create-if-absent.

Claims, intents, ledger records and Lance commits are create-if-absent writes; a suite that races
them on S3 proves something only if the server lets exactly one of a race win, as S3 does.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.support.moto_s3 import AtomicConditionalWrites, WsgiApp

RACERS = 32
ROUNDS = 5


def _check_then_store_app(store: dict[str, bytes], winners: list[str]) -> WsgiApp:
    """A WSGI app with moto's shape of create-if-absent: look, pause, then store."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        key = environ["PATH_INFO"]
        if "HTTP_IF_NONE_MATCH" in environ and key in store:
            start_response("412 Precondition Failed", [])
            return [b""]
        time.sleep(0.01)  # the window in which a concurrent request sees the key still absent
        store[key] = environ["racer"].encode()
        winners.append(environ["racer"])
        start_response("200 OK", [])
        return [b""]

    return app


@pytest.mark.parametrize("atomic", [True, False])
def test_the_launcher_serializes_check_then_store(atomic: bool) -> None:
    """The middleware is what makes create-if-absent atomic: without it a check-then-store server
    lets several racers win (the control case), with it exactly one."""
    store: dict[str, bytes] = {}
    winners: list[str] = []
    app = _check_then_store_app(store, winners)
    served = AtomicConditionalWrites(app) if atomic else app
    start = threading.Barrier(8)

    def request(racer: int) -> None:
        start.wait()
        environ = {"REQUEST_METHOD": "PUT", "PATH_INFO": "/b/k", "HTTP_IF_NONE_MATCH": "*", "racer": str(racer)}
        list(served(environ, lambda status, headers: None))

    threads = [threading.Thread(target=request, args=(racer,)) for racer in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if atomic:
        assert len(winners) == 1 and store["/b/k"] == winners[0].encode()
    else:
        assert len(winners) > 1


def test_concurrent_conditional_puts_of_one_key_have_exactly_one_winner(s3_server: str) -> None:
    """Against the session's server: many rounds of racers, one winner each, its bytes stored."""
    client = boto3.client(
        "s3",
        endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        config=Config(max_pool_connections=RACERS, retries={"max_attempts": 1}),
    )
    bucket = f"og-{uuid.uuid4().hex}"
    client.create_bucket(Bucket=bucket)
    for round_number in range(ROUNDS):
        key = f"race-{round_number}"
        start = threading.Barrier(RACERS)
        winners: list[int] = []
        refused: list[int] = []

        def put(
            racer: int, key: str = key, start: threading.Barrier = start, winners: list[int] = winners, refused: list[int] = refused
        ) -> None:
            start.wait()
            try:
                client.put_object(Bucket=bucket, Key=key, Body=str(racer).encode(), IfNoneMatch="*")
            except ClientError as error:
                assert error.response["Error"]["Code"] in ("PreconditionFailed", "ConditionalRequestConflict"), error
                refused.append(racer)
                return
            winners.append(racer)

        threads = [threading.Thread(target=put, args=(racer,)) for racer in range(RACERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(winners) == 1 and len(refused) == RACERS - 1, (winners, refused)
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert body == str(winners[0]).encode()


@pytest.mark.parametrize("header", ["IfNoneMatch"])
def test_a_conditional_put_of_an_existing_key_is_refused(s3_server: str, header: str) -> None:
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
    bucket = f"og-{uuid.uuid4().hex}"
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="k", Body=b"first")
    with pytest.raises(ClientError) as refused:
        client.put_object(Bucket=bucket, Key="k", Body=b"second", **{header: "*"})
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"first"
