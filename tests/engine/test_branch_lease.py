"""Branch create/delete killed between their durable steps, contention on a branch's lease, and
writes whose branch was deleted (or deleted and created again) before their first effect.

Every crash is a real process exit at a named failpoint; every hold a real stopped process. After
each, the command the tools name is run and must resolve the state: `check` exits 0, no intent
or held lease is left, and writes to every branch still work.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS, STOP_SUFFIX, wait_until_stopped
from omnigraph.engine.reconcile.branch_lease import lapsed
from omnigraph.engine.reconcile.recovery import RECOVERY_LOG_DIR, list_intents
from omnigraph.engine.storage.store import open_store
from tests.conftest import new_root
from tests.support.graph_helpers import OMNIGRAPH, PROJECT, export_text, graph_for, make_example_graph, omnigraph, person, write_jsonl
from tests.support.serve_helpers import start_fenced


def _names(uri: str, branch: str = "main") -> list[str]:
    return sorted(json.loads(line)["data"]["name"] for line in export_text(uri, branch, ["Person"]).splitlines())


def _load(uri: str, data: Path, branch: str = "main", failpoint: str | None = None):
    env = {FAILPOINT_ENV: failpoint} if failpoint else None
    return omnigraph("load", "--mode", "append", "--data", data, "--branch", branch, uri, env=env)


def _held(argv: list[str], name: str) -> subprocess.Popen[str]:
    """Start ``argv`` and wait until it stops at failpoint ``name``."""
    process = subprocess.Popen(
        [str(a) for a in argv], env=_env_with(name + STOP_SUFFIX), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_until_stopped(process.pid)
    return process


def _env_with(failpoints: str) -> dict[str, str]:
    return {**os.environ, FAILPOINT_ENV: failpoints}


def _resume(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    process.send_signal(signal.SIGCONT)
    out, err = process.communicate(timeout=180)
    return process.returncode, out, err


def _assert_clean(uri: str) -> None:
    checked = omnigraph("check", uri)
    assert checked.returncode == 0, checked.describe()
    store = open_store(uri)
    assert list_intents(store) == []
    assert lapsed(store) == []


@pytest.fixture(params=["local"])
def backend(request: pytest.FixtureRequest) -> str:
    """Local unless a test parametrises ``backend`` (indirectly) with ``s3`` too."""
    if request.param == "s3":
        request.getfixturevalue("s3_server")
    return str(request.param)


@pytest.fixture()
def graph(backend: str, tmp_path: Path) -> str:
    uri = new_root(backend, tmp_path)
    make_example_graph(uri)
    omnigraph("branch", "create", "tmp", uri).ok()
    _load(uri, write_jsonl(tmp_path, "t0.jsonl", [person("t0", 1)]), "tmp").ok()
    return uri


@pytest.mark.parametrize(
    "backend, failpoint",
    [("local", "branch.after_lease"), ("local", "branch.after_delete"), ("s3", "branch.after_delete")],
    indirect=["backend"],
)
def test_a_killed_delete_is_reported_by_check_and_completed_by_recover(graph: str, tmp_path: Path, failpoint: str) -> None:
    main_before = _names(graph)
    killed = omnigraph("branch", "delete", "tmp", graph, env={FAILPOINT_ENV: failpoint})
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.describe()

    checked = omnigraph("check", "--json", graph)
    assert checked.returncode == 4, checked.describe()
    findings = [f for f in checked.json()["error"]["details"]["findings"] if f["kind"] == "interrupted_branch_operation"]
    assert len(findings) == 1 and f"omnigraph recover {graph}" in findings[0]["message"]
    omnigraph("recover", graph).ok()  # the command check names
    _assert_clean(graph)

    exists = "tmp" in omnigraph("branch", "list", graph).ok().stdout.split()
    assert exists == (failpoint == "branch.after_lease")
    if exists:
        omnigraph("branch", "delete", "tmp", graph).ok()
    omnigraph("branch", "create", "tmp", graph).ok()
    _load(graph, write_jsonl(tmp_path, "n.jsonl", [person("n1", 2)]), "tmp").ok()
    assert _names(graph, "tmp") == sorted([*main_before, "n1"])  # nothing of the old tmp (t0) came back
    assert _names(graph) == main_before
    _assert_clean(graph)


def test_a_delete_killed_inside_lance_leaves_nothing_that_blocks_the_next_branch_of_its_name(graph: str, tmp_path: Path) -> None:
    """Killed after the manifest branch went, and inside Lance's delete of a table branch (its ref
    gone, its data left): `omnigraph recover` removes the data too, so a new ``tmp`` forks that
    table again."""
    killed = omnigraph("branch", "delete", "tmp", graph, env={FAILPOINT_ENV: "branch.after_delete"})
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.describe()
    store = open_store(graph)
    person_table = graph_for(graph, write=False).manifest.snapshot("main").table("node:Person").table_path
    store.delete(f"{person_table}/_refs/branches/tmp.json")
    assert store.list(f"{person_table}/tree/tmp")
    omnigraph("recover", graph).ok()
    assert not store.list(f"{person_table}/tree/tmp")
    omnigraph("branch", "create", "tmp", graph).ok()
    _load(graph, write_jsonl(tmp_path, "n.jsonl", [person("n1", 2)]), "tmp").ok()
    assert "n1" in _names(graph, "tmp")
    _assert_clean(graph)


def test_a_killed_create_is_completed_by_recover(graph: str, tmp_path: Path) -> None:
    killed = omnigraph("branch", "create", "other", graph, env={FAILPOINT_ENV: "branch.before_create"})
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.describe()
    assert omnigraph("check", graph).returncode == 4
    omnigraph("recover", graph).ok()
    _assert_clean(graph)
    omnigraph("branch", "create", "other", graph).ok()
    _load(graph, write_jsonl(tmp_path, "o.jsonl", [person("o1", 3)]), "other").ok()
    _assert_clean(graph)


def test_a_branch_operation_while_another_holds_the_lease_is_refused(graph: str) -> None:
    held = _held([OMNIGRAPH, "branch", "delete", "tmp", graph], "branch.after_lease")
    try:
        refused = omnigraph("branch", "delete", "tmp", graph)
        assert refused.returncode == 1 and "read_set_conflict" in refused.stderr, refused.describe()
        assert f"pid {held.pid}" in refused.stderr
    finally:
        code, _, err = _resume(held)
    assert code == 0, err
    assert "tmp" not in omnigraph("branch", "list", graph).ok().stdout.split()
    _assert_clean(graph)


@pytest.mark.parametrize("backend, recreate", [("local", False), ("local", True), ("s3", True)], indirect=["backend"])
def test_a_write_whose_branch_went_away_before_arming_fails_typed_and_writes_nothing(graph: str, tmp_path: Path, recreate: bool) -> None:
    data = write_jsonl(tmp_path, "h.jsonl", [person("h1", 4), '{"type": "Company", "data": {"name": "hc"}}'])
    held = _held([OMNIGRAPH, "load", "--mode", "append", "--data", data, "--branch", "tmp", graph], "write.after_prepare")
    try:
        omnigraph("branch", "delete", "tmp", graph).ok()  # nothing is armed yet: the delete goes ahead
        if recreate:
            omnigraph("branch", "create", "tmp", graph).ok()
    finally:
        code, _, err = _resume(held)
    assert code == 1, err
    assert ("read_set_conflict" if recreate else "not_found") in err
    assert "nothing was written" in err
    if recreate:
        assert "h1" not in _names(graph, "tmp")  # never applied to the new branch of that name
        _load(graph, write_jsonl(tmp_path, "n.jsonl", [person("n1", 2)]), "tmp").ok()
    _load(graph, write_jsonl(tmp_path, "m.jsonl", [person("m1", 2)])).ok()
    _assert_clean(graph)


def test_a_dead_writers_intent_is_resolved_by_the_delete(graph: str, tmp_path: Path) -> None:
    """Through a server whose read-write graph is already open (so no open resolves it first)."""
    server = start_fenced(graph)
    try:
        assert server.load([person("warm", 1)]).status_code == 200
        crashed = _load(graph, write_jsonl(tmp_path, "h.jsonl", [person("h1", 4)]), "tmp", failpoint="write.after_effect")
        assert crashed.returncode == FAILPOINT_EXIT_STATUS
        [intent] = list_intents(open_store(graph))
        assert server.client.delete("/branches/tmp").status_code == 200
        assert server.client.post("/branches", json={"name": "tmp"}).status_code == 201
    finally:
        assert server.stop() in (0, -signal.SIGTERM)
    record = json.loads(open_store(graph).read_bytes(f"{RECOVERY_LOG_DIR}/{intent.operation_id}.json"))
    assert record["outcome"] == "branch_deleted"
    assert "h1" not in _names(graph, "tmp") and "t0" not in _names(graph, "tmp")
    _assert_clean(graph)


_DELETER = """
import os, sys
from omnigraph.engine.ops.branches import delete_branch
from omnigraph.engine.failpoints import FAILPOINT_ENV
from tests.support.graph_helpers import graph_for
graph = graph_for(sys.argv[1], write=True)  # open read-write now, before the intent below dies
print("ready", flush=True)
sys.stdin.readline()
os.environ[FAILPOINT_ENV] = "branch.after_delete"
delete_branch(graph, sys.argv[2])
"""


def test_an_intent_of_a_gone_incarnation_never_touches_the_new_branch(graph: str, tmp_path: Path) -> None:
    """A dead first write to `fresh` (its fork planned and made); a delete of `fresh` by a process
    that opened the graph earlier (so it resolved nothing) killed after removing the branch and
    before resolving that intent; then a new `fresh` whose first write, through a server that also
    opened earlier, forks the same table from the same parent ref and is acknowledged. Recovering
    the old intent must not delete the new branch's published fork."""
    server = start_fenced(graph)
    try:
        assert server.load([person("warm", 1)]).status_code == 200  # the server's graph is open read-write now
        omnigraph("branch", "create", "fresh", graph).ok()  # so both incarnations fork from one main image
        deleter = subprocess.Popen(
            [sys.executable, "-c", _DELETER, graph, "fresh"],
            cwd=PROJECT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert deleter.stdout is not None and deleter.stdout.readline().strip() == "ready"
        crashed = _load(graph, write_jsonl(tmp_path, "h.jsonl", [person("h1", 4)]), "fresh", failpoint="write.after_fork")
        assert crashed.returncode == FAILPOINT_EXIT_STATUS
        _, err = deleter.communicate("go\n", timeout=120)
        assert deleter.returncode == FAILPOINT_EXIT_STATUS, err
        assert server.client.post("/branches", json={"name": "fresh"}).status_code == 201
        acked = server.load([person("acked", 5)], branch="fresh")
        assert acked.status_code == 200, acked.text
    finally:
        assert server.stop() in (0, -signal.SIGTERM)
    [old] = list_intents(open_store(graph))
    recovered = omnigraph("recover", "--json", graph).ok().json()
    [record] = recovered["recovered"]
    assert record["operation_id"] == old.operation_id and record["outcome"] == "branch_gone"
    assert [t["action"] for t in record["tables"]] == ["unchanged"]  # the fork of that name is the new branch's
    assert "acked" in _names(graph, "fresh") and "h1" not in _names(graph, "fresh")
    _load(graph, write_jsonl(tmp_path, "f2.jsonl", [person("f2", 6)]), "fresh").ok()
    _assert_clean(graph)


def test_whole_graph_reads_skip_a_branch_deleted_after_they_listed_it(graph: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every read of all branches (the read-write open's audit and drift settlement, the commit
    graph, branch list) lists the branches, then reads each: a branch deleted in between is left
    out instead of failing the whole read. The interleaving is fixed by answering the listing
    with the one taken before the delete."""
    from omnigraph.engine.access import writer_audit
    from omnigraph.engine.manifest.commit_graph import load_commit_graph
    from omnigraph.engine.manifest.manifest import Manifest
    from omnigraph.engine.ops.branches import branch_documents
    from omnigraph.engine.reconcile import drift

    stale = Manifest(open_store(graph)).branches()
    omnigraph("branch", "delete", "tmp", graph).ok()
    monkeypatch.setattr(Manifest, "branches", lambda self: stale)
    opened = graph_for(graph, write=False)
    assert list(opened.manifest.snapshots()) == ["main"]
    assert writer_audit.foreign_heads(opened.manifest) == []
    assert writer_audit.readiness_problems(opened.store, opened.manifest) == []
    assert drift.settle_all(opened.store, opened.manifest, actor="test", require_fencing=True) == []
    assert load_commit_graph(opened.manifest).nodes
    assert [d["name"] for d in branch_documents(opened)] == ["main"]


def test_lease_tokens_grow_and_a_lapsed_holder_is_taken_over_and_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In one process, as two holders: a live lease refuses a second taker; once its renewals stop
    for its expiry it is taken over with the next token; the old holder's checks then refuse."""
    from omnigraph.engine.errors import ReadSetConflict
    from omnigraph.engine.reconcile import branch_lease

    store = open_store(str(tmp_path / "g"))
    monkeypatch.setenv(branch_lease.LEASE_SECONDS_ENV, "0.3")
    first = branch_lease.try_acquire(store, "main", "write").held
    assert first is not None and first.token == 1
    assert branch_lease.try_acquire(store, "main", "write").held is None  # renewed: live
    first.stop_renewing()  # what a stopped process does
    time.sleep(0.4)
    second = branch_lease.try_acquire(store, "main", "write")
    assert second.held is not None and second.held.token == 2
    taken = second.taken_over()
    assert taken is not None and taken.sequence == 1
    with pytest.raises(ReadSetConflict, match="lapsed"):
        first.check("this write")
    first.release()  # a lost lease is left as it is
    assert branch_lease.latest(store, "main") == second.held.record
    second.held.release()
    released = branch_lease.latest(store, "main")
    assert released is not None and (released.sequence, released.state) == (2, "released")
    assert branch_lease.try_acquire(store, "main", "write").held is not None  # and free again, token 3
    assert [name for name in store.list("__recovery/branches/main") if name.endswith(".json")] == ["000000000003.json"]


@pytest.mark.parametrize("value", ["0", "-1", "abc", "3601"])
def test_a_lease_expiry_out_of_range_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from omnigraph.engine.errors import BadRequest
    from omnigraph.engine.reconcile import branch_lease

    monkeypatch.setenv(branch_lease.LEASE_SECONDS_ENV, value)
    with pytest.raises(BadRequest, match="OMNIGRAPH_LEASE_SECONDS"):
        branch_lease.lease_seconds()
