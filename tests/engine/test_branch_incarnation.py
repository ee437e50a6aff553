"""Graph-branch incarnations under writes in flight (issue 19), with real processes.

A graph branch is named by its incarnation, never by its name alone: a write, a delete and a
recovery act only on the table branches of the incarnation they started on.

* ``branch delete B`` (CLI, ``DELETE /branches/B``) is refused (409 / exit 1,
  ``read_set_conflict``, naming the operation) while a live process has a write intent armed on
  B; a dead writer's intent is resolved first and the delete goes ahead.
* A write whose branch was deleted (or deleted and re-created) under it fails typed
  (``not_found`` / ``read_set_conflict``), never reports success, and leaves nothing behind.
* Recovery (``omnigraph recover``, any read-write open) never applies an intent to another
  incarnation of the branch, and never moves another branch's tables.
* A clean SIGTERM shutdown of ``omnigraph serve --workers 2`` leaves no intent behind.

Writers are held with ``name:stop`` failpoints (:mod:`omnigraph.engine.failpoints`): a CLI ``omnigraph
load`` process stopped by SIGSTOP at a named step of its commit is alive and holds its intent,
while a two-worker server started without failpoints serves the deletes, creates and other loads.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from omnigraph.engine.failpoints import FAILPOINT_ENV, STOP_SUFFIX
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.reconcile.branch_lease import LEASE_SECONDS_ENV
from omnigraph.engine.reconcile.recovery import WriteIntent, list_intents
from omnigraph.engine.storage.lance_io import latest_version, list_branches, open_dataset
from omnigraph.engine.storage.store import open_store
from tests.support.crash_helpers import assert_write_converged
from tests.support.graph_helpers import ACTOR, OMNIGRAPH, Cli, init, invoke, person, run_cli, write_jsonl
from tests.support.serve_helpers import Server, start_fenced

TYPED_WRITE_FAILURES = frozenset({"not_found", "read_set_conflict"})
"""How a write whose branch was deleted (or re-created) under it may fail."""
UNDECIDED = frozenset({"recovery_required"})
"""How a write may end when another process's interrupted commit on the same table is rolled back
under its landed effect (several writer processes: the support boundary); `recover` decides it."""
WAIT_SECONDS = 180.0


# -- real processes ------------------------------------------------------------------------------


HELD_LEASE_SECONDS = 600


class HeldWriter:
    """A real ``omnigraph`` CLI process stopped (SIGSTOP) at ``failpoint:stop``: alive, holding
    whatever it holds (its armed intent, its effects), until resumed or killed.

    A held writer's lease lasts :data:`HELD_LEASE_SECONDS` (a stopped process does not renew it):
    it stays the live holder for the whole test, as a writer that is merely slow would.

    The failpoint stays armed after a resume, so a commit with several tables stops again after
    each one; :meth:`resume` continues it through every later stop to its end. The process is
    reaped here (``os.waitpid``), not by ``Popen``. With ``must_stop=False`` a process that ended
    before the failpoint (a refused write) is not an error: ``stopped`` is then False.
    """

    def __init__(self, args: list[str], failpoint: str, *, must_stop: bool = True):
        self.out = tempfile.TemporaryFile()  # noqa: SIM115 - the child writes to it; read and closed after the wait
        self.err = tempfile.TemporaryFile()  # noqa: SIM115 - as above
        env = {key: value for key, value in os.environ.items() if key != FAILPOINT_ENV}
        env.update({"OMNIGRAPH_ACTOR": ACTOR, FAILPOINT_ENV: failpoint + STOP_SUFFIX, LEASE_SECONDS_ENV: str(HELD_LEASE_SECONDS)})
        self.args = args
        self.process = subprocess.Popen([str(OMNIGRAPH), *args], stdout=self.out, stderr=self.err, env=env)
        self.returncode: int | None = None
        self.stopped = self._wait()
        if must_stop and not self.stopped:
            raise AssertionError(f"held writer ended before {failpoint}:\n{self.result().describe()}")

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.returncode is None

    def _wait(self, timeout: float = WAIT_SECONDS) -> bool:
        """Wait until the process stops (True) or ends (False; its exit status is kept)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG | os.WUNTRACED)
            if pid == 0:
                time.sleep(0.01)
                continue
            if os.WIFSTOPPED(status):
                return True
            self.returncode = os.waitstatus_to_exitcode(status)
            self.process.returncode = self.returncode
            return False
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError(f"held writer {' '.join(self.args)} neither stopped nor ended within {timeout}s")

    def resume(self) -> Cli:
        """Let it go on (through any later stop) and wait for its end; its result."""
        while True:
            os.kill(self.pid, signal.SIGCONT)
            if not self._wait():
                return self.result()

    def kill(self) -> None:
        """SIGKILL (a stopped process dies at once) and reap it."""
        if self.alive:
            os.kill(self.pid, signal.SIGKILL)
            while self._wait():
                os.kill(self.pid, signal.SIGKILL)

    def result(self) -> Cli:
        self.out.seek(0)
        self.err.seek(0)
        raw = self.out.read()
        return Cli(
            ("omnigraph", *self.args),
            self.returncode if self.returncode is not None else -1,
            raw.decode("utf-8", "replace"),
            self.err.read().decode("utf-8", "replace"),
            raw,
        )


@pytest.fixture
def cleanup() -> Any:
    """Registers held writers and servers; kills / stops whatever a failing test left running."""

    @dataclass
    class Registry:
        held: list[HeldWriter] = field(default_factory=list)
        servers: list[Server] = field(default_factory=list)

        def writer(self, writer: HeldWriter) -> HeldWriter:
            self.held.append(writer)
            return writer

        def server(self, server: Server) -> Server:
            self.servers.append(server)
            return server

    registry = Registry()
    yield registry
    for writer in registry.held:
        writer.kill()
    for server in registry.servers:
        if server.process.poll() is None:
            workers = _descendants(server.process.pid)
            try:
                server.stop()
            except subprocess.TimeoutExpired:
                server.stop(signal.SIGKILL)
            for pid in workers:  # a worker the parent did not take down with it
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
    """The live descendants of process ``pid`` (the server's worker processes)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
            children = [int(child) for child in handle.read().split()]
    except OSError:
        return []
    return [found for child in children for found in (child, *_descendants(child))]


def omnigraph(*args: str) -> Cli:
    return run_cli(OMNIGRAPH, *args)


def load_args(uri: str, directory: Path, branch: str, lines: list[str]) -> list[str]:
    data = write_jsonl(directory, f"load-{uuid.uuid4().hex}.jsonl", lines)
    return ["load", "--mode", "append", "--data", str(data), "--branch", branch, "--json", uri]


def cli_load(uri: str, directory: Path, branch: str, lines: list[str]) -> Cli:
    return omnigraph(*load_args(uri, directory, branch, lines))


def cli_loads(uri: str, directory: Path, loads: list[tuple[str, list[str]]]) -> list[Cli]:
    """``omnigraph load`` of each ``(branch, lines)``, one after the other, in-process (the same
    click command; the held writers and the servers are the real processes of these tests)."""
    return [invoke(OMNIGRAPH, *load_args(uri, directory, branch, lines)) for branch, lines in loads]


def error_code(cli: Cli) -> str | None:
    """The error code a ``--json`` CLI run printed, or None (success, or no JSON error)."""
    try:
        document = json.loads(cli.stdout)
    except json.JSONDecodeError:
        return None
    return document.get("error", {}).get("code") if isinstance(document, dict) else None


@dataclass(frozen=True)
class Reply:
    """One HTTP exchange: the status (0 when the connection failed) and the body."""

    status: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)

    @property
    def code(self) -> str | None:
        try:
            return self.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        return f"HTTP {self.status}: {self.text[:2000]}"


def http(client: httpx.Client, method: str, path: str, **kwargs: Any) -> Reply:
    try:
        response = client.request(method, path, **kwargs)
    except httpx.TransportError as error:
        return Reply(0, f"{type(error).__name__}: {error}")
    return Reply(response.status_code, response.text)


def http_load(client: httpx.Client, branch: str, lines: list[str]) -> Reply:
    return http(
        client,
        "POST",
        f"/branches/{branch}/load",
        params={"mode": "append"},
        content="".join(line + "\n" for line in lines).encode(),
        headers={"content-type": "application/x-ndjson"},
    )


def assert_refused_for(reply_or_cli: Reply | Cli, intent: WriteIntent) -> None:
    """A delete refused because of the live writer's armed intent: 409 / exit 1,
    ``read_set_conflict``, its message naming the operation id."""
    if isinstance(reply_or_cli, Reply):
        assert reply_or_cli.status == 409, (
            f"delete of {intent.graph_branch!r} while a live writer holds intent {intent.operation_id} "
            f"must be refused: {reply_or_cli.describe()}"
        )
        error = reply_or_cli.json()["error"]
    else:
        assert reply_or_cli.returncode == 1, (
            f"delete of {intent.graph_branch!r} while a live writer holds intent {intent.operation_id} "
            f"must be refused:\n{reply_or_cli.describe()}"
        )
        error = reply_or_cli.json()["error"]
    assert error["code"] == "read_set_conflict", error
    assert intent.operation_id in error["message"], error


# -- graph state ---------------------------------------------------------------------------------


def manifest_of(uri: str) -> Manifest:
    return Manifest(open_store(uri))


def incarnation(uri: str, branch: str) -> str | None:
    found = manifest_of(uri).branches().get(branch)
    return found.incarnation if found else None


def branch_tables(uri: str, branch: str) -> dict[str, tuple[str | None, int, int, int]]:
    """Per table the branch pins: (table branch, pinned version, rows, HEAD of that table branch).

    The HEAD is included: recovery that "restores" a table branch another graph branch owns moves
    the HEAD past the pin even when the pin itself is unchanged.
    """
    store = open_store(uri)
    return {
        key: (entry.table_branch, entry.table_version, entry.row_count, latest_version(store, entry.table_path, entry.table_branch))
        for key, entry in sorted(manifest_of(uri).snapshot(branch).tables.items())
    }


def changed_tables(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def ids_on(uri: str, branch: str, table_key: str = "node:Person") -> list[str]:
    """The ids in the image ``branch`` pins for ``table_key``."""
    store = open_store(uri)
    entry = manifest_of(uri).snapshot(branch).table(table_key)
    image = open_dataset(store, entry.table_path, entry.table_branch, entry.table_version)
    return sorted(image.to_table(columns=["id"]).column("id").to_pylist())


def intent_files(uri: str) -> list[str]:
    return sorted(name for name in open_store(uri).list("__recovery") if name.endswith(".json"))


def lance_forks(uri: str) -> list[str]:
    """Every Lance branch of every table dataset, as ``<dataset>@<branch>``."""
    store = open_store(uri)
    return [
        f"{kind}/{name}@{fork}"
        for kind in ("nodes", "edges")
        for name in store.list(kind)
        for fork in list_branches(open_dataset(store, f"{kind}/{name}"))
    ]


def stray_table_branches(uri: str) -> list[str]:
    """Lance branches of table datasets that no graph branch pins (forks left behind)."""
    store = open_store(uri)
    manifest = Manifest(store)
    pinned = {(entry.table_path, entry.table_branch) for name in manifest.branches() for entry in manifest.snapshot(name).tables.values()}
    stray = []
    for kind in ("nodes", "edges"):
        for name in store.list(kind):
            rel = f"{kind}/{name}"
            stray += [f"{rel}@{fork}" for fork in list_branches(open_dataset(store, rel)) if (rel, fork) not in pinned]
    return stray


def assert_graph_sound(uri: str) -> None:
    """No intent, no unpinned fork, every owned table pinned at its HEAD, ``check`` clean."""
    assert intent_files(uri) == [], intent_files(uri)
    assert stray_table_branches(uri) == []
    for branch in manifest_of(uri).branches():
        assert_write_converged(uri, branch)
    checked = invoke(OMNIGRAPH, "check", uri)  # the command in-process (see graph_helpers.invoke)
    assert checked.returncode == 0, checked.describe()


def the_intent_of(uri: str, writer: HeldWriter, branch: str) -> WriteIntent:
    [intent] = list_intents(open_store(uri))
    assert (intent.pid, intent.graph_branch) == (writer.pid, branch), intent
    return intent


def setup_tmp_and_main(uri: str, server: Server) -> None:
    """Branch ``tmp`` owning Person (row ``t0``), ``main`` with Person ``m0``, through the server."""
    assert http(server.client, "POST", "/branches", json={"name": "tmp"}).status == 201
    assert http_load(server.client, "tmp", [person("t0")]).status == 200
    assert http_load(server.client, "main", [person("m0")]).status == 200


# -- scenario 1: recover must not rewind another branch --------------------------------------------


def test_delete_recreate_under_held_writer_never_rewinds_main(root_uri: str, tmp_path: Path, cleanup: Any) -> None:
    """Issue 19, scenario 1: a load to ``tmp`` held after its effect; ``DELETE /branches/tmp`` and
    ``POST /branches tmp``; ``m1`` loaded to main; the held writer killed, the server stopped.

    Whatever the delete answered, every acknowledged write is there afterwards, recovery moves no
    table of main (pins and HEADs equal what main had right after the ``m1`` load), ``recover``
    and ``check`` exit 0 and both branches take writes. The delete itself must have been refused
    (the writer was alive), so ``tmp`` survives with ``t0`` and the re-create is refused."""
    init(root_uri)
    server = cleanup.server(start_fenced(root_uri, workers=2))
    setup_tmp_and_main(root_uri, server)
    tmp_incarnation = incarnation(root_uri, "tmp")
    before = {branch: branch_tables(root_uri, branch) for branch in ("main", "tmp")}

    held = cleanup.writer(HeldWriter(load_args(root_uri, tmp_path, "tmp", [person("h0")]), "write.after_effect"))
    intent = the_intent_of(root_uri, held, "tmp")
    deleted = http(server.client, "DELETE", "/branches/tmp")
    recreated = http(server.client, "POST", "/branches", json={"name": "tmp"})
    m1 = http_load(server.client, "main", [person("m1")])
    assert m1.status == 200, m1.describe()
    main_after_m1 = branch_tables(root_uri, "main")
    assert changed_tables(before["main"], main_after_m1) == {"node:Person"}

    held.kill()
    assert server.stop() in (0, -signal.SIGTERM)
    recovered = omnigraph("recover", "--json", root_uri)
    assert recovered.returncode == 0, f"recover after delete={deleted.describe()}\n{recovered.describe()}"
    assert branch_tables(root_uri, "main") == main_after_m1, "recovery moved a table of main"
    assert ids_on(root_uri, "main") == ["m0", "m1"]
    if deleted.status == 200:  # the branch was replaced: the new incarnation forked main at m0
        assert recreated.status == 201, recreated.describe()
        assert ids_on(root_uri, "tmp") == ["m0"]
    else:
        assert incarnation(root_uri, "tmp") == tmp_incarnation
        assert ids_on(root_uri, "tmp") == ["t0"]  # the killed write was never acknowledged
        tmp_now = branch_tables(root_uri, "tmp")
        assert changed_tables(before["tmp"], tmp_now) <= {"node:Person"}
        assert {k: v[2] for k, v in tmp_now.items()} == {k: v[2] for k, v in before["tmp"].items()}
    assert_graph_sound(root_uri)
    for wrote in cli_loads(root_uri, tmp_path, [("main", [person("after-main")]), ("tmp", [person("after-tmp")])]):
        assert wrote.returncode == 0, wrote.describe()
    assert ids_on(root_uri, "main") == ["after-main", "m0", "m1"]
    assert "after-tmp" in ids_on(root_uri, "tmp")

    # the delete came while the writer was alive (stopped, not dead): it had to be refused
    assert_refused_for(deleted, intent)
    assert recreated.status in (400, 409), f"tmp still exists, its re-create must fail: {recreated.describe()}"


def test_dead_writer_then_delete_recreate_keeps_main(root_uri: str, tmp_path: Path, cleanup: Any) -> None:
    """Scenario 1 with the held writer killed *before* the delete: the delete resolves the dead
    writer's intent and succeeds, the re-create succeeds, ``m1`` lands on main, and ``recover``
    later finds nothing to apply to the new ``tmp`` (main keeps m0 and m1, its tables unmoved)."""
    init(root_uri)
    server = cleanup.server(start_fenced(root_uri, workers=2))
    setup_tmp_and_main(root_uri, server)
    old_incarnation = incarnation(root_uri, "tmp")

    held = cleanup.writer(HeldWriter(load_args(root_uri, tmp_path, "tmp", [person("h0")]), "write.after_effect"))
    the_intent_of(root_uri, held, "tmp")
    held.kill()
    deleted = http(server.client, "DELETE", "/branches/tmp")
    assert deleted.status == 200, deleted.describe()
    recreated = http(server.client, "POST", "/branches", json={"name": "tmp"})
    assert recreated.status == 201, recreated.describe()
    assert recreated.json()["incarnation"] != old_incarnation
    m1 = http_load(server.client, "main", [person("m1")])
    assert m1.status == 200, m1.describe()
    main_after_m1 = branch_tables(root_uri, "main")
    assert server.stop() in (0, -signal.SIGTERM)

    recovered = omnigraph("recover", "--json", root_uri)
    assert recovered.returncode == 0, recovered.describe()
    assert branch_tables(root_uri, "main") == main_after_m1, "recovery moved a table of main"
    assert ids_on(root_uri, "main") == ["m0", "m1"]
    assert ids_on(root_uri, "tmp") == ["m0"]
    assert_graph_sound(root_uri)
    for wrote in cli_loads(root_uri, tmp_path, [("main", [person("after-main")]), ("tmp", [person("after-tmp")])]):
        assert wrote.returncode == 0, wrote.describe()
    assert ids_on(root_uri, "main") == ["after-main", "m0", "m1"]
    assert ids_on(root_uri, "tmp") == ["after-tmp", "m0"]


# -- scenario 2: a two-table write resumed after a delete / re-create -----------------------------

TWO_TABLE_LOADS = {
    # owned table first: the effect on tmp's own Person lands, then Tag (inherited) is forked
    "owned_first": ([person("h1"), json.dumps({"type": "Tag", "data": {"id": "tag-h", "label": "held"}})], "node:Tag", "tag-h"),
    # inherited table first: Company is forked and written, then tmp's own Person
    "inherited_first": ([json.dumps({"type": "Company", "data": {"name": "hc"}}), person("h1")], "node:Company", "hc"),
}


@pytest.mark.parametrize("recreate", [False, True], ids=["delete", "delete+recreate"])
@pytest.mark.parametrize("order", sorted(TWO_TABLE_LOADS))
def test_two_table_write_resumed_after_delete(tmp_path: Path, cleanup: Any, order: str, recreate: bool) -> None:
    """Issue 19, scenario 2: a two-table load to ``tmp`` held after its first effect, then the
    delete (and re-create) attempts, then the write resumes. It either succeeds with its rows on
    ``tmp`` (only possible if the delete was refused) or fails typed leaving nothing behind;
    afterwards ``tmp`` reads (snapshot, export 200), main and tmp take writes, branches are
    created and deleted, ``recover`` and ``check`` exit 0. The delete must have been refused."""
    uri = str(tmp_path / "graph")
    lines, other_table, other_id = TWO_TABLE_LOADS[order]
    init(uri)
    server = cleanup.server(start_fenced(uri, workers=2))
    setup_tmp_and_main(uri, server)

    held = cleanup.writer(HeldWriter(load_args(uri, tmp_path, "tmp", lines), "write.after_effect"))
    intent = the_intent_of(uri, held, "tmp")
    deleted = http(server.client, "DELETE", "/branches/tmp")
    recreated = http(server.client, "POST", "/branches", json={"name": "tmp"}) if recreate else None
    resumed = held.resume()
    story = f"delete: {deleted.describe()}\nre-create: {recreated.describe() if recreated else '-'}\nresumed: {resumed.describe()}"

    exists = "tmp" in manifest_of(uri).branches()
    if resumed.returncode == 0:
        assert deleted.status != 200, f"the write reported success on a branch deleted under it\n{story}"
    else:
        assert (resumed.returncode, error_code(resumed)) in {(1, code) for code in TYPED_WRITE_FAILURES}, story
    if exists:
        snap = http(server.client, "GET", "/branches/tmp/snapshot")
        assert snap.status == 200, f"{snap.describe()}\n{story}"
        exported = http(server.client, "GET", "/branches/tmp/export")
        assert exported.status == 200, f"{exported.describe()}\n{story}"
        rows = {json.loads(line)["data"]["id"] for line in exported.text.splitlines()}
        held_rows = {"h1", other_id}
        if resumed.returncode == 0:
            assert held_rows <= rows, (rows, story)
        else:
            assert held_rows.isdisjoint(rows), (rows, story)  # a failed write leaves no row
    else:
        assert http(server.client, "GET", "/branches/tmp/snapshot").code == "not_found"
        assert http(server.client, "POST", "/branches", json={"name": "tmp"}).status == 201

    # the graph keeps taking writes and branch operations
    for branch, name in (("main", "after-main"), ("tmp", "after-tmp")):
        wrote = http_load(server.client, branch, [person(name)])
        assert wrote.status == 200, f"load to {branch}: {wrote.describe()}\n{story}"
    assert http(server.client, "POST", "/branches", json={"name": "other"}).status == 201
    assert http_load(server.client, "other", [person("on-other")]).status == 200
    assert http(server.client, "DELETE", "/branches/other").status == 200
    assert server.stop() in (0, -signal.SIGTERM)
    recovered = omnigraph("recover", "--json", uri)
    assert recovered.returncode == 0, f"{recovered.describe()}\n{story}"
    assert_graph_sound(uri)
    assert ids_on(uri, "main") == ["after-main", "m0"]
    assert "after-tmp" in ids_on(uri, "tmp")
    assert [name for name in lance_forks(uri) if name.endswith("@other")] == []

    # the writer was alive when the delete came: the delete had to be refused, the write then landed
    assert_refused_for(deleted, intent)
    assert resumed.returncode == 0, story
    assert ids_on(uri, "tmp") == ["after-tmp", "h1", "t0"]
    assert ids_on(uri, "tmp", other_table) == [other_id]


# -- a writer held before its first effect --------------------------------------------------------


@pytest.mark.parametrize("failpoint", ["write.after_arm", "write.after_fork"])
def test_delete_refused_while_commit_is_held(root_uri: str, tmp_path: Path, cleanup: Any, failpoint: str) -> None:
    """The first write of an inherited table on a fresh branch, held right after arming its intent
    or right after forking the table: ``DELETE`` (HTTP) and ``branch delete`` (CLI) are refused
    with ``read_set_conflict`` naming the operation, and leave the branch and the intent alone;
    the resumed write lands; then the delete works and the re-created branch does not see it."""
    init(root_uri)
    server = cleanup.server(start_fenced(root_uri, workers=2))
    assert http_load(server.client, "main", [person("m0")]).status == 200
    assert http(server.client, "POST", "/branches", json={"name": "feat"}).status == 201
    feat_incarnation = incarnation(root_uri, "feat")

    held = cleanup.writer(HeldWriter(load_args(root_uri, tmp_path, "feat", [person("f1")]), failpoint))
    intent = the_intent_of(root_uri, held, "feat")
    assert [table.fork_planned for table in intent.tables] == [True]
    assert_refused_for(http(server.client, "DELETE", "/branches/feat"), intent)
    assert_refused_for(omnigraph("branch", "delete", "feat", root_uri, "--json"), intent)
    assert incarnation(root_uri, "feat") == feat_incarnation
    assert [i.operation_id for i in list_intents(open_store(root_uri))] == [intent.operation_id]

    resumed = held.resume()
    assert resumed.returncode == 0, resumed.describe()
    assert ids_on(root_uri, "feat") == ["f1", "m0"]
    assert ids_on(root_uri, "main") == ["m0"]
    assert_write_converged(root_uri, "feat")

    deleted = http(server.client, "DELETE", "/branches/feat")
    assert deleted.status == 200, deleted.describe()
    assert "feat" not in manifest_of(root_uri).branches()
    assert [name for name in lance_forks(root_uri) if name.endswith("@feat")] == []
    recreated = http(server.client, "POST", "/branches", json={"name": "feat"})
    assert recreated.status == 201, recreated.describe()
    assert ids_on(root_uri, "feat") == ["m0"]
    assert http_load(server.client, "feat", [person("f2")]).status == 200
    assert server.stop() in (0, -signal.SIGTERM)
    assert_graph_sound(root_uri)
    assert ids_on(root_uri, "feat") == ["f2", "m0"]


# -- randomized churn -----------------------------------------------------------------------------

CHURN_SECONDS = 7.0
CHURN = "churn"


@dataclass(frozen=True)
class Attempt:
    """One operation of the churn: what, on which branch, when (monotonic seconds), the outcome."""

    what: str
    branch: str
    key: str
    started: float
    ended: float
    outcome: str  # "ok" or the error code (or "exit N" / "http N" / "transport" when untyped)
    detail: str = ""


def _cli_outcome(cli: Cli) -> str:
    if cli.returncode == 0:
        return "ok"
    return error_code(cli) or f"exit {cli.returncode}"


def _http_outcome(reply: Reply) -> str:
    if 200 <= reply.status < 300:
        return "ok"
    if reply.status == 0:
        return "transport"
    return reply.code or f"http {reply.status}"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_branch_churn_under_concurrent_writers(tmp_path: Path, cleanup: Any, seed: int) -> None:
    """Four writers (two CLI processes, two through the two-worker server) append unique ids to
    ``main`` and ``churn``; the CLI writers sometimes hold their commit after its effect for a
    while and then let it go or kill it (leaving a dead writer's intent); one thread deletes and
    re-creates ``churn`` (HTTP or CLI); one runs ``omnigraph recover`` in a loop.

    Every acknowledged write on main is present at the end; one on ``churn`` is present unless a
    delete of ``churn`` may have come after it (a successful delete that ended after the write
    started); no row of a write that failed is present; writes fail only typed, deletes only with
    ``read_set_conflict``, recover never with drift or an internal error; at the end recover and
    check exit 0, no intent or stray fork is left, and both branches take writes."""
    uri = str(tmp_path / "graph")
    init(uri)
    server = cleanup.server(start_fenced(uri, workers=2))
    assert http(server.client, "POST", "/branches", json={"name": CHURN}).status == 201
    attempts: list[Attempt] = []
    lock = threading.Lock()
    deadline = time.monotonic() + CHURN_SECONDS

    # Every cycle of the churn has an acknowledged write to churn before its delete, however slow
    # the machine: the churner waits for one (bounded), and the writers go on past the deadline
    # (bounded) until one write to churn has been acknowledged.
    acked_since_create = threading.Event()
    acked_ever = threading.Event()

    def record(attempt: Attempt) -> None:
        with lock:
            attempts.append(attempt)
        if attempt.what == "load" and attempt.branch == CHURN and attempt.outcome == "ok":
            acked_since_create.set()
            acked_ever.set()

    def writing() -> bool:
        now = time.monotonic()
        return now < deadline or (not acked_ever.is_set() and now < deadline + CHURN_SECONDS * 8)

    def writer(index: int) -> None:
        rng = random.Random(seed * 100 + index)
        client = httpx.Client(base_url=server.base_url, timeout=120.0)
        directory = tmp_path / f"writer{index}"
        directory.mkdir()
        n = 0
        while writing():
            branch = rng.choice(["main", CHURN])
            key = f"s{seed}w{index}n{n}"
            n += 1
            started = time.monotonic()
            if index < 2 and rng.random() < 0.4:
                # held after its effect for a while, then let go or killed (a dead writer's intent)
                held = HeldWriter(load_args(uri, directory, branch, [person(key)]), "write.after_effect", must_stop=False)
                try:
                    if held.stopped:
                        time.sleep(rng.uniform(0.05, 0.6))
                        if rng.random() < 0.5:
                            held.kill()
                            record(Attempt("load", branch, key, started, time.monotonic(), "killed"))
                            continue
                        cli = held.resume()
                    else:
                        cli = held.result()
                finally:
                    held.kill()
                outcome, detail = _cli_outcome(cli), cli.stderr[-400:]
            elif index < 2:
                cli = cli_load(uri, directory, branch, [person(key)])
                outcome, detail = _cli_outcome(cli), cli.stderr[-400:]
            else:
                reply = http_load(client, branch, [person(key)])
                outcome, detail = _http_outcome(reply), reply.text[:400]
            record(Attempt("load", branch, key, started, time.monotonic(), outcome, detail))
            time.sleep(rng.uniform(0, 0.15))
        client.close()

    def churner() -> None:
        rng = random.Random(seed * 100 + 50)
        client = httpx.Client(base_url=server.base_url, timeout=120.0)
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.05, 0.5))
            acked_since_create.wait(timeout=max(0.0, deadline - time.monotonic()) + CHURN_SECONDS)
            acked_since_create.clear()
            for what in ("delete", "create"):
                while time.monotonic() < deadline + 30:  # a create follows every successful delete
                    started = time.monotonic()
                    if rng.random() < 0.3:
                        args = (
                            ("branch", "delete", CHURN, uri, "--json") if what == "delete" else ("branch", "create", CHURN, uri, "--json")
                        )
                        cli = omnigraph(*args)
                        outcome, detail = _cli_outcome(cli), cli.stderr[-400:]
                    elif what == "delete":
                        reply = http(client, "DELETE", f"/branches/{CHURN}")
                        outcome, detail = _http_outcome(reply), reply.text[:400]
                    else:
                        reply = http(client, "POST", "/branches", json={"name": CHURN})
                        outcome, detail = _http_outcome(reply), reply.text[:400]
                    record(Attempt(what, CHURN, what, started, time.monotonic(), outcome, detail))
                    # a delete that lost a race to a write is retried, like a create that lost one
                    retried = {"read_set_conflict"} if what == "delete" else TYPED_WRITE_FAILURES
                    if outcome == "ok" or outcome not in retried:
                        break
                    time.sleep(rng.uniform(0.02, 0.2))
                if outcome != "ok":
                    break
                time.sleep(rng.uniform(0, 0.3))
        client.close()

    def recoverer() -> None:
        rng = random.Random(seed * 100 + 60)
        while time.monotonic() < deadline:
            started = time.monotonic()
            cli = omnigraph("recover", "--json", uri)
            record(Attempt("recover", "*", "recover", started, time.monotonic(), _cli_outcome(cli), cli.stdout[-400:] + cli.stderr[-400:]))
            time.sleep(rng.uniform(0.1, 0.6))

    crashed: list[str] = []

    def guarded(target: Any, *args: Any) -> threading.Thread:
        def run() -> None:
            try:
                target(*args)
            except BaseException as error:
                crashed.append(f"{target.__name__}{args}: {type(error).__name__}: {error}")

        return threading.Thread(target=run)

    threads = [guarded(writer, i) for i in range(4)] + [guarded(churner), guarded(recoverer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WAIT_SECONDS)
        assert not thread.is_alive(), "a churn thread did not finish"
    assert crashed == [], crashed

    problems = []
    for a in attempts:
        allowed = {"ok", "killed"} | ({"read_set_conflict"} if a.what == "delete" else TYPED_WRITE_FAILURES | UNDECIDED)
        if a.what == "recover":
            allowed = {"ok", "not_found", "read_set_conflict"}  # a recover may race a delete; never drift
        if a.outcome not in allowed:
            problems.append(f"{a.what} {a.branch} {a.key}: {a.outcome} {a.detail}")
    tally = Counter((a.what, a.branch, a.outcome) for a in attempts)
    summary = f"seed {seed}: {dict(tally)}\n" + "\n".join(problems[:15])

    if CHURN not in manifest_of(uri).branches():
        assert http(server.client, "POST", "/branches", json={"name": CHURN}).status == 201, summary
    assert server.stop() in (0, -signal.SIGTERM)
    final = omnigraph("recover", "--json", uri)
    assert final.returncode == 0, f"{final.describe()}\n{summary}"
    assert problems == [], summary
    assert_graph_sound(uri)

    acked = {
        branch: {a.key for a in attempts if a.what == "load" and a.branch == branch and a.outcome == "ok"} for branch in ("main", CHURN)
    }
    # A killed writer's effect can be taken into a concurrent commit on the same table that passed
    # its pin check just before the effect landed (Lance rebases an append onto an append), and a
    # write whose effect a dead writer's rollback undid ends recovery_required: both the write
    # protocol's support boundary for concurrent processes, not a branch-incarnation matter. The
    # rows of either are present or not; `recover` decides, and nothing acknowledged is at stake.
    killed = {a.key for a in attempts if a.what == "load" and a.outcome in {"killed"} | UNDECIDED}
    deletes = [a for a in attempts if a.what == "delete" and a.outcome == "ok"]
    on_main, on_churn = set(ids_on(uri, "main")), set(ids_on(uri, CHURN))
    assert acked["main"] - on_main == set(), f"acknowledged writes lost on main\n{summary}"
    assert on_main - acked["main"] - killed == set(), f"rows of failed writes on main\n{summary}"
    must_stay = {
        a.key
        for a in attempts
        if a.what == "load" and a.branch == CHURN and a.outcome == "ok" and not any(d.ended > a.started for d in deletes)
    }
    assert must_stay - on_churn == set(), f"acknowledged writes lost on {CHURN}\n{summary}"
    assert on_churn - acked["main"] - acked[CHURN] - killed == set(), f"rows of failed writes on {CHURN}\n{summary}"
    # the churn did happen
    assert deletes and acked["main"] and acked[CHURN], summary
    for wrote in cli_loads(uri, tmp_path, [(branch, [person(f"final-{branch}")]) for branch in ("main", CHURN)]):
        assert wrote.returncode == 0, wrote.describe()
    for branch in ("main", CHURN):
        assert f"final-{branch}" in ids_on(uri, branch)


# -- scenario 3: SIGTERM of a two-worker server with writes in flight ------------------------------

# Seconds after the SIGTERM at which the blocking writer is let go: the server's queued commits
# then run while the graceful shutdown (10 s in `omnigraph serve`) runs out and the workers exit;
# the first round has no blocker (loads simply in flight at the SIGTERM).
RELEASES = [None, 9.7]


def wide_records(key: str) -> list[str]:
    """One record in each of five node tables (a commit with five table effects)."""
    return [
        person(key),
        json.dumps({"type": "Company", "data": {"name": key}}),
        json.dumps({"type": "Tag", "data": {"id": key, "label": key}}),
        json.dumps({"type": "Membership", "data": {"tenant": key, "slot": 1}}),
        json.dumps({"type": "Doc", "data": {"slug": key, "title": key, "status": "draft"}}),
    ]


def test_sigterm_of_two_workers_leaves_no_intent(tmp_path: Path, cleanup: Any) -> None:
    """Issue 19, scenario 3: SIGTERM to ``omnigraph serve --workers 2`` while loads are in flight.

    In the later rounds a CLI writer held after its effect on main's Person makes every server
    load to main wait (a live writer's commit in flight on the same table), so each worker has a
    queue of five-table commits when the SIGTERM comes; the writer is let go shortly before the
    graceful-shutdown timeout, so the queued commits run while the workers shut down. Each round:
    the server exits, no intent is left in ``__recovery/``, every 200 is present; at the end
    ``recover`` finds nothing to resolve and the graph is sound."""
    uri = str(tmp_path / "graph")
    init(uri)
    for round_index, release_after in enumerate(RELEASES):
        server = cleanup.server(start_fenced(uri, workers=2))
        blocker = None
        if release_after is not None:
            blocker = cleanup.writer(HeldWriter(load_args(uri, tmp_path, "main", [person(f"b{round_index}")]), "write.after_effect"))
        replies: dict[str, Reply] = {}

        def fire(key: str, blocker: HeldWriter | None = blocker, server: Server = server, replies: dict[str, Reply] = replies) -> None:
            records = [person(f"{key}-{k}") for k in range(500)] if blocker is None else wide_records(f"{key}-0")
            with httpx.Client(base_url=server.base_url, timeout=120.0) as client:
                replies[key] = http_load(client, "main", records)

        senders = [threading.Thread(target=fire, args=(f"r{round_index}q{i}",)) for i in range(12 if blocker is None else 32)]
        for sender in senders:
            sender.start()
        time.sleep(0.4 if blocker is None else 0.8)
        server.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        if blocker is not None:
            time.sleep(max(0.0, signalled + release_after - time.monotonic()))
            released = blocker.resume()
            assert released.returncode == 0, released.describe()
        status = server.process.wait(timeout=60)
        server.log.close()
        for sender in senders:
            sender.join(timeout=WAIT_SECONDS)
        story = f"round {round_index} (release {release_after}): {Counter(r.status for r in replies.values())}"
        assert status in (0, -signal.SIGTERM), story
        assert intent_files(uri) == [], f"a clean shutdown left intents behind: {intent_files(uri)}; {story}"
        present = set(ids_on(uri, "main"))
        for key, reply in replies.items():
            if reply.status == 200:
                assert f"{key}-0" in present, (key, story)
        if blocker is not None:
            assert f"b{round_index}" in present
    recovered = omnigraph("recover", "--json", uri)
    assert recovered.returncode == 0 and recovered.json()["recovered"] == [], recovered.describe()
    assert_graph_sound(uri)
