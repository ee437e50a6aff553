"""``--executor ray``: the same ledger records, results and exit codes as the local executor.

Every migration runs as a real ``omnigraph-migrate`` process (the usage errors, which stop
before any I/O, are checked in process with click's runner). One real Ray cluster serves the
module: a helper process runs ``ray.init(num_cpus=2)`` with a small object store, its own temp
directory and its own auth token (nothing lands in the home directory), and holds it until its
stdin closes. Whether the tasks ran on that cluster is read from its worker logs, where Ray marks
every task it runs (``:task_name:validate_task``). One test runs with no ``--ray-address``, so
the migration starts (and must stop) a private local instance of its own.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from omnigraph.claims.claim import inspect
from omnigraph.cli.migrate import cli
from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.ledger import Ledger
from omnigraph.migrator.layout import CLAIM_PATH, ledger_dir
from tests.support.migration_fixtures import BIN, build_duplicate, build_fixture, clone, exports

MIGRATE = str(BIN / "omnigraph-migrate")
OBJECT_STORE_BYTES = 96 * 1024 * 1024
TASK_MARK = ":task_name:validate_task"
RECORD_NOISE = ("token", "migration_id", "at", "outage_seconds")
"""Ledger record fields that differ between two migrations of identical graphs by design."""

HEAD = r"""
import sys
import ray

context = ray.init(address="local", num_cpus=2, object_store_memory=int(sys.argv[1]),
                   include_dashboard=False, log_to_driver=False)
print(context.address_info["gcs_address"], flush=True)
sys.stdin.read()
ray.shutdown()
"""


def ray_env(temp_dir: Path, token: str) -> dict[str, str]:
    """An environment whose Ray processes keep to ``temp_dir`` and authenticate with ``token``."""
    return {
        **os.environ,
        "RAY_TMPDIR": str(temp_dir),
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        "RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION": "0.01",
    }


class RayCluster:
    """The module's Ray cluster, held by a helper process; ``address`` waits until it is up."""

    def __init__(self) -> None:
        self.temp_dir = Path(tempfile.mkdtemp(prefix="ogray-"))
        self.env = ray_env(self.temp_dir, secrets.token_hex(32))
        self._log = (self.temp_dir / "head.err").open("w")
        self._head = subprocess.Popen(
            [sys.executable, "-c", HEAD, str(OBJECT_STORE_BYTES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=self.env,
        )
        self._address: str | None = None

    @property
    def address(self) -> str:
        if self._address is None:
            assert self._head.stdout is not None
            self._address = self._head.stdout.readline().strip()
            assert self._address, (self.temp_dir / "head.err").read_text()
        return self._address

    def tasks_run(self) -> int:
        """How many validation tasks the cluster's workers have started so far."""
        return sum(log.read_text().count(TASK_MARK) for log in self.temp_dir.glob("ray/session_latest/logs/worker-*.out"))

    def wait_for_tasks(self, count: int, timeout: float = 10.0) -> int:
        """The task count once it reaches ``count`` (worker logs are written asynchronously)."""
        deadline = time.monotonic() + timeout
        while (seen := self.tasks_run()) < count and time.monotonic() < deadline:
            time.sleep(0.1)
        return seen

    def stop(self) -> None:
        assert self._head.stdin is not None
        self._head.stdin.close()
        try:
            self._head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._head.kill()
            self._head.wait(timeout=10)
        self._log.close()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    started = RayCluster()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def compact_source(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The compact format-4 fixture (four tables, the standard branch shapes), built once."""
    uri = str(tmp_path_factory.mktemp("ray-source") / "graph")
    build_fixture(uri, compact=True)
    return uri


def migrate(*args: str, env: dict[str, str] | None = None, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = dict(env or os.environ)
    if failpoint:
        environment[FAILPOINT_ENV] = failpoint
    return subprocess.run([MIGRATE, *args], env=environment, capture_output=True, text=True, timeout=300)


def records(uri: str, migration_id: str) -> list[dict[str, Any]]:
    """The migration's ledger records without the fields that differ between migrations."""
    replay = Ledger(open_store(uri), ledger_dir(migration_id)).replay()
    return [
        {key: value for key, value in record.model_dump(mode="json").items() if key not in RECORD_NOISE} for _, record in replay.records
    ]


def of_kind(recorded: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [record for record in recorded if record["kind"] == kind]


def copy_of(source: str, tmp_path: Path, name: str) -> str:
    uri = str(tmp_path / name)
    clone(source, uri)
    return uri


def test_run_and_resume_on_a_ray_cluster_record_what_a_local_run_records(cluster: RayCluster, compact_source: str, tmp_path: Path) -> None:
    """One test, so that one cluster serves both (xdist spreads tests over workers)."""
    local = copy_of(compact_source, tmp_path, "local")
    before = exports(local)
    by_local = migrate("run", local, "--owner", "ci", "--json")
    assert by_local.returncode == 0, by_local.stderr
    expected = json.loads(by_local.stdout)
    expected_records = records(local, expected["migration_id"])
    expected_images = of_kind(expected_records, "image_validated")
    assert len(expected_images) == expected["images"]

    on_ray = copy_of(compact_source, tmp_path, "on-ray")
    tasks = cluster.tasks_run()
    by_ray = migrate("run", on_ray, "--owner", "ci", "--executor", "ray", "--ray-address", cluster.address, "--json", env=cluster.env)
    assert by_ray.returncode == 0, by_ray.stderr
    outcome = json.loads(by_ray.stdout)
    assert {k: v for k, v in outcome.items() if k not in RECORD_NOISE} == {k: v for k, v in expected.items() if k not in RECORD_NOISE}
    recorded = records(on_ray, outcome["migration_id"])
    assert of_kind(recorded, "image_validated") == expected_images
    assert [r["kind"] for r in recorded] == [r["kind"] for r in expected_records]
    tasks += len(expected_images)
    assert cluster.wait_for_tasks(tasks) == tasks  # validated on the cluster, once per image
    assert exports(on_ray) == before == exports(local)
    verify = migrate("verify", on_ray, "--json")
    assert verify.returncode == 0 and json.loads(verify.stdout)["ok"] is True, verify.stdout

    resumed = copy_of(compact_source, tmp_path, "resumed-on-ray")
    crashed = migrate("run", resumed, "--owner", "ci", "--json", failpoint="prepare.after_plan")  # before any image is validated
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    holder = inspect(open_store(resumed), CLAIM_PATH)
    assert holder is not None
    done = migrate(
        "resume", resumed, "--token", holder.token, "--executor", "ray", "--ray-address", cluster.address, "--json", env=cluster.env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stamp"] == "5"
    assert of_kind(records(resumed, holder.migration_id), "image_validated") == expected_images
    tasks += len(expected_images)
    assert cluster.wait_for_tasks(tasks) == tasks
    assert exports(resumed) == before


def test_duplicates_stop_a_run_on_a_private_ray_instance_as_they_stop_a_local_run(tmp_path: Path) -> None:
    source = str(tmp_path / "dup-source")
    build_duplicate(source, tmp_path)
    local, on_ray = copy_of(source, tmp_path, "local"), copy_of(source, tmp_path, "on-ray")
    private = Path(tempfile.mkdtemp(prefix="ogray-"))
    try:
        by_local = migrate("run", local, "--owner", "ci")
        by_ray = migrate("run", on_ray, "--owner", "ci", "--executor", "ray", env=ray_env(private, secrets.token_hex(32)))
        assert by_local.returncode == 4, by_local.stderr
        assert by_ray.returncode == 4, by_ray.stderr
        assert by_ray.stdout == by_local.stdout  # the inventory lines, and nothing else
        assert "\tduplicate\t" in by_ray.stdout
        assert list(private.glob("ray/session_*")), "no private Ray instance was started"
        assert _processes_mentioning(private) == [], "the private Ray instance outlived the migration"
    finally:
        shutil.rmtree(private, ignore_errors=True)
    found = []
    for uri in (local, on_ray):
        store = open_store(uri)
        stamp, migration_id = Manifest(store).read_stamp()
        assert stamp == "migrating" and inspect(store, CLAIM_PATH) is not None
        recorded = records(uri, str(migration_id))
        assert not of_kind(recorded, "unit_step")
        found.append((of_kind(recorded, "image_validated"), of_kind(recorded, "validation_failed")))
    assert found[0] == found[1]
    assert found[1][1][0]["inventory"]


def _processes_mentioning(path: Path, timeout: float = 10.0) -> list[str]:
    """Command lines of live processes that name ``path``, once none is left or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(path) in text:
                alive.append(text)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--owner", "ci", "--ray-address", "127.0.0.1:6379"],
        ["run", "--owner", "ci", "--executor", "local", "--ray-address", "127.0.0.1:6379"],
        ["resume", "--token", "t", "--ray-address", "127.0.0.1:6379"],
        ["refence", "--owner", "ci", "--ray-address", "127.0.0.1:6379"],
        ["run", "--owner", "ci", "--executor", "ray", "--ray-address", ""],
        ["run", "--owner", "ci", "--executor", "ray", "--ray-address", "ray-head"],
        ["run", "--owner", "ci", "--executor", "spark"],
    ],
    ids=["address-without-executor", "address-with-local", "resume", "refence", "empty-address", "no-port", "unknown-executor"],
)
def test_executor_usage_errors_exit_2_before_touching_the_graph(args: list[str], tmp_path: Path) -> None:
    graph = tmp_path / "absent"
    done = CliRunner().invoke(cli, [args[0], str(graph), *args[1:], "--json"])
    assert done.exit_code == 2, done.output
    assert not graph.exists()


def test_executor_ray_without_ray_installed_names_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an installation without the extra sees
    graph = tmp_path / "absent"
    done = CliRunner().invoke(cli, ["run", str(graph), "--owner", "ci", "--executor", "ray"])
    assert done.exit_code == 2, done.output
    assert "pip install -e '.[ray]'" in done.output
    assert not graph.exists()


def test_an_address_where_no_cluster_answers_stops_the_run_before_the_claim(compact_source: str, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    uri = copy_of(compact_source, tmp_path, "unreachable")
    done = migrate("run", uri, "--owner", "ci", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}", "--json")
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "executor_failed"
    store = open_store(uri)
    assert Manifest(store).read_stamp() == ("4", None)
    assert inspect(store, CLAIM_PATH) is None
