"""Many writers under SIGKILL and SIGSTOP, on a local disk and on S3 (with and without faults).

Each mutation writes two tables in one graph commit (``tests.engine.test_writer_leases``). Real
writer processes (CLI loops and a two-worker server) are killed and paused at random moments from
a seeded schedule; a paused one is resumed after a random time, often past its lease's expiry.
After everything ends, ``omnigraph recover`` then ``omnigraph check`` must exit 0 and:

* no tag shows one of its two rows;
* every acknowledged mutation (exit 0, HTTP 200) shows both;
* no refused mutation (a typed error) shows either;
* a final write succeeds.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from omnigraph.engine.failpoints import FAILPOINT_ENV
from omnigraph.engine.reconcile.branch_lease import LEASE_SECONDS_ENV
from tests.conftest import new_root
from tests.engine.test_writer_leases import (
    MUTATION,
    SCHEMA,
    assert_whole,
    finish,
    mutate_argv,
    recover_check_and_write,
    resume,
    start_free,
    start_held,
)
from tests.support.graph_helpers import omnigraph
from tests.support.s3_fault_proxy import FaultProxy
from tests.support.serve_helpers import start_fenced

LEASE = {LEASE_SECONDS_ENV: "1"}


def _graph(uri: str, tmp_path: Path) -> str:
    schema = tmp_path / "schema.pg"
    schema.write_text(SCHEMA)
    omnigraph("init", "--schema", schema, uri).ok()
    (tmp_path / "root.gq").write_text('query r() { insert Person { name: "root0" } }\n')
    omnigraph("mutate", "--query", tmp_path / "root.gq", uri).ok()
    return uri


class Ledger:
    """What each mutation's client was told: ``acked``, ``refused`` (typed error) or ``unknown``."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        self.lock = threading.Lock()

    def note(self, tag: str, outcome: str) -> None:
        with self.lock:
            self.outcomes[tag] = outcome

    def tags(self, outcome: str) -> set[str]:
        return {tag for tag, seen in self.outcomes.items() if seen == outcome}


def _cli_writer(uri: str, name: str, count: int, seed: int, ledger: Ledger, query: Path, env: dict[str, str]) -> None:
    """Run ``count`` mutations one after another, killing or pausing some of them at random."""
    rng = random.Random(seed)
    for index in range(count):
        tag = f"{name}-{index}"
        process = start_free(mutate_argv(uri, tag, query), env)
        fate, delay = rng.choice(["run", "run", "kill", "stop"]), rng.uniform(0.2, 0.8)
        time.sleep(delay)
        if fate == "kill" and process.poll() is None:
            process.kill()
            process.wait()
            ledger.note(tag, "unknown")
            continue
        if fate == "stop" and process.poll() is None:
            process.send_signal(signal.SIGSTOP)
            time.sleep(rng.uniform(0.3, 2.0))  # often past the 1 s lease
        status, out = resume(process)
        if status == 0:
            ledger.note(tag, "acked")
        elif status in (1, 3, 4, 5, 6) and isinstance(out, dict) and "error" in out:
            assert out["error"]["code"] != "internal", out
            ledger.note(tag, "refused")
        else:
            ledger.note(tag, "unknown")


def _http_writer(base_url: str, name: str, count: int, ledger: Ledger) -> None:
    for index in range(count):
        tag = f"{name}-{index}"
        body = {"query": MUTATION, "params": {"name": f"p-{tag}", "tag": tag}}
        try:
            with httpx.Client(base_url=base_url, timeout=30) as client:
                response = client.post("/branches/main/mutate", json=body)
        except httpx.HTTPError:
            ledger.note(tag, "unknown")
            time.sleep(0.2)  # a killed worker is being replaced
            continue
        if response.status_code == 200:
            ledger.note(tag, "acked")
        elif response.headers.get("content-type", "").startswith("application/json") and "error" in response.json():
            assert response.json()["error"]["code"] != "internal", response.text
            ledger.note(tag, "refused")
        else:
            ledger.note(tag, "unknown")


def _worker_pids(server_pid: int) -> list[int]:
    """The live child processes of the server's supervisor (its workers)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == server_pid and fields[0] not in ("Z", "X"):
                pids.append(int(entry))
    return sorted(pids)


def _worker_chaos(server_pid: int, seed: int, stop: threading.Event, hits: list[str]) -> None:
    """Every so often kill or pause one worker of the server (resumed after a random time)."""
    rng = random.Random(seed)
    while not stop.wait(rng.uniform(0.8, 2.0)):
        workers = _worker_pids(server_pid)
        if not workers:
            continue
        victim = rng.choice(workers)
        if rng.random() < 0.5:
            os.kill(victim, signal.SIGKILL)
            hits.append("kill")
        else:
            os.kill(victim, signal.SIGSTOP)
            time.sleep(rng.uniform(0.3, 2.0))
            os.kill(victim, signal.SIGCONT)
            hits.append("stop")


def test_writers_and_a_two_worker_server_under_kills_and_pauses(tmp_path: Path) -> None:
    uri = _graph(str(tmp_path / "graph"), tmp_path)
    query = tmp_path / "m.gq"
    query.write_text(MUTATION)
    ledger = Ledger()
    server = start_fenced(uri, workers=2, env=dict(LEASE))
    stop = threading.Event()
    hits: list[str] = []
    try:
        threads = [threading.Thread(target=_cli_writer, args=(uri, f"cli{i}", 10, 100 + i, ledger, query, LEASE)) for i in range(3)]
        threads += [threading.Thread(target=_http_writer, args=(server.base_url, f"http{i}", 12, ledger)) for i in range(2)]
        chaos = threading.Thread(target=_worker_chaos, args=(server.process.pid, 7, stop, hits))
        for thread in [*threads, chaos]:
            thread.start()
        for thread in threads:
            thread.join(300)
        stop.set()
        chaos.join(30)
    finally:
        for pid in _worker_pids(server.process.pid):
            os.kill(pid, signal.SIGCONT)
        server.stop()
    counts = {outcome: len(ledger.tags(outcome)) for outcome in ("acked", "refused", "unknown")}
    print(f"mutations: {counts}; worker chaos: {hits}")
    assert counts["acked"] >= 15, counts
    omnigraph("recover", uri).ok()
    assert_whole(uri, present=ledger.tags("acked"), absent=ledger.tags("refused"))
    recover_check_and_write(uri, query)


@pytest.mark.parametrize("faults", [False, True], ids=["s3", "s3-faults"])
def test_writers_on_s3_fence_each_other(s3_server: str, tmp_path: Path, faults: bool) -> None:
    """On S3, with and without injected faults: a writer killed mid-commit and one paused past its
    lease never tear the commits of the others, and the graph converges by `recover`."""
    uri = _graph(new_root("s3", tmp_path), tmp_path)
    query = tmp_path / "m.gq"
    query.write_text(MUTATION)
    killed = start_held(mutate_argv(uri, "killed", query), "write.after_effect", {LEASE_SECONDS_ENV: "2"})
    waiting = start_free(mutate_argv(uri, "waited", query), {LEASE_SECONDS_ENV: "2"})
    time.sleep(0.5)
    killed.kill()
    killed.wait()
    status, out = finish(waiting)
    assert status == 0, out
    paused = start_held(mutate_argv(uri, "paused", query), "write.after_effect", {LEASE_SECONDS_ENV: "2"})
    ledger = Ledger()
    ledger.note("waited", "acked")
    environment = {**os.environ}
    with FaultProxy(s3_server, seed=5, rate=0.05 if faults else 0.0, slow_seconds=0.2) as proxy:
        environment["AWS_ENDPOINT_URL"] = proxy.endpoint
        environment.pop(FAILPOINT_ENV, None)
        for index in range(2):
            tag = f"w-{index}"
            for _ in range(6):
                done = subprocess.run(
                    mutate_argv(uri, tag, query), env=environment, capture_output=True, text=True, timeout=180, check=False
                )
                if done.returncode == 0:
                    ledger.note(tag, "acked")
                    break
                error: dict[str, Any] = json.loads(done.stdout)["error"]
                assert error["code"] != "internal", error
            else:
                raise AssertionError(f"mutation {tag} did not land in 6 attempts under faults")
        injected = sum(proxy.counts.values())
    if faults:
        assert injected > 0
    status, out = resume(paused)
    assert status == 1 and out["error"]["code"] == "read_set_conflict", out
    assert_whole(uri, present=ledger.tags("acked"), absent={"killed", "paused"})
    recover_check_and_write(uri, query)
