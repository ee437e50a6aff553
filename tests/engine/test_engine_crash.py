"""Crash matrix of the write protocol: a real process exits at each named failpoint.

After the crash, the next read-write open must converge: a commit that did not publish leaves no
trace (rows, versions pinned), a commit that published stays, no intent is left, the resolution is
logged, and the graph keeps accepting writes (including the same load again).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.engine.graph import init_graph, open_graph
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.export import export_lines
from omnigraph.engine.ops.load import load
from omnigraph.engine.reconcile.recovery import RECOVERY_LOG_DIR, list_intents
from omnigraph.engine.storage.lance_io import latest_version
from omnigraph.engine.storage.names import RECOVERY_DIR
from omnigraph.engine.storage.store import open_store

SCHEMA = """
node Person { name: String @key }
edge Knows: Person -> Person
"""
BASE = [
    {"type": "Person", "data": {"name": "ann"}},
    {"type": "Person", "data": {"name": "bob"}},
]
DELTA = [
    {"type": "Person", "data": {"name": "cid"}},
    {"edge": "Knows", "from": "ann", "to": "cid", "data": {"id": "k1"}},
]
OMNIGRAPH = str(Path(sys.executable).parent / "omnigraph")


def _jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _export(uri: str, branch: str) -> list[str]:
    return list(export_lines(open_graph(open_store(uri), FENCED_PROFILE, write=False), branch))


def _run_load(uri: str, data: Path, branch: str, failpoint: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if failpoint:
        env[FAILPOINT_ENV] = failpoint
    return subprocess.run(
        [OMNIGRAPH, "load", "--mode", "append", "--data", str(data), "--branch", branch, uri],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


CASES = [
    # (failpoint, branch, published, on S3 too): on S3 a crash after the table fork (a Lance
    # branch) and after the publish (a Lance commit); the others repeat those kinds of write
    ("write.after_arm", "main", False, False),
    ("write.after_fork", "feat", False, True),
    ("write.after_effect", "main", False, False),
    ("write.after_effect", "feat", False, False),
    ("write.after_publish", "main", True, True),
    ("write.after_publish", "feat", True, False),
]


@pytest.mark.parametrize(
    "backend, failpoint, branch, published",
    [("local", f, b, p) for f, b, p, _ in CASES] + [("s3", f, b, p) for f, b, p, on_s3 in CASES if on_s3],
    indirect=["backend"],
)
def test_crashed_commit_converges_on_next_open(root_uri: str, tmp_path: Path, failpoint: str, branch: str, published: bool) -> None:
    graph = init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE)
    load(graph, _jsonl(BASE), mode="append", branch="main", actor="test")
    create_branch(graph, "feat")
    before = _export(root_uri, branch)
    delta = tmp_path / "delta.jsonl"
    delta.write_bytes(_jsonl(DELTA))

    crashed = _run_load(root_uri, delta, branch, failpoint)
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    store = open_store(root_uri)
    assert len(list_intents(store)) == 1

    reopened = open_graph(open_store(root_uri), FENCED_PROFILE, write=True)
    assert list_intents(store) == []
    [record] = reopened.recovered
    assert record.outcome == ("published" if published else "rolled_back")
    assert store.exists(f"{RECOVERY_LOG_DIR}/{record.operation_id}.json")
    assert [name for name in store.list(RECOVERY_DIR) if name.endswith(".json")] == []

    after = _export(root_uri, branch)
    if published:
        assert len(after) == len(before) + 2
        assert _run_load(root_uri, delta, branch, None).returncode == 1  # now a key_conflict
    else:
        assert after == before
        # Every table HEAD equals what the manifest pins (restores were republished).
        for entry in reopened.manifest.snapshot(branch).tables.values():
            assert latest_version(store, entry.table_path, entry.table_branch) == entry.table_version
        rerun = _run_load(root_uri, delta, branch, None)
        assert rerun.returncode == 0, rerun.stderr
        assert len(_export(root_uri, branch)) == len(before) + 2
    untouched = "main" if branch == "feat" else "feat"
    assert len(_export(root_uri, untouched)) == len(BASE)


def test_live_writers_intent_is_left_alone(root_uri: str) -> None:
    """An intent whose writer is a live process on this host is not resolved by another open."""
    from omnigraph.engine.reconcile.recovery import WriteIntent, arm
    from omnigraph.engine.storage.process import process_start_marker, this_host

    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE)
    store = open_store(root_uri)
    intent = WriteIntent(
        operation_id="01LIVE0000000000000000000",
        graph_branch="main",
        base_manifest_version=1,
        base_commit_id="x",
        tables=[],
        actor="t",
        program="omnigraph",
        host=this_host(),
        pid=os.getpid(),
        process_start=process_start_marker(os.getpid()),
        created_at=0,
    )
    arm(store, intent)
    assert open_graph(open_store(root_uri), FENCED_PROFILE, write=True).recovered == []
    assert [i.operation_id for i in list_intents(store)] == [intent.operation_id]
    dead = intent.model_copy(update={"operation_id": "01DEAD0000000000000000000", "pid": 2**22 + 17})
    arm(store, dead)
    recovered = open_graph(open_store(root_uri), FENCED_PROFILE, write=True).recovered
    assert [r.operation_id for r in recovered] == [dead.operation_id]


def test_an_intent_disarmed_while_listing_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Concurrent writers disarm their intents at any moment: a listed-then-gone intent is skipped."""
    from omnigraph.engine.reconcile.recovery import WriteIntent, arm, intent_path
    from omnigraph.engine.storage.store import GraphStore

    store = open_store(str(tmp_path / "g"))
    for operation_id in ("01AAAA0000000000000000000", "01BBBB0000000000000000000"):
        arm(
            store,
            WriteIntent(
                operation_id=operation_id,
                graph_branch="main",
                base_manifest_version=1,
                base_commit_id="c",
                tables=[],
                actor="t",
                program="omnigraph",
                host="h",
                pid=1,
                process_start=None,
                created_at=0,
            ),
        )
    real_read = GraphStore.read_bytes

    def read_then_vanish(self: GraphStore, rel: str) -> bytes:
        if rel == intent_path("01AAAA0000000000000000000"):
            raise FileNotFoundError(rel)
        return real_read(self, rel)

    monkeypatch.setattr(GraphStore, "read_bytes", read_then_vanish)
    assert [i.operation_id for i in list_intents(store)] == ["01BBBB0000000000000000000"]


def test_a_reused_pid_of_another_user_does_not_keep_a_dead_intent_alive(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """kill(pid, 0) refused (another user's process): the start marker decides, not the refusal."""
    store = open_store(str(tmp_path / "g"))
    from omnigraph.engine.reconcile.recovery import WriteIntent, owner_is_alive
    from omnigraph.engine.storage.process import process_start_marker, this_host

    def refuse(pid: int, signal: int) -> None:
        raise PermissionError(pid)

    monkeypatch.setattr(os, "kill", refuse)
    dead = WriteIntent(
        operation_id="01PID0000000000000000000",
        graph_branch="main",
        base_manifest_version=1,
        base_commit_id="c",
        tables=[],
        actor="t",
        program="omnigraph",
        host=this_host(),
        pid=1,
        process_start="not-the-real-start",
        created_at=0,
    )
    assert owner_is_alive(store, dead) is False
    parent = os.getppid()  # a live process other than this one (this one's own intents are told apart otherwise)
    live = dead.model_copy(update={"pid": parent, "process_start": process_start_marker(parent)})
    assert owner_is_alive(store, live) is True


def test_this_processs_intent_is_alive_only_while_its_commit_runs(tmp_path: Path) -> None:
    """Armed: in flight. Given up with the intent kept (:func:`abandon`): resolvable as a dead
    writer's although this process lives on."""
    from omnigraph.engine.reconcile import recovery
    from omnigraph.engine.reconcile.recovery import WriteIntent, owner_is_alive
    from omnigraph.engine.storage.process import process_start_marker, this_host

    store = open_store(str(tmp_path / "g"))
    mine = WriteIntent(
        operation_id="01OWN0000000000000000000",
        graph_branch="main",
        base_manifest_version=1,
        base_commit_id="c",
        tables=[],
        actor="t",
        program="omnigraph",
        host=this_host(),
        pid=os.getpid(),
        process_start=process_start_marker(os.getpid()),
        created_at=0,
    )
    recovery.arm(store, mine)
    assert owner_is_alive(store, mine) is True
    recovery.abandon(mine.operation_id)
    assert owner_is_alive(store, mine) is False
    assert [i.operation_id for i in list_intents(store)] == [mine.operation_id]  # kept for recovery
    recovery.disarm(store, mine.operation_id)
    assert list_intents(store) == []


def test_a_writer_does_not_publish_a_dead_commits_unpublished_rows(root_uri: str, tmp_path: Path) -> None:
    """A graph opened before another process died mid-commit: its next write on the same table
    resolves the dead commit first instead of stacking on (and publishing) its rows."""
    graph = init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE)
    load(graph, _jsonl(BASE), mode="append", branch="main", actor="test")
    already_open = open_graph(open_store(root_uri), FENCED_PROFILE, write=True)
    delta = tmp_path / "delta.jsonl"
    delta.write_bytes(_jsonl(DELTA))  # Person cid + Knows ann->cid: two tables
    # Effects land in table-key order: the dead commit's edge k1 (to the unpublished cid) landed.
    assert _run_load(root_uri, delta, "main", "write.after_effect").returncode == FAILPOINT_EXIT_STATUS
    edge = {"edge": "Knows", "from": "ann", "to": "bob", "data": {"id": "k2"}}
    load(already_open, _jsonl([edge]), mode="append", branch="main", actor="b")
    exported = "\n".join(_export(root_uri, "main"))
    assert '"k2"' in exported and '"cid"' not in exported and '"k1"' not in exported
    assert list_intents(open_store(root_uri)) == []


def _interrupt_fork(uri: str, branch: str, table_key: str) -> str:
    """What a writer killed inside Lance's fork of ``table_key`` for ``branch`` leaves: the fork's
    ``tree/<branch>`` written, its ref not (made here by forking, then deleting the ref)."""
    from omnigraph.engine.manifest.manifest import Manifest
    from omnigraph.engine.storage.lance_io import list_branches, open_dataset

    store = open_store(uri)
    entry = Manifest(store).snapshot(branch).table(table_key)
    open_dataset(store, entry.table_path).create_branch(branch, reference=("main", entry.table_version))
    store.delete(f"{entry.table_path}/_refs/branches/{branch}.json")
    assert branch not in list_branches(open_dataset(store, entry.table_path))
    assert store.list(f"{entry.table_path}/tree/{branch}")
    return entry.table_path


def test_a_writer_killed_inside_a_fork_is_resolved_by_the_next_write(tmp_path: Path) -> None:
    """A real kill after the intent is armed, then the fork's leftovers as a kill inside Lance
    leaves them. The next write's read-write open removes them (its dead intent planned that
    fork), forks again and lands; a live process that met them first was told to run
    `omnigraph recover`, which does the same."""
    uri = str(tmp_path / "g")
    graph = init_graph(open_store(uri), SCHEMA, FENCED_PROFILE, actor="t")
    load(graph, _jsonl(BASE), mode="append", branch="main", actor="t")
    create_branch(graph, "feat")
    live = open_graph(open_store(uri), FENCED_PROFILE, write=True)  # a long-lived writer, opened before the crash
    data = tmp_path / "delta.jsonl"
    data.write_bytes(_jsonl(DELTA[:1]))
    assert _run_load(uri, data, "feat", "write.after_arm").returncode == FAILPOINT_EXIT_STATUS
    _interrupt_fork(uri, "feat", "node:Person")

    from omnigraph.engine.errors import RecoveryRequired

    with pytest.raises(RecoveryRequired) as refused:
        load(live, _jsonl([{"type": "Person", "data": {"name": "dan"}}]), mode="append", branch="feat", actor="t")
    assert list_intents(open_store(uri))[0].operation_id != refused.value.details.get("operation_id")
    assert len(list_intents(open_store(uri))) == 1  # the dead writer's; the live one disarmed its own
    advice = f"omnigraph recover {uri}"
    assert advice in refused.value.message
    recovered = subprocess.run([OMNIGRAPH, *advice.split()[1:], "--json"], capture_output=True, text=True, timeout=120)
    assert recovered.returncode == 0, recovered.stderr
    assert list_intents(open_store(uri)) == []

    _interrupt_fork(uri, "feat", "node:Person")  # once more, for the next command's own open
    assert _run_load(uri, data, "feat", "write.after_arm").returncode == FAILPOINT_EXIT_STATUS
    landed = _run_load(uri, data, "feat", None)
    assert landed.returncode == 0, landed.stderr
    assert any('"cid"' in line for line in _export(uri, "feat"))
    assert list_intents(open_store(uri)) == []
    check = subprocess.run([OMNIGRAPH, "check", "--json", uri], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout
