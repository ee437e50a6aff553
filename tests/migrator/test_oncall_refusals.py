"""Every state a writer refuses is one ``omnigraph check`` reports, and every writer applies one rule
(the barrier is the stamp and the migration claim), with real processes.

* A format-4 commit published after stamp 5 (an old writer held alive at ``open.after_stamp``
  while the migration ran): ``omnigraph load`` exits 6 and ``verify`` 1; ``check`` exits 4 with
  ``unfenced_commit`` naming ``refence``, which is run exactly as printed.
* Stamp 5 with the claim still held (a migrator killed at ``migrate.after_stamp``): the CLI
  refuses to write (``claim_held``, exit 3) as the server does (503 ``format_barrier``),
  ``verify`` says ``claim_held``, ``check`` exits 4; the command the CLI refusal names (the
  ``resume`` that releases the claim) is run as printed and every writer writes again.
* A claim at stamp 4 (a migrator killed at ``migrate.after_claim``, its claim online): ``omnigraph``
  refuses with ``claim_held`` (exit 3) naming the cutover, which is run as printed; ``omnigraph-v4``
  goes on writing until then.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnigraph.engine.failpoints import FAILPOINT_EXIT_STATUS
from omnigraph.engine.storage.store import open_store
from tests.conftest import new_root
from tests.support.advice import first_command, run_printed
from tests.support.check_helpers import assert_check_clean
from tests.support.graph_helpers import OMNIGRAPH, OMNIGRAPH_V4, Cli, person, run_cli
from tests.support.migration_cli import migrate
from tests.support.migration_fixtures import build_fixture
from tests.support.paused_process import pause_at
from tests.support.serve_helpers import error_of, start_fenced


def _load(program: Path, uri: str, tmp_path: Path, name: str) -> Cli:
    data = tmp_path / f"{name}.jsonl"
    data.write_text(person(name, 33) + "\n")
    return run_cli(program, "load", "--mode", "append", "--data", data, "--json", uri)


def _check_findings(uri: str) -> list[dict]:
    result = run_cli(OMNIGRAPH, "check", "--json", uri)
    assert result.returncode == 4, result.describe()
    return list(result.json()["error"]["details"]["findings"])


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # process liveness and a held writer: one host
def test_a_late_format4_commit_is_a_check_finding_naming_refence(backend: str, tmp_path: Path) -> None:
    uri = new_root(backend, tmp_path)
    build_fixture(uri, compact=True)
    data = tmp_path / "late.jsonl"
    data.write_text(person("Late Writer", 51) + "\n")
    old_writer = pause_at("open.after_stamp", "omnigraph-v4", "load", "--mode", "append", "--data", str(data), uri)
    try:
        assert migrate("run", uri, "--owner", "sre").returncode == 0
    finally:
        returncode, _, stderr = old_writer.release("continue")
    assert returncode == 0, stderr

    refused = _load(OMNIGRAPH, uri, tmp_path, "After")
    assert refused.returncode == 6 and refused.json()["error"]["code"] == "format_refused", refused.describe()
    verify = migrate("verify", uri, "--json")
    assert verify.returncode == 1 and json.loads(verify.stdout)["error"]["code"] == "drift_detected"
    findings = _check_findings(uri)
    unfenced = [f for f in findings if f["kind"] == "unfenced_commit"]
    assert [f["branch"] for f in unfenced] == ["main"]
    command = unfenced[0]["details"]["next"]
    assert command == first_command(unfenced[0]["message"]) == f"omnigraph-migrate refence {uri}"

    run_printed(command).ok()
    assert_check_clean(uri)
    _load(OMNIGRAPH, uri, tmp_path, "After").ok()


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # one server process on loopback: one host
def test_stamp_5_with_the_claim_held_refuses_every_writer_until_the_printed_command(backend: str, tmp_path: Path) -> None:
    uri = new_root(backend, tmp_path)
    build_fixture(uri, compact=True)
    crashed = migrate("run", uri, "--owner", "sre", failpoint="migrate.after_stamp")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    server = start_fenced(uri)
    try:
        refused = _load(OMNIGRAPH, uri, tmp_path, "Cli")
        assert refused.returncode == 3, refused.describe()
        error = refused.json()["error"]
        assert error["code"] == "claim_held" and error["details"]["holder"]["owner"] == "sre"
        served = error_of(server.load([person("Http")]), 503, "format_barrier")
        assert served["details"]["holder"]["migration_id"] == error["details"]["holder"]["migration_id"]
        assert server.client.get("/readyz").status_code == 503

        verify = migrate("verify", uri, "--json")
        assert verify.returncode == 3, verify.stderr
        assert json.loads(verify.stdout)["error"]["code"] == "claim_held"
        assert [f["kind"] for f in _check_findings(uri)] == ["claim_held"]

        resume = first_command(error["message"])
        assert resume == first_command(error["details"]["next"])
        assert resume.startswith(f"omnigraph-migrate resume {open_store(uri).uri} --token ")
        run_printed(resume).ok()

        _load(OMNIGRAPH, uri, tmp_path, "Cli").ok()
        assert server.load([person("Http")]).status_code == 200
        assert server.client.get("/readyz").status_code == 200
    finally:
        server.stop()
    assert_check_clean(uri)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_claim_at_stamp_4_bars_other_migrations_and_the_format5_writer_not_the_format4_writer(backend: str, tmp_path: Path) -> None:
    """``run``'s claim is online until its cutover: format-4 writers go on, a second migration is
    refused, and ``omnigraph`` answers ``claim_held`` (not ``format_refused`` naming a preflight the
    claim refuses) with the cutover that releases it, which is run as printed."""
    uri = new_root(backend, tmp_path)
    build_fixture(uri, compact=True)
    crashed = migrate("run", uri, "--owner", "sre", failpoint="migrate.after_claim")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    _load(OMNIGRAPH_V4, uri, tmp_path, "Old").ok()
    refused = migrate("run", uri, "--owner", "sre", "--json")
    assert refused.returncode == 3, refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "claim_held"
    cutover = first_command(error["message"])
    assert cutover.startswith(f"omnigraph-migrate cutover {uri} --token ")
    assert [f["kind"] for f in _check_findings(uri)] == ["claim_held"]

    writer = _load(OMNIGRAPH, uri, tmp_path, "New")
    assert writer.returncode == 3, writer.describe()
    refusal = writer.json()["error"]
    assert refusal["code"] == "claim_held" and refusal["details"]["holder"]["owner"] == "sre"
    assert "preflight" not in refusal["message"] and first_command(refusal["message"]) == cutover
    run_printed(first_command(refusal["message"])).ok()
    _load(OMNIGRAPH, uri, tmp_path, "New").ok()
    assert_check_clean(uri)
