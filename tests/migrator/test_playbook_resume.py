"""Playbooks on call, with real processes: a run that cannot ask is a usage error naming ``--yes``;
an upgrade run killed mid-migration is finished by ``playbook resume`` (found with ``playbook
list`` and ``playbook show``), which continues the dead runner's migration and runs the smoke test
and the release check, and writes the report and JUnit of the whole run; a re-run of the upgrade
after someone else finished the migration names the unfinished run. Each advised command is run
exactly as printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.ledger import Ledger
from omnigraph.ledger.records import Resumed
from omnigraph.migrator.layout import ledger_dir
from tests.conftest import new_root
from tests.support.advice import first_command, run_printed
from tests.support.check_helpers import assert_check_clean, tree_digest
from tests.support.graph_helpers import Cli
from tests.support.migration_cli import MIGRATE, claim_token, migrate
from tests.support.migration_fixtures import build_fixture

STEPS = ["preflight", "prepare", "migrate", "verify", "smoke-test", "release"]


def _playbook(*args: str, failpoint: str | None = None, cwd: Path | None = None) -> Cli:
    """``omnigraph-migrate playbook ARGS`` as a real process whose stdin is not a terminal."""
    env = {key: value for key, value in os.environ.items() if key != FAILPOINT_ENV}
    if failpoint:
        env[FAILPOINT_ENV] = failpoint
    done = subprocess.run(
        [MIGRATE, "playbook", *args], env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300
    )
    return Cli(("omnigraph-migrate", "playbook", *args), done.returncode, done.stdout, done.stderr)


def _next(result: Cli) -> str:
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("next:")]
    assert lines, (result.stdout, result.stderr)
    return lines[-1].removeprefix("next: ")


def _killed_upgrade(uri: str, journals: Path) -> dict:
    killed = _playbook("run", "upgrade", uri, "--yes", "--journal", str(journals), failpoint="unit.after_pk")
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.stderr
    assert Manifest(open_store(uri)).read_stamp()[0] == "migrating"
    listed = _playbook("list", "--journal", str(journals), "--json")
    assert listed.returncode == 0, listed.stderr
    [run] = json.loads(listed.stdout)["runs"]
    assert run["state"] == "interrupted" and run["playbook"] == "upgrade" and run["steps_finished"] == ["preflight", "prepare"]
    assert run["last"]["step"] == "migrate" and run["last"]["phase"] == "acting"
    return dict(run)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_playbook_that_cannot_ask_is_a_usage_error_naming_yes(backend: str, tmp_path: Path) -> None:
    uri = new_root(backend, tmp_path)
    build_fixture(uri, compact=True)
    before = tree_digest(uri)
    report = tmp_path / "report.json"
    refused = _playbook("run", "upgrade", uri, "--journal", str(tmp_path / "journals"), "--report", str(report))
    assert refused.returncode == 2, refused.stderr
    assert "internal error" not in refused.stderr and "stdin is not a terminal" in refused.stderr
    command = _next(refused)
    assert command == f"omnigraph-migrate playbook run upgrade {uri} --yes --report {report}"  # the flags it was given kept
    assert tree_digest(uri) == before
    document = json.loads(report.read_text())
    assert document["exit_code"] == 2 and document["steps"][0]["next_command"] == command
    run_printed(command + f" --journal {tmp_path / 'journals'}").ok()
    assert Manifest(open_store(uri)).read_stamp()[0] == "5"


@pytest.mark.parametrize("backend", ["local", "s3"], indirect=True)
def test_an_upgrade_killed_mid_migration_is_finished_by_playbook_resume(backend: str, tmp_path: Path) -> None:
    uri = new_root(backend, tmp_path)
    build_fixture(uri, compact=True)
    journals = tmp_path / "journals"
    run = _killed_upgrade(uri, journals)
    token = claim_token(uri)

    shown = _playbook("show", run["journal"])
    assert shown.returncode == 0 and "interrupted" in shown.stdout, shown.stderr
    with_yes = first_command(_next(shown))  # the run was started with --yes: its resume confirms as it would have
    assert with_yes == f"omnigraph-migrate playbook resume {run['journal']} --yes"
    unanswered = run_printed(with_yes.removesuffix(" --yes"))
    assert unanswered.returncode == 2, unanswered.describe()  # the migrate step asks first
    assert _next(unanswered) == with_yes
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    finished = run_printed(f"{with_yes} --report {report} --junit {junit}")
    assert finished.returncode == 0, finished.describe()

    document = json.loads(report.read_text())
    assert document["ok"] is True and document["run_id"] == run["run_id"]
    assert [(s["id"], s["status"]) for s in document["steps"]] == [(step, "ok") for step in STEPS]
    cases = ET.fromstring(junit.read_bytes()).findall("testcase")
    assert [c.get("name", "").split(":")[0] for c in cases] == STEPS
    assert all(c.find("failure") is None and c.find("skipped") is None for c in cases)
    migration_id = document["steps"][2]["data"]["migration_id"]
    records = [r for _, r in Ledger(open_store(uri), ledger_dir(migration_id)).replay().records]
    assert document["steps"][2]["data"]["token"] == token and any(isinstance(r, Resumed) for r in records)
    # every finished step of the journal, the unanswered attempt included, in order
    assert [(r.step, r.status) for r in records if r.kind == "playbook_step"] == (
        [("preflight", "ok"), ("prepare", "ok"), ("migrate", "failed")] + [(step, "ok") for step in STEPS[2:]]
    )
    assert json.loads(_playbook("list", "--journal", str(journals), "--json").stdout)["runs"][0]["state"] == "done"
    done = _playbook("resume", run["journal"], "--yes")
    assert done.returncode == 1 and "is done" in done.stderr
    assert_check_clean(uri)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_rerun_after_an_outside_resume_names_the_unfinished_run(backend: str, tmp_path: Path) -> None:
    uri = new_root(backend, tmp_path)
    build_fixture(uri, compact=True)
    journals = tmp_path / "journals"
    run = _killed_upgrade(uri, journals)
    assert migrate("resume", uri, "--token", claim_token(uri)).returncode == 0
    again = _playbook("run", "upgrade", uri, "--yes", "--journal", str(journals), "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "up_to_date", again.stderr
    command = first_command(_next(again))
    assert command == f"omnigraph-migrate playbook resume {run['journal']} --yes"
    finished = run_printed(command + " --json")
    assert finished.returncode == 0, finished.describe()
    steps = json.loads(finished.stdout)["steps"]
    assert [(s["id"], s["status"]) for s in steps] == [(step, "ok") for step in STEPS]
    assert "already at format 5" in steps[2]["summary"]
    assert_check_clean(uri)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_killed_upgrade_promising_a_report_and_junit_writes_both_when_resumed_from_status(backend: str, tmp_path: Path) -> None:
    """The run's ``--report``/``--junit`` are journalled: ``status`` names the interrupted run and the
    command that finishes it, which (run as printed, no flags repeated) writes both files; a failed
    step's ``next`` keeps the flags."""
    uri = new_root(backend, tmp_path)
    build_fixture(uri, compact=True)
    journals, report, junit = tmp_path / "journals", tmp_path / "out" / "r.json", tmp_path / "out" / "j.xml"
    report.parent.mkdir()
    flags = ("--report", "out/r.json", "--junit", "out/j.xml")  # relative: the resume runs elsewhere
    killed = _playbook("run", "upgrade", uri, "--yes", *flags, "--journal", str(journals), failpoint="unit.after_pk", cwd=tmp_path)
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.stderr
    assert not report.exists() and not junit.exists()

    status = migrate("status", uri, "--journal", str(journals), "--json")
    [run] = json.loads(status.stdout)["playbook_runs"]
    assert run["state"] == "interrupted" and run["last"]["step"] == "migrate"
    human = migrate("status", uri, "--journal", str(journals))
    [line] = [line for line in human.stderr.splitlines() if line.startswith("playbook: ")]
    command = first_command(line)
    assert command == run["next"] == f"omnigraph-migrate playbook resume {run['journal']} --yes"

    finished = run_printed(command)
    assert finished.returncode == 0, finished.describe()
    document = json.loads(report.read_text())
    assert document["ok"] is True and [(s["id"], s["status"]) for s in document["steps"]] == [(step, "ok") for step in STEPS]
    assert [c.get("name", "").split(":")[0] for c in ET.fromstring(junit.read_bytes()).findall("testcase")] == STEPS
    assert migrate("status", uri, "--journal", str(journals), "--json").stdout.count('"playbook_runs": []') == 1

    # a step that fails names the run again with the same flags
    rerun = _playbook("run", "upgrade", str(tmp_path / "nowhere"), *flags, "--journal", str(journals), cwd=tmp_path)
    assert rerun.returncode != 0 and f"--report {report} --junit {junit}" in _next(rerun), rerun.stderr
