"""Writers fence each other through the branch lease: no torn multi-table commit, no wedged graph.

Every mutation here is one graph commit of two tables, ``insert Person {name, tag}`` and
``insert Knows {from: name, to: "root0"}``, so each must show both rows or neither. The
interleavings that used to tear a commit (a writer paused mid-commit while another commits on top
of its unpublished effect, a writer killed, a writer on another host taken for dead) are made
exact with stop failpoints on real processes; after each, ``omnigraph recover`` then ``omnigraph
check`` must exit 0 and a further write must succeed. The invariant every test checks: every
published table version contains only effects of published commits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_ONCE_ENV, STOP_SUFFIX, wait_until_stopped
from omnigraph.engine.reconcile.branch_lease import LEASE_SECONDS_ENV
from omnigraph.engine.reconcile.recovery import RECOVERY_LOG_DIR, list_intents
from omnigraph.engine.storage.process import HOSTNAME_ENV
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import OMNIGRAPH, export_text, omnigraph
from tests.support.serve_helpers import start_fenced

SCHEMA = "node Person { name: String @key tag: String? }\nedge Knows: Person -> Person\n"
MUTATION = 'query m($name: String, $tag: String) { insert Person { name: $name, tag: $tag } insert Knows { from: $name, to: "root0" } }\n'


@pytest.fixture
def graph(tmp_path: Path) -> str:
    """A local graph with ``root0``, the person every mutation's edge points at."""
    schema = tmp_path / "schema.pg"
    schema.write_text(SCHEMA)
    uri = str(tmp_path / "graph")
    omnigraph("init", "--schema", schema, uri).ok()
    (tmp_path / "m.gq").write_text(MUTATION)
    (tmp_path / "root.gq").write_text('query r() { insert Person { name: "root0" } }\n')
    omnigraph("mutate", "--query", tmp_path / "root.gq", uri).ok()
    return uri


def mutate_argv(uri: str, tag: str, query: Path | None = None) -> list[str]:
    """The CLI mutation that writes person ``p-<tag>`` and its edge to ``root0``.

    ``query`` is the mutation's file (default: ``m.gq`` beside a local graph).
    """
    params = json.dumps({"name": f"p-{tag}", "tag": tag})
    path = query if query is not None else Path(uri).parent / "m.gq"
    return [str(OMNIGRAPH), "mutate", "--query", str(path), "--params", params, "--json", uri]


def rows_by_tag(uri: str) -> dict[str, set[str]]:
    """For every tag, which of its two rows are visible on main (``person``, ``edge``)."""
    found: dict[str, set[str]] = {}
    for line in export_text(uri, "main", ["Person", "Knows"]).splitlines():
        record = json.loads(line)
        if record.get("type") == "Person" and record["data"].get("tag") is not None:
            found.setdefault(record["data"]["tag"], set()).add("person")
        elif record.get("edge") == "Knows" or record.get("type") == "Knows":
            source = record.get("from") or record["data"].get("from")
            if isinstance(source, str) and source.startswith("p-"):
                found.setdefault(source.removeprefix("p-"), set()).add("edge")
    return found


def assert_whole(uri: str, present: set[str], absent: set[str]) -> None:
    """No tag shows one row of two; ``present`` tags show both, ``absent`` tags neither."""
    rows = rows_by_tag(uri)
    torn = {tag: sides for tag, sides in rows.items() if sides != {"person", "edge"}}
    assert torn == {}, f"torn commits: {torn}"
    assert present <= set(rows), f"acknowledged but missing: {sorted(present - set(rows))}"
    assert not absent & set(rows), f"refused but visible: {sorted(absent & set(rows))}"


def recover_check_and_write(uri: str, query: Path | None = None, tag: str = "final") -> None:
    """``recover`` and ``check`` exit 0, and a new mutation (``query``: see :func:`mutate_argv`) lands whole."""
    omnigraph("recover", uri).ok()
    checked = omnigraph("check", "--json", uri)
    assert checked.returncode == 0, checked.describe()
    final = subprocess.run(mutate_argv(uri, tag, query), capture_output=True, text=True, timeout=120, check=False)
    assert final.returncode == 0, final.stderr
    assert rows_by_tag(uri)[tag] == {"person", "edge"}


def start_held(argv: list[str], failpoint: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``argv`` with ``failpoint:stop`` armed and wait until it stops there."""
    base = {key: value for key, value in os.environ.items() if key != FAILPOINT_ENV}
    process = subprocess.Popen(
        argv, env={**base, **(env or {}), FAILPOINT_ENV: failpoint + STOP_SUFFIX}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_until_stopped(process.pid)
    return process


def start_free(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``argv`` with no failpoint armed."""
    base = {key: value for key, value in os.environ.items() if key != FAILPOINT_ENV}
    return subprocess.Popen(argv, env={**base, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen[str]) -> tuple[int, Any]:
    """Wait for ``process``; its exit status and its stdout as JSON (None if it printed none)."""
    out, err = process.communicate(timeout=120)
    try:
        return process.returncode, json.loads(out)
    except json.JSONDecodeError:
        return process.returncode, {"stderr": err}


def resume(process: subprocess.Popen[str]) -> tuple[int, Any]:
    """Let a held ``process`` go on through every later stop at its failpoint; then :func:`finish`."""
    deadline = time.monotonic() + 120
    while process.poll() is None:
        assert time.monotonic() < deadline, "the resumed process did not end"
        os.kill(process.pid, signal.SIGCONT)
        time.sleep(0.05)
    return finish(process)


def is_waiting(process: subprocess.Popen[str]) -> bool:
    """True if ``process`` is still running after a moment (it waits for the lease)."""
    time.sleep(0.7)
    return process.poll() is None


def test_a_writer_killed_after_its_first_table_never_tears_the_next_commit(graph: str) -> None:
    """Situation 1: A stops after its edge effect; B waits for the lease instead of committing on
    top of A's unpublished edge; A is killed; B commits; A's rows never show."""
    a = start_held(mutate_argv(graph, "a"), "write.after_effect")
    b = start_free(mutate_argv(graph, "b"))
    assert is_waiting(b), b.communicate()
    a.kill()
    a.wait()
    status, out = finish(b)
    assert status == 0, out
    assert_whole(graph, present={"b"}, absent={"a"})
    recover_check_and_write(graph)


def test_a_writer_paused_past_its_expiry_after_both_tables_is_refused_and_rolled_back(graph: str) -> None:
    """Situation 2, the mirror: A stops with both tables written and stays stopped past its lease;
    B takes over, rolls A back and commits; A wakes up and is refused; A's rows never show."""
    short = {LEASE_SECONDS_ENV: "3"}  # long enough that a live writer renews under load
    a = start_held(mutate_argv(graph, "a"), "write.after_effect", short)
    os.kill(a.pid, signal.SIGCONT)
    wait_until_stopped(a.pid)  # after its second table: both effects landed, nothing published
    b = start_free(mutate_argv(graph, "b"), short)
    status, out = finish(b)
    assert status == 0, out
    assert_whole(graph, present={"b"}, absent={"a"})
    status, out = resume(a)
    assert status == 1 and out["error"]["code"] == "read_set_conflict", out
    assert "lease of branch 'main' lapsed" in out["error"]["message"]
    assert_whole(graph, present={"b"}, absent={"a"})
    recover_check_and_write(graph)


def test_a_paused_writer_whose_effect_comes_after_the_takeover_is_refused_by_the_storage(graph: str) -> None:
    """A stops after its lease check, before its first effect, past its expiry. B takes over: the
    roll-back of A's intent restores every table A targets, so the effect A attempts on waking is
    refused by Lance itself (a write based on a version older than a restore). Nothing of that
    attempt lands; A's commit runs again from a fresh snapshot under a lease of its own and lands
    whole after B's."""
    short = {LEASE_SECONDS_ENV: "3"}  # long enough that a live writer renews under load
    a = start_held(mutate_argv(graph, "a"), "write.before_effect", short)
    stalled = [intent.operation_id for intent in list_intents(open_store(graph))]
    time.sleep(3.1)
    b = start_free(mutate_argv(graph, "b"), short)
    status, out = finish(b)
    assert status == 0, out
    assert_whole(graph, present={"b"}, absent={"a"})
    log = open_store(graph)
    rolled_back = json.loads(log.read_bytes(f"{RECOVERY_LOG_DIR}/{stalled[0]}.json"))
    assert rolled_back["outcome"] == "rolled_back"
    assert sorted(t["action"] for t in rolled_back["tables"]) == ["restored", "restored"]  # moved or not: fenced
    status, out = resume(a)
    assert status == 0, out
    assert_whole(graph, present={"a", "b"}, absent=set())
    recover_check_and_write(graph)


def test_two_server_workers_do_not_tear_a_commit_when_one_is_killed(graph: str, tmp_path: Path) -> None:
    """Situation 3: ``serve --workers 2``; the worker serving A stops after its first table, B's
    request (served by the other worker) waits for the lease; A's worker is killed; B commits."""
    once = tmp_path / "once"
    once.mkdir()
    server = start_fenced(graph, workers=2, env={FAILPOINT_ENV: "write.after_effect" + STOP_SUFFIX, FAILPOINT_ONCE_ENV: str(once)})
    try:
        answers: dict[str, Any] = {}

        def post(tag: str) -> None:
            body = {"query": MUTATION, "params": {"name": f"p-{tag}", "tag": tag}}
            try:
                with httpx.Client(base_url=server.base_url, timeout=60) as client:
                    answers[tag] = client.post("/branches/main/mutate", json=body).status_code
            except httpx.HTTPError as error:
                answers[tag] = type(error).__name__

        first = threading.Thread(target=post, args=("a",))
        first.start()
        marker = once / "write.after_effect"
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text() and _stopped(int(marker.read_text()))):
            assert time.monotonic() < deadline, "no worker stopped at write.after_effect"
            time.sleep(0.05)
        second = threading.Thread(target=post, args=("b",))
        second.start()
        time.sleep(0.7)
        assert second.is_alive()  # waiting for the lease the stopped worker holds
        os.kill(int(marker.read_text()), signal.SIGKILL)
        second.join(60)
        first.join(60)
        assert answers["b"] == 200, answers
        assert answers["a"] != 200, answers
    finally:
        server.stop()
    assert_whole(graph, present={"b"}, absent={"a"})
    recover_check_and_write(graph)


def _stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "T"
    except (OSError, IndexError):
        return False


def test_recovery_on_another_host_leaves_a_live_writers_commit_alone(graph: str) -> None:
    """Situation 4: A runs on another host and stops after its first table. `recover` here must not
    take its commit for abandoned (no pid check can reach A): A's lease is live. A goes on and
    commits; nothing is wedged."""
    a = start_held(mutate_argv(graph, "a"), "write.after_effect", {HOSTNAME_ENV: "another-host", LEASE_SECONDS_ENV: "30"})
    recovered = omnigraph("recover", "--json", graph)
    assert recovered.returncode == 0, recovered.describe()
    assert recovered.json()["recovered"] == []
    assert len(recovered.json()["in_flight"]) == 1
    status, out = resume(a)
    assert status == 0, out
    assert_whole(graph, present={"a"}, absent=set())
    recover_check_and_write(graph)


def test_recovery_on_another_host_takes_over_a_lapsed_writer_which_is_then_refused(graph: str) -> None:
    """Situation 4, past the expiry: `recover` here takes A's lease over and rolls A's commit back;
    A wakes up and is refused; `recover` and any write then succeed (no `table_drift`, no exit 5)."""
    a = start_held(mutate_argv(graph, "a"), "write.after_effect", {HOSTNAME_ENV: "another-host", LEASE_SECONDS_ENV: "1"})
    time.sleep(1.2)
    recovered = omnigraph("recover", "--json", graph)
    assert recovered.returncode == 0, recovered.describe()
    assert [r["outcome"] for r in recovered.json()["recovered"]] == ["rolled_back"]
    status, out = resume(a)
    assert status == 1 and out["error"]["code"] == "read_set_conflict", out
    assert_whole(graph, present=set(), absent={"a"})
    recover_check_and_write(graph)


def test_an_effect_with_another_commit_inside_it_is_rolled_back_and_written_again(graph: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit of another process lands on the table between the version an effect read and its
    own commit (what a writer that lost its lease while paused can do): the effect's version then
    carries that commit's rows, so it is never published. The attempt restores the table to its
    pin and writes again; the intruding row never shows and nothing is left for `check`."""
    from omnigraph.engine.ops import write as write_protocol
    from omnigraph.engine.storage.lance_io import open_dataset
    from omnigraph.engine.storage.store import open_store

    real = write_protocol._write_table
    intruded: list[int] = []

    def with_an_intruder(graph_: Any, dataset: Any, table_path: str, write: Any) -> tuple[int, int | None]:
        if not intruded and write.table_key == "node:Person":
            other = open_dataset(open_store(graph), table_path)  # another handle: another writer
            row = {"id": ["intruder"], "name": ["intruder"], "tag": ["intruder"]}
            import pyarrow as pa

            other.merge_insert("id").when_not_matched_insert_all().execute(pa.table(row, schema=other.schema))
            intruded.append(int(other.version))
        return real(graph_, dataset, table_path, write)

    monkeypatch.setattr(write_protocol, "_write_table", with_an_intruder)
    from tests.support.graph_helpers import invoke

    argv = mutate_argv(graph, "a")
    done = invoke(OMNIGRAPH, *argv[1:])
    assert done.returncode == 0, done.describe()
    assert intruded, "the intruding commit was not made"
    assert_whole(graph, present={"a"}, absent=set())
    assert "intruder" not in export_text(graph, "main", ["Person"])
    recover_check_and_write(graph)
