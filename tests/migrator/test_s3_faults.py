"""S3 faults: a load, a migration and a crashed migration's resume, through a fault-injecting proxy.

The console scripts run as real processes whose ``AWS_ENDPOINT_URL`` is a
:class:`tests.support.s3_fault_proxy.FaultProxy` in front of the session's moto server, answering 500 or
503, dropping the connection, or answering late on a seeded fraction of requests. Each command
either succeeds or fails with a typed error (never ``internal``); a failed command is run again,
a bounded number of times, and the graph must converge: stamp 5, every branch's rows unchanged
plus the loaded ones, and ``omnigraph check`` clean (read directly from moto, without faults).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.engine.graph import init_graph
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.load import load
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.ledger import Ledger
from omnigraph.migrator.layout import ledger_dir
from tests.conftest import new_root
from tests.support.check_helpers import assert_check_clean
from tests.support.migration_cli import claim_token
from tests.support.migration_fixtures import BIN, COMPACT_DATA, COMPACT_SCHEMA, exports
from tests.support.s3_fault_proxy import FaultProxy

FAULT_RATE = 0.05
ATTEMPTS = 6


def _small_format4_graph(uri: str) -> None:
    """Four tables on main and a lazy branch: 8 units, enough to cross every step under faults."""
    graph = init_graph(open_store(uri), COMPACT_SCHEMA, LEGACY_PROFILE, actor="faults")
    load(graph, "".join(json.dumps(r) + "\n" for r in COMPACT_DATA).encode(), mode="append", branch="main", actor="faults")
    create_branch(graph, "lazy")


def _run(endpoint: str, program: str, *args: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "OMNIGRAPH_ACTOR": "faults"}
    env.pop(FAILPOINT_ENV, None)
    if failpoint:
        env[FAILPOINT_ENV] = failpoint
    return subprocess.run([str(BIN / program), *args], env=env, capture_output=True, text=True, timeout=300)


def _until_ok(endpoint: str, program: str, *args: str) -> list[str]:
    """Run a command until it succeeds; every failure must be typed. Returns the failure codes."""
    codes: list[str] = []
    for _ in range(ATTEMPTS):
        done = _run(endpoint, program, *args, "--json")
        if done.returncode == 0:
            return codes
        assert done.returncode in (1, 3, 4, 5, 6), done.stderr
        error = json.loads(done.stdout)["error"]
        assert error["code"] != "internal" and "Traceback" not in done.stderr, (error, done.stderr[-2000:])
        codes.append(error["code"])
    raise AssertionError(f"{program} {' '.join(args)} did not converge in {ATTEMPTS} attempts: {codes}")


@pytest.mark.parametrize("seed", [11])
def test_load_migration_and_resume_converge_under_s3_faults(s3_server: str, tmp_path: Path, seed: int) -> None:
    uri = new_root("s3", tmp_path)
    _small_format4_graph(uri)
    data = tmp_path / "more.jsonl"
    data.write_text(json.dumps({"type": "Person", "data": {"name": "Under Faults", "age": 3}}) + "\n")
    with FaultProxy(s3_server, seed=seed, rate=FAULT_RATE, slow_seconds=0.2) as proxy:
        # merge is an upsert: running it again after an ambiguous failure converges to one row
        load_failures = _until_ok(proxy.endpoint, "omnigraph-v4", "load", "--mode", "merge", "--data", str(data), uri)
        expected = exports(uri)
        crashed = _run(proxy.endpoint, "omnigraph-migrate", "run", uri, "--owner", "ci", failpoint="unit.after_pk")
        assert crashed.returncode in (FAILPOINT_EXIT_STATUS, 1), crashed.stderr
        token = claim_token(uri)
        resume_failures = _until_ok(proxy.endpoint, "omnigraph-migrate", "resume", uri, "--token", token)
        assert _until_ok(proxy.endpoint, "omnigraph-migrate", "verify", uri) == []
        injected = dict(proxy.counts)
    print(f"faults injected: {injected}; typed failures retried: load {load_failures}, resume {resume_failures}")
    assert sum(injected.get(fault, 0) for fault in ("error_500", "error_503", "drop", "slow")) > 0, injected
    assert exports(uri) == expected
    assert {"type": "Person", "data": {"id": "Under Faults", "name": "Under Faults", "age": 3}} in [
        json.loads(line) for line in expected["main"]
    ]
    assert_check_clean(uri)


def test_a_store_that_keeps_failing_ends_in_a_typed_error_within_the_budget(s3_server: str, tmp_path: Path) -> None:
    uri = new_root("s3", tmp_path)
    _small_format4_graph(uri)
    before = exports(uri)
    data = tmp_path / "more.jsonl"
    data.write_text(json.dumps({"type": "Person", "data": {"name": "Never Lands"}}) + "\n")
    with FaultProxy(s3_server, seed=3, rate=1.0, faults=("error_500", "error_503", "drop")) as proxy:
        for args in (["snapshot", uri], ["load", "--mode", "append", "--data", str(data), uri]):
            started = time.monotonic()
            done = _run(proxy.endpoint, "omnigraph-v4", *args, "--json")
            assert done.returncode == 1, done.stderr
            assert json.loads(done.stdout)["error"]["code"] == "storage_unavailable", done.stdout
            assert time.monotonic() - started < 120
    assert exports(uri) == before


def test_a_create_if_absent_whose_answer_was_lost_is_recognised_as_ours(
    s3_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = new_root("s3", tmp_path)
    with FaultProxy(s3_server, seed=0, rate=0.0, schedule=[None, "drop_after_forward"]) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        store = open_store(uri)  # request 1: the bucket probe
        assert store.put_if_absent("claim.json", b"ours")  # lands, answer lost, retried: 412, read back
        assert not store.put_if_absent("claim.json", b"someone else's")
        assert proxy.counts["drop_after_forward"] == 1
    assert open_store(uri).read_bytes("claim.json") == b"ours"


def test_a_unit_writes_three_migration_documents_on_s3(s3_server: str, tmp_path: Path) -> None:
    """Counted at the S3 server: each unit writes its sidecar, its ``unit_completed`` record and
    the sidecar's deletion under ``__migration/``, nothing more (besides Lance's own commits); the
    migration's other records are a fixed number, whatever the number of units."""
    uri = new_root("s3", tmp_path)
    graph = init_graph(open_store(uri), COMPACT_SCHEMA, LEGACY_PROFILE, actor="faults")
    load(graph, "".join(json.dumps(r) + "\n" for r in COMPACT_DATA).encode(), mode="append", branch="main", actor="faults")
    for branch in ("b1", "b2", "b3"):
        create_branch(graph, branch)
    with FaultProxy(s3_server, seed=0, rate=0.0) as proxy:
        done = _run(proxy.endpoint, "omnigraph-migrate", "run", uri, "--owner", "ci", "--json")
        assert done.returncode == 0, done.stderr
        requests = list(proxy.requests)
    outcome = json.loads(done.stdout)
    units = outcome["units"]
    assert units == 16
    migration = f"/__migration/{outcome['migration_id']}/"
    writes = [(method, path.split("?")[0]) for method, path in requests if method in ("PUT", "POST", "DELETE") and migration in path]
    sidecar_puts = [w for w in writes if w[0] == "PUT" and "/units/" in w[1]]
    sidecar_deletes = [w for w in writes if w[0] == "DELETE" and "/units/" in w[1]]
    ledger_puts = [w for w in writes if w[0] == "PUT" and "/ledger/" in w[1]]
    records = Ledger(open_store(uri), ledger_dir(outcome["migration_id"])).replay().records
    unit_records = [r for _, r in records if r.kind in ("unit_completed", "unit_step")]
    assert len(ledger_puts) == len(records)
    assert len(sidecar_puts) == len(sidecar_deletes) == len(unit_records) == units
    assert len(writes) == len(sidecar_puts) + len(sidecar_deletes) + len(ledger_puts)
    assert len(writes) - (len(records) - units) == 3 * units
    # started, plan, images, prepared, barrier, plan, units started, verified, stamp, release
    assert len(records) - units <= 13
