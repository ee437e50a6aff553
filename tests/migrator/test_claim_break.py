"""``claim show|break``, ``abort`` against a live holder, and ``--holder-dead`` in playbooks.

The holder is a real ``omnigraph-migrate run`` process held alive at a failpoint
(:mod:`tests.support.paused_process`): while it lives on this host, ``claim break`` and ``abort`` refuse
with exit 3; once it has exited, the break is recorded in the ledger and the command it names
(``abort --token``) lowers the barrier, after which a new run completes. ``--yes`` alone never
answers "is the holder dead?" in ``resume-crashed``: the refusal names the exact command, which
is then run. Local backend only: the claim store operations themselves run on both backends in
``test_claims.py``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from click.testing import CliRunner

from omnigraph.claims.claim import inspect, read_break
from omnigraph.cli.migrate import cli as migrate_cli
from omnigraph.engine.failpoints import FAILPOINT_EXIT_STATUS
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.ledger import Ledger
from omnigraph.ledger.records import ClaimBroken
from omnigraph.migrator.layout import CLAIM_PATH, ledger_dir
from tests.conftest import new_root
from tests.support.graph_helpers import Cli
from tests.support.migration_fixtures import BIN, build_fixture
from tests.support.paused_process import pause_at

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"


def migrate(*args: str) -> Cli:
    """``omnigraph-migrate`` in this process (never with a failpoint armed)."""
    result = CliRunner().invoke(
        migrate_cli, list(args), env={"OMNIGRAPH_FAILPOINTS": None}, catch_exceptions=False, prog_name="omnigraph-migrate"
    )
    return Cli(("omnigraph-migrate", *args), result.exit_code, result.stdout, result.stderr)


def run_named(command: str) -> Cli:
    """Run an ``omnigraph-migrate ...`` command line exactly as an error or advice names it."""
    argv = shlex.split(command)
    assert argv[0] == "omnigraph-migrate", command
    return migrate(*argv[1:])


def stamp(uri: str) -> str | None:
    return Manifest(open_store(uri)).read_stamp()[0]


def test_break_and_abort_refuse_a_live_holder_then_break_abort_and_rerun(tmp_path: Path) -> None:
    uri = new_root("local", tmp_path)
    build_fixture(uri, compact=True)
    holder = pause_at("unit.after_pk", "omnigraph-migrate", "run", uri, "--owner", "night-sre")
    try:
        shown = migrate("claim", "show", uri, "--json").ok().json()
        assert shown["claim"]["pid"] == holder.pid and shown["holder_process"] == "alive"
        token = shown["claim"]["token"]
        human = migrate("claim", "show", uri).ok()
        assert f"(pid {holder.pid}) since" in human.stdout and "acting for it: alive" in human.stdout
        assert f"  claim: night-sre on {shown['claim']['host']} (pid {holder.pid})" in human.stdout and token in human.stdout

        refused = migrate("claim", "break", uri, "--token", token, "--reason", "looked stuck", "--json")
        assert refused.returncode == 3, refused.describe()
        assert refused.json()["error"]["code"] == "claim_held"
        assert f"process {holder.pid} on this host" in refused.json()["error"]["message"]
        aborted = migrate("abort", uri, "--token", token, "--json")
        assert aborted.returncode == 3, aborted.describe()
        assert inspect(open_store(uri), CLAIM_PATH) is not None and stamp(uri) == "migrating"
    finally:
        returncode, _, _ = holder.release("exit")
    assert returncode == FAILPOINT_EXIT_STATUS

    assert migrate("claim", "show", uri, "--json").ok().json()["holder_process"] == "dead"
    wrong = migrate("claim", "break", uri, "--token", "0" * 32, "--reason", "gone", "--json")
    assert wrong.returncode == 1 and wrong.json()["error"]["code"] == "precondition_failed"
    broken = migrate("claim", "break", uri, "--token", token, "--reason", "pid gone after reboot")
    assert broken.returncode == 0, broken.describe()
    store = open_store(uri)
    assert inspect(store, CLAIM_PATH) is None
    record = read_break(store, CLAIM_PATH, token)
    assert record is not None and record.reason == "pid gone after reboot"
    migration_id = record.claim.migration_id
    [recorded] = [r for _, r in Ledger(store, ledger_dir(migration_id)).replay().records if isinstance(r, ClaimBroken)]
    assert recorded.reason == "pid gone after reboot" and recorded.token == token
    assert stamp(uri) == "migrating"  # breaking the claim does not lower the barrier

    named = re.search(r"`(omnigraph-migrate abort [^`]+)`", broken.stderr)
    assert named is not None, broken.stderr
    resumed = migrate("resume", uri, "--token", token, "--json")
    assert resumed.returncode == 1 and resumed.json()["error"]["code"] == "precondition_failed"
    assert f"`{named.group(1)}`" in resumed.json()["error"]["message"]  # resume names the same way out
    lowered = run_named(named.group(1))
    assert lowered.returncode == 0, lowered.describe()
    assert stamp(uri) == "4" and inspect(store, CLAIM_PATH) is None
    rerun = migrate("run", uri, "--owner", "day-sre", "--json")
    assert rerun.returncode == 0, rerun.describe()
    assert stamp(uri) == "5"


def test_yes_alone_does_not_answer_holder_dead(tmp_path: Path) -> None:
    uri = new_root("local", tmp_path)
    build_fixture(uri, compact=True)
    crashed = subprocess.run(
        [str(BIN / "omnigraph-migrate"), "run", uri, "--owner", "sre"],
        capture_output=True,
        text=True,
        env={**os.environ, "OMNIGRAPH_FAILPOINTS": "unit.after_pk"},
        timeout=180,
    )
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    resume = str(PLAYBOOKS / "resume-crashed.yaml")
    refused = migrate("playbook", "run", resume, uri, "--yes", "--json")
    assert refused.returncode == 3, refused.describe()
    report = refused.json()
    failed = report["steps"][-1]
    assert (failed["id"], failed["status"]) == ("holder-dead", "failed")
    assert failed["next_command"] == f"omnigraph-migrate playbook run {resume} {uri} --yes --holder-dead"
    assert stamp(uri) == "migrating" and inspect(open_store(uri), CLAIM_PATH) is not None

    resumed = run_named(failed["next_command"] + " --json")
    assert resumed.returncode == 0, resumed.describe()
    assert [s["status"] for s in resumed.json()["steps"]] == ["ok"] * 5
    assert stamp(uri) == "5"


def test_holder_dead_is_refused_while_the_holder_lives(tmp_path: Path) -> None:
    uri = new_root("local", tmp_path)
    build_fixture(uri, compact=True)
    holder = pause_at("unit.after_pk", "omnigraph-migrate", "run", uri, "--owner", "sre")
    try:
        refused = migrate("playbook", "run", str(PLAYBOOKS / "resume-crashed.yaml"), uri, "--yes", "--holder-dead", "--json")
    finally:
        holder.release("exit")
    assert refused.returncode == 3, refused.describe()
    failed = refused.json()["steps"][-1]
    assert failed["id"] == "holder-dead" and f"process {holder.pid}" in failed["summary"]
    assert json.loads(refused.stdout)["ok"] is False
