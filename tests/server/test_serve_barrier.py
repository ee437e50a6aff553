"""The migration barrier seen from running servers, and the fleet registry seen from the migrator.

Real ``omnigraph-v4 serve`` and ``omnigraph serve`` processes on loopback, a real
``omnigraph-migrate`` process crashed at a named failpoint, then ``resume``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from omnigraph.claims.claim import inspect
from omnigraph.cli.migrate import cli as migrate_cli
from omnigraph.engine.access.fleet import FleetRecord, list_records, record_path
from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import now_ms
from omnigraph.engine.storage.process import this_host
from omnigraph.engine.storage.store import canonical_json, open_store
from omnigraph.migrator.inspection import fleet_document
from omnigraph.migrator.layout import CLAIM_PATH
from tests.support.graph_helpers import ACTOR, BIN, OMNIGRAPH, OMNIGRAPH_V4, invoke, make_example_graph, person, run_cli, write_jsonl
from tests.support.serve_helpers import Server, error_of, start_fenced, start_server

MIGRATE = BIN / "omnigraph-migrate"


def migrate(*args: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    """``omnigraph-migrate``: a real process when a failpoint must end it, else in-process."""
    if failpoint:
        cli = run_cli(MIGRATE, *args, env={FAILPOINT_ENV: failpoint})
        return subprocess.CompletedProcess(cli.args, cli.returncode, cli.stdout, cli.stderr)
    result = CliRunner().invoke(migrate_cli, list(args), catch_exceptions=False, env={FAILPOINT_ENV: None})
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def _stamp(uri: str) -> str | None:
    return Manifest(open_store(uri)).read_stamp()[0]


def _refused_by_fleet(result: subprocess.CompletedProcess[str], *programs: str) -> dict:
    assert result.returncode == 3, (result.returncode, result.stdout, result.stderr)
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "fleet_active", error
    for program in programs:
        assert f"{program} server" in error["message"], error["message"]
    return dict(error)


def _writes_refused(server: Server, stamp: str, name: str) -> dict:
    error = error_of(server.load([person(name)]), 503, "format_barrier")
    assert error["details"]["stamp"] == stamp, error
    return error


def test_servers_across_a_migration(tmp_path: Path) -> None:
    """Local only: the barrier is the stamp and the claim, whose S3 behaviour the migration suites
    cover; the HTTP contract itself runs on both backends (test_serve_http)."""
    uri = str(tmp_path / "g")
    make_example_graph(uri, LEGACY_PROFILE)
    servers: list[Server] = []
    try:
        v4 = start_server(OMNIGRAPH_V4, uri)
        servers.append(v4)
        assert v4.load([person("BeforeDrain")]).status_code == 200
        error_of(v4.client.post("/branches/main/mutate", json={"query": "q"}), 404, "not_found")  # not in the v4 release
        ready = v4.client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["format"] == "4", ready.text

        # a live format-4 writer: preflight and run refuse, naming it; run writes nothing
        error = _refused_by_fleet(migrate("preflight", uri, "--json"), "omnigraph-v4")
        assert str(v4.process.pid) in error["message"] and v4.base_url in error["message"]
        _refused_by_fleet(migrate("run", uri, "--owner", "ops", "--json"), "omnigraph-v4")
        assert _stamp(uri) == "4" and inspect(open_store(uri), CLAIM_PATH) is None

        # drained: a clean shutdown removes the record and preflight passes
        assert v4.stop() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a graceful shutdown
        servers.remove(v4)
        assert list_records(open_store(uri)) == []
        passed = migrate("preflight", uri, "--json")
        assert passed.returncode == 0, passed.stderr
        assert json.loads(passed.stdout)["fleet"] == []

        # a v4 writer again, and a format-5 server started on the format-4 graph
        v4 = start_server(OMNIGRAPH_V4, uri)
        fenced = start_fenced(uri)
        servers += [v4, fenced]
        assert fenced.client.get("/branches/main/snapshot").json()["format"] == "4"
        assert "BeforeDrain" in fenced.client.get("/branches/main/export", params={"type": "Person"}).text
        ready = fenced.client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["format"] == "4" and ready.json()["writable"] is False
        refused = _writes_refused(fenced, "4", "TooEarly")
        assert "omnigraph-migrate" in refused["message"]
        assert v4.load([person("StillV4")]).status_code == 200
        _refused_by_fleet(migrate("preflight", uri, "--json"), "omnigraph-v4", "omnigraph")

        # the operator overrides the registry; the migration dies right after stamping the barrier
        crashed = migrate("run", uri, "--owner", "ops", "--ignore-fleet", "--json", failpoint="migrate.after_barrier")
        assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
        assert _stamp(uri) == "migrating"
        for server, name in ((v4, "DuringV4"), (fenced, "DuringV5")):
            error = _writes_refused(server, "migrating", name)
            assert error["details"]["holder"]["owner"] == "ops", error
            assert "claim held by ops" in error["message"]
            assert server.client.get("/readyz").status_code == 503
        assert fenced.client.get("/branches/main/snapshot").json()["format"] == "migrating"
        # the format-4 program reads only format 4 (DESIGN section 3): its reads are refused too
        error_of(v4.client.get("/branches/main/snapshot"), 409, "format_refused")
        error_of(fenced.client.post("/branches", json={"name": "during"}), 503, "format_barrier")

        # resume finishes the migration: the same format-5 process now writes, the v4 one never again
        token = inspect(open_store(uri), CLAIM_PATH).token  # type: ignore[union-attr]
        resumed = migrate("resume", uri, "--token", token, "--json")
        assert resumed.returncode == 0, resumed.stderr
        assert _stamp(uri) == "5"
        assert fenced.client.get("/readyz").json() == {"format": "5", "writable": True, "reason": "stamp 5, no migration claim held"}
        assert fenced.load([person("AfterMigration")]).status_code == 200
        error_of(fenced.load([person("StillV4")]), 409, "key_conflict")
        assert "upgrade omnigraph first" in _writes_refused(v4, "5", "LateV4")["message"]
        people = fenced.client.get("/branches/main/export", params={"type": "Person"}).text
        for name in ("BeforeDrain", "StillV4", "AfterMigration"):
            assert f'"{name}"' in people
        for name in ("TooEarly", "DuringV4", "DuringV5", "LateV4"):
            assert f'"{name}"' not in people
    finally:
        for server in servers:
            server.stop()
    assert list_records(open_store(uri)) == []


def _record(instance: str, host: str, pid: int, age_seconds: float) -> FleetRecord:
    beat = now_ms() - int(age_seconds * 1000)
    return FleetRecord(
        instance=instance,
        program="omnigraph",
        role="server",
        writes_format="5",
        host=host,
        pid=pid,
        process_start=None,
        address=None,
        started_at=beat,
        heartbeat_at=beat,
    )


def _preflight(uri: str, *extra: str) -> tuple[int, dict]:
    result = CliRunner().invoke(migrate_cli, ["preflight", uri, "--json", *extra], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def test_record_status_and_ignore_fleet(tmp_path: Path) -> None:
    """live (recent heartbeat, not known dead), stale (old heartbeat), dead (pid gone on this host)."""
    uri = str(tmp_path / "g")
    make_example_graph(uri, LEGACY_PROFILE)
    store = open_store(uri)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    records = [
        _record("01A", "another-host", 4242, 1),
        _record("01B", "another-host", 4243, 3600),
        _record("01C", this_host(), int(gone.stdout), 1),
    ]
    for record in records:
        store.put_if_absent(record_path(record.instance), canonical_json(record))
    assert {e["instance"]: e["status"] for e in fleet_document(store)} == {"01A": "live", "01B": "stale", "01C": "dead"}

    status, document = _preflight(uri)
    assert status == 3 and document["error"]["details"]["live"] == ["01A"], document
    assert "another-host pid 4242" in document["error"]["message"]
    status, document = _preflight(uri, "--ignore-fleet")
    assert status == 0 and [e["instance"] for e in document["fleet"]] == ["01A", "01B", "01C"], document
    store.delete(record_path("01A"))
    status, document = _preflight(uri)
    assert status == 0 and [e["status"] for e in document["fleet"]] == ["stale", "dead"], document


def test_chunked_load_registers_while_it_runs(tmp_path: Path) -> None:
    """A long v4 load holds a record; a crash leaves it behind, and it is then listed as dead."""
    uri = str(tmp_path / "g")
    make_example_graph(uri, LEGACY_PROFILE)
    data = write_jsonl(tmp_path, "people.jsonl", [person(f"chunk{i}") for i in range(4)])
    crashed = run_cli(
        OMNIGRAPH_V4,
        "load",
        "--mode",
        "append",
        "--chunk-rows",
        "2",
        "--data",
        data,
        uri,
        env={FAILPOINT_ENV: "write.after_publish", "OMNIGRAPH_ACTOR": ACTOR},
    )
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.describe()
    [entry] = fleet_document(open_store(uri))
    assert (entry["program"], entry["role"], entry["writes_format"], entry["status"]) == ("omnigraph-v4", "load", "4", "dead")
    finished = invoke(OMNIGRAPH_V4, "load", "--mode", "merge", "--chunk-rows", "2", "--data", data, uri)
    assert finished.returncode == 0, finished.describe()
    assert [e["instance"] for e in fleet_document(open_store(uri))] == [entry["instance"]]


def test_serve_refuses_a_missing_graph(tmp_path: Path) -> None:
    result = invoke(OMNIGRAPH, "serve", "--unauthenticated", "--port", "1", str(tmp_path / "absent"))
    assert result.returncode == 1 and "[not_found]" in result.stderr, result.describe()


def test_server_imports_only_the_engine() -> None:
    """Layering (DESIGN section 2): server -> engine, never the migrator, claims, ledger, playbooks or cli."""
    import ast

    project = Path(__file__).resolve().parents[2]
    offenders = []
    for path in sorted((project / "omnigraph" / "server").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            )
            offenders += [
                f"{path.name}: {n}"
                for n in names
                if n.split(".")[0] == "click"
                or n.split(".")[:2] in (["omnigraph", p] for p in ("cli", "claims", "ledger", "migrator", "playbooks"))
            ]
    assert offenders == []
