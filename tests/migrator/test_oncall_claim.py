"""On-call paths around the migration claim, with real processes: a migrator killed right after it
created the claim (before its first ledger record), and a ``resume`` held alive on this host.

Each test reproduces the situation, checks what every command says about it (``status``,
``preflight``, ``claim show``, ``check``, ``abort``, a second ``resume``, the ``resume-crashed``
playbook), then runs exactly the command the tool printed and checks that it resolves the state.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnigraph.claims.claim import inspect
from omnigraph.engine.failpoints import FAILPOINT_EXIT_STATUS
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.store import open_store
from omnigraph.migrator.layout import CLAIM_PATH
from tests.conftest import new_root
from tests.support.advice import first_command, run_printed
from tests.support.check_helpers import assert_check_clean
from tests.support.graph_helpers import OMNIGRAPH, run_cli
from tests.support.migration_cli import assert_fully_migrated, claim_token, migrate
from tests.support.migration_fixtures import build_fixture, clone, exports
from tests.support.paused_process import pause_at


def _stamp(uri: str) -> str | None:
    return Manifest(open_store(uri)).read_stamp()[0]


def _check(uri: str) -> tuple[int, dict]:
    result = run_cli(OMNIGRAPH, "check", "--json", uri)
    document = result.json()
    return result.returncode, document["error"]["details"] if result.returncode else document


@pytest.mark.parametrize("backend", ["local", "s3"], indirect=True)
def test_killed_right_after_the_claim_every_command_names_a_way_out(backend: str, tmp_path: Path) -> None:
    uri = new_root(backend, tmp_path)
    build_fixture(uri, compact=True)
    before = exports(uri)
    crashed = migrate("run", uri, "--owner", "night-sre", failpoint="migrate.after_claim_created")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    token = claim_token(uri)
    assert _stamp(uri) == "4"

    status = migrate("status", uri, "--json")
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    assert document["ledger"] is None and document["ledger_records"] == 0
    assert document["claim"]["token"] == token and document["acting"][0]["liveness"] == "dead"
    resume = first_command(document["next"])  # run's claim is online (stamp 4): the cutover finishes it
    assert resume == f"omnigraph-migrate cutover {open_store(uri).uri} --token {token}"
    human = migrate("status", uri)
    assert human.returncode == 0 and "no ledger record yet" in human.stdout, human.stderr

    preflight = migrate("preflight", uri, "--json")
    assert preflight.returncode == 3
    assert first_command(json.loads(preflight.stdout)["error"]["message"]) == resume

    code, report = _check(uri)
    assert code == 4 and [f["kind"] for f in report["findings"]] == ["claim_held"]
    assert report["findings"][0]["details"]["next"].startswith(f"`{resume}`")

    # The other way out (abort with the token), on a copy: it works although no ledger record exists.
    aborted_copy = new_root(backend, tmp_path, "aborted")
    clone(uri, aborted_copy)
    abort = first_command(document["next"].split("give it up:", 1)[1]).replace(open_store(uri).uri, open_store(aborted_copy).uri)
    run_printed(abort).ok()
    assert _stamp(aborted_copy) == "4" and inspect(open_store(aborted_copy), CLAIM_PATH) is None
    assert_check_clean(aborted_copy)

    if backend == "local":  # the playbook reads no storage-specific state here; its S3 run is test_playbook_resume's
        # The playbook for a crash, on another copy: its status and story steps understand the empty ledger.
        playbook_copy = new_root(backend, tmp_path, "playbook")
        clone(uri, playbook_copy)
        played = migrate("playbook", "run", "resume-crashed", playbook_copy, "--yes", "--holder-dead", "--json")
        assert played.returncode == 0, played.stderr
        steps = json.loads(played.stdout)["steps"]
        assert [s["status"] for s in steps] == ["ok"] * 5
        assert "wrote no ledger record" in steps[1]["summary"]
        assert _stamp(playbook_copy) == "5"

    # Exactly the command status printed.
    resumed = run_printed(resume).ok()
    assert "stamp is now 5" in resumed.stdout
    migration_id = document["claim"]["migration_id"]
    assert_fully_migrated(uri, before, migration_id, tables=4)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # process liveness: one host, storage-independent
def test_a_live_resume_is_seen_by_claim_show_abort_resume_break_and_check(backend: str, tmp_path: Path) -> None:
    uri = new_root(backend, tmp_path)
    build_fixture(uri, compact=True)
    before = exports(uri)
    crashed = migrate("run", uri, "--owner", "night-sre", failpoint="unit.after_sidecar")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    token = claim_token(uri)
    resumer = pause_at("unit.after_pk", "omnigraph-migrate", "resume", uri, "--token", token)
    try:
        shown = migrate("claim", "show", uri, "--json")
        assert shown.returncode == 0, shown.stderr
        shown_doc = json.loads(shown.stdout)
        assert shown_doc["holder_process"] == "alive"
        creator, resume_process = shown_doc["acting"]
        assert (creator["action"], creator["liveness"]) == ("claim", "dead")
        assert (resume_process["action"], resume_process["pid"], resume_process["liveness"]) == ("resume", resumer.pid, "alive")
        assert resume_process["process_start"] is not None

        for refused in (
            migrate("abort", uri, "--token", token, "--json"),
            migrate("resume", uri, "--token", token, "--json"),
            migrate("claim", "break", uri, "--token", token, "--reason", "looked stuck", "--json"),
        ):
            assert refused.returncode == 3, refused.stderr
            error = json.loads(refused.stdout)["error"]
            assert error["code"] == "claim_held" and f"process {resumer.pid} on this host" in error["message"]
            assert [p["pid"] for p in error["details"]["acting"]] == [resumer.pid]
        assert _stamp(uri) == "migrating" and claim_token(uri) == token

        status = json.loads(migrate("status", uri, "--json").stdout)
        assert status["next"].startswith(f"wait: process {resumer.pid} on this host")
        code, report = _check(uri)
        [barrier] = [f for f in report["findings"] if f["kind"] == "migration_in_progress"]
        assert code == 4 and barrier["details"]["next"] == status["next"]
    finally:
        returncode, _, _ = resumer.release("exit")
    assert returncode == FAILPOINT_EXIT_STATUS

    shown_doc = json.loads(migrate("claim", "show", uri, "--json").stdout)
    assert shown_doc["holder_process"] == "dead"
    assert [p["liveness"] for p in shown_doc["acting"]] == ["dead", "dead"]
    status = json.loads(migrate("status", uri, "--json").stdout)
    command = first_command(status["next"])
    assert command == f"omnigraph-migrate resume {uri} --token {token}"
    run_printed(command).ok()
    assert_fully_migrated(uri, before, status["migration_id"], tables=4)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # process liveness: one host, storage-independent
def test_two_resumes_at_once_one_acts_and_the_other_is_refused(backend: str, tmp_path: Path) -> None:
    """The check and the record are one create-if-absent step: of two resumers started together,
    one records itself and migrates, the other finds it alive and exits 3 before any effect."""
    from tests.support.process_race import race

    uri = new_root(backend, tmp_path)
    build_fixture(uri, compact=True)
    before = exports(uri)
    assert migrate("run", uri, "--owner", "ci", failpoint="unit.after_fork").returncode == FAILPOINT_EXIT_STATUS
    token = claim_token(uri)
    outcomes = race("omnigraph-migrate", [["resume", uri, "--token", token, "--json"]] * 2)
    assert sorted(o.returncode for o in outcomes) == [0, 3], [o.stderr for o in outcomes]
    loser = next(o for o in outcomes if o.returncode == 3)
    assert loser.json()["error"]["code"] == "claim_held"
    winner = next(o for o in outcomes if o.returncode == 0)
    assert_fully_migrated(uri, before, winner.json()["migration_id"], tables=4)
