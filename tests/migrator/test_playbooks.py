"""The playbook runner end to end: ``omnigraph-migrate playbook run FILE GRAPH`` as a subprocess.

Contract (issue + DESIGN sections 6-8): ``playbook run FILE GRAPH [--yes] [--report F.json]
[--junit F.xml] [--var NAME=VALUE]``. A failed step stops the playbook and prints the exact next
command; every run is recorded in the migration ledger as ``playbook_step`` records; the JSON
report and the JUnit XML parse and match what happened. Every test runs on the local backend and
on the moto S3 server (the ``backend`` fixture), against fresh copies of format-4 fixtures built
once per session on local disk (see ``playbook_sources``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from omnigraph.claims.claim import inspect
from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.lance_io import list_branches, open_dataset, primary_key
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.ledger import Ledger
from omnigraph.ledger.records import PlaybookStep, RepairApplied
from omnigraph.migrator import layout
from omnigraph.migrator.layout import CLAIM_PATH, ledger_dir
from omnigraph.playbooks.actions import STATUS_TAIL
from tests.conftest import new_root
from tests.support.migration_cli import assert_fully_migrated, claim_token
from tests.support.migration_fixtures import (
    BIN,
    build_duplicate,
    build_fixture,
    clone,
    count_ids,
    exports,
)

MIGRATE = str(BIN / "omnigraph-migrate")
PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
UPGRADE = str(PLAYBOOKS / "upgrade.yaml")
STAGING = str(PLAYBOOKS / "staging-rehearsal.yaml")
RESUME = str(PLAYBOOKS / "resume-crashed.yaml")
REPAIR = str(PLAYBOOKS / "duplicate-repair.yaml")
BUNDLED = ["duplicate-repair.yaml", "resume-crashed.yaml", "staging-rehearsal.yaml", "upgrade.yaml"]
UPGRADE_STEPS = ["preflight", "prepare", "migrate", "verify", "smoke-test", "release"]
STAGING_STEPS = ["preflight-source", "copy", "migrate", "verify", "smoke-test"]
RESUME_STEPS = ["status", "story", "holder-dead", "resume", "verify"]
REPAIR_STEPS = ["status", "inventory", "decisions", "apply", "validate", "resume"]
COMPACT_TABLES = 4


# --------------------------------------------------------------------------------------------
# helpers


def run_cli(*args: str, cwd: Path, failpoint: str | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the ``omnigraph-migrate`` console script (next to sys.executable)."""
    env = dict(os.environ)
    env.pop(FAILPOINT_ENV, None)
    if failpoint:
        env[FAILPOINT_ENV] = failpoint
    return subprocess.run(
        [MIGRATE, *args],
        check=False,
        env=env,
        cwd=cwd,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def playbook(file: str, graph: str, *options: str, cwd: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return run_cli("playbook", "run", file, graph, *options, cwd=cwd, **kwargs)


def describe(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


@dataclass(frozen=True)
class JUnitCase:
    name: str
    outcome: str  # "ok", "failure", "skipped"
    text: str


def read_junit(path: Path) -> tuple[dict[str, str], list[JUnitCase]]:
    """The <testsuite> attributes and its test cases in document order."""
    suite = ET.parse(path).getroot()
    assert suite.tag == "testsuite", suite.tag
    cases = []
    for case in suite.findall("testcase"):
        failure, skipped = case.find("failure"), case.find("skipped")
        if failure is not None:
            cases.append(JUnitCase(case.get("name", ""), "failure", f"{failure.get('message')}\n{failure.text or ''}"))
        elif skipped is not None:
            cases.append(JUnitCase(case.get("name", ""), "skipped", skipped.get("message") or ""))
        else:
            cases.append(JUnitCase(case.get("name", ""), "ok", ""))
    return dict(suite.attrib), cases


def case_ids(cases: list[JUnitCase]) -> list[str]:
    """JUnit case names are ``<step id>: <title>``."""
    return [case.name.split(":", 1)[0] for case in cases]


def step_outcomes(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(step["id"], step["status"]) for step in report["steps"]]


def playbook_steps(uri: str, migration_id: str) -> list[tuple[str, str, str]]:
    """(playbook, step, status) of every ``playbook_step`` record of the migration, in order."""
    records = Ledger(open_store(uri), ledger_dir(migration_id)).replay().records
    return [(r.playbook, r.step, r.status) for _, r in records if isinstance(r, PlaybookStep)]


def ledger_kinds(uri: str, migration_id: str) -> list[str]:
    return [r.kind for _, r in Ledger(open_store(uri), ledger_dir(migration_id)).replay().records]


def object_listing(uri: str) -> dict[str, tuple[int, str]]:
    """Every object under the root: relative path -> (size, sha256 of its bytes)."""
    store = open_store(uri)
    listing = {}
    for path, info in store.fs.find(store.root, detail=True).items():
        rel = path[len(store.root) :].lstrip("/") if path.startswith(store.root) else path
        listing[rel] = (int(info["size"]), hashlib.sha256(store.fs.cat_file(path)).hexdigest())
    return listing


def stamp(uri: str) -> str:
    return Manifest(open_store(uri)).read_stamp()[0]


def claim_holder(uri: str):
    return inspect(open_store(uri), CLAIM_PATH)


def has_migration_dir(uri: str) -> bool:
    store = open_store(uri)
    return bool(store.exists("__migration") and store.list("__migration"))


def lance_branches_of_tables(uri: str) -> set[str]:
    """Every Lance branch name of every table dataset listed on main."""
    store = open_store(uri)
    names: set[str] = set()
    for entry in Manifest(store).snapshot("main").tables.values():
        names |= set(list_branches(open_dataset(store, entry.table_path)))
    return names


def all_tables_fenced(uri: str) -> None:
    store = open_store(uri)
    manifest = Manifest(store)
    for branch in manifest.branches():
        for table_key, entry in manifest.snapshot(branch).tables.items():
            dataset = open_dataset(store, entry.table_path, entry.table_branch, entry.table_version)
            assert primary_key(dataset.schema) == ["id"], (branch, table_key)


# --------------------------------------------------------------------------------------------
# fixtures: each format-4 source is built once per backend, then copied per test


@pytest.fixture(scope="session")
def playbook_sources(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[str, str | None]]:
    """(backend, kind) -> (source root, duplicated id or None), each built once on first use.

    A source is built on the backend under test and copied within that backend for every test:
    Lance branch manifests address their parent's data by the root's URI, so a copy across
    backends would still read branch data from the other backend."""
    return {}


def _source(backend: str, kind: str, sources: dict[tuple[str, str], tuple[str, str | None]], tmp_path: Path) -> tuple[str, str | None]:
    if (backend, kind) not in sources:
        uri = new_root(backend, tmp_path, f"{kind}-source")
        if kind == "compact":
            build_fixture(uri, compact=True)
            sources[(backend, kind)] = (uri, None)
        else:
            work = tmp_path / f"{kind}-work"
            work.mkdir()
            sources[(backend, kind)] = (uri, build_duplicate(uri, work, compact=True))
    return sources[(backend, kind)]


@pytest.fixture
def compact_graph(backend: str, tmp_path: Path, playbook_sources: dict) -> str:
    """A fresh copy of the compact format-4 fixture (main, feat, lazy, feat2) on ``backend``."""
    uri = new_root(backend, tmp_path)
    clone(_source(backend, "compact", playbook_sources, tmp_path)[0], uri)
    return uri


@pytest.fixture
def duplicate_graph(backend: str, tmp_path: Path, playbook_sources: dict) -> tuple[str, str]:
    """A fresh copy of the compact fixture plus branch ``dup`` holding a duplicate Person id."""
    source, twin = _source(backend, "duplicate", playbook_sources, tmp_path)
    uri = new_root(backend, tmp_path)
    clone(source, uri)
    assert twin is not None
    return uri, twin


# --------------------------------------------------------------------------------------------
# 1. upgrade.yaml end to end


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_upgrade_playbook_end_to_end(compact_graph: str, tmp_path: Path) -> None:
    before = exports(compact_graph)
    report_path, junit_path = tmp_path / "r.json", tmp_path / "j.xml"
    result = playbook(UPGRADE, compact_graph, "--yes", "--report", str(report_path), "--junit", str(junit_path), cwd=tmp_path)
    assert result.returncode == 0, describe(result)

    report = json.loads(report_path.read_text())
    assert report["ok"] is True and report["exit_code"] == 0
    assert report["playbook"] == "upgrade"
    assert report["graph"] == open_store(compact_graph).uri
    assert step_outcomes(report) == [(step, "ok") for step in UPGRADE_STEPS]
    assert all(step["next_command"] is None for step in report["steps"])
    migration_id = report["steps"][UPGRADE_STEPS.index("migrate")]["data"]["migration_id"]
    assert report["recorded_in_ledger"] == f"{open_store(compact_graph).uri}/{ledger_dir(migration_id)}"

    # Fully migrated; the smoke test's same-values upsert changed no row, its branch is gone.
    assert_fully_migrated(compact_graph, before, migration_id, tables=COMPACT_TABLES)
    assert not any(name.startswith("smoke") for name in lance_branches_of_tables(compact_graph))

    attributes, cases = read_junit(junit_path)
    assert (attributes["tests"], attributes["failures"]) == ("6", "0")
    assert attributes.get("skipped", "0") == "0"
    assert case_ids(cases) == UPGRADE_STEPS
    assert [case.outcome for case in cases] == ["ok"] * 6

    # The outage (barrier up to claim released) is in the report and the JUnit suite's properties.
    outage = report["steps"][UPGRADE_STEPS.index("migrate")]["data"]["outage_seconds"]
    assert report["outage_seconds"] == outage and outage > 0
    assert f'<property name="outage_seconds" value="{outage:.3f}" />' in junit_path.read_text()

    assert playbook_steps(compact_graph, migration_id) == [("upgrade", step, "ok") for step in UPGRADE_STEPS]
    # The runner links each step as it finishes: preflight and prepare before the cutover's barrier,
    # the others after the release; the ledger still folds to "released".
    kinds = ledger_kinds(compact_graph, migration_id)
    assert kinds.index("playbook_step") < kinds.index("barrier_set") < kinds.index("claim_released") < len(kinds) - 1
    assert kinds[-4:] == ["playbook_step"] * 4


# --------------------------------------------------------------------------------------------
# 2. staging-rehearsal.yaml: the copy is migrated, the source is only read


def test_staging_rehearsal_migrates_the_copy_and_leaves_the_source_untouched(backend: str, compact_graph: str, tmp_path: Path) -> None:
    staging = new_root(backend, tmp_path, "staging")
    before_objects = object_listing(compact_graph)
    before_exports = exports(compact_graph)
    report_path, junit_path = tmp_path / "r.json", tmp_path / "j.xml"
    result = playbook(
        STAGING,
        compact_graph,
        "--yes",
        "--var",
        f"staging={staging}",
        "--report",
        str(report_path),
        "--junit",
        str(junit_path),
        cwd=tmp_path,
    )
    assert result.returncode == 0, describe(result)

    # The source: byte for byte, export for export, stamp for stamp.
    assert object_listing(compact_graph) == before_objects
    assert exports(compact_graph) == before_exports
    assert stamp(compact_graph) == "4"
    assert claim_holder(compact_graph) is None

    # The staging copy: fully migrated, with the source's rows.
    report = json.loads(report_path.read_text())
    assert report["ok"] is True
    assert step_outcomes(report) == [(step, "ok") for step in STAGING_STEPS]
    migration_id = report["steps"][STAGING_STEPS.index("migrate")]["data"]["migration_id"]
    assert stamp(staging) == "5"
    all_tables_fenced(staging)
    assert_fully_migrated(staging, before_exports, migration_id, tables=COMPACT_TABLES)
    assert report["recorded_in_ledger"] == f"{open_store(staging).uri}/{ledger_dir(migration_id)}"
    assert playbook_steps(staging, migration_id) == [("staging-rehearsal", step, "ok") for step in STAGING_STEPS]

    attributes, cases = read_junit(junit_path)
    assert (attributes["tests"], attributes["failures"]) == ("5", "0")
    assert case_ids(cases) == STAGING_STEPS
    assert [case.outcome for case in cases] == ["ok"] * 5


def test_staging_rehearsal_that_finds_duplicates_stops_at_migrate_and_records_the_run(tmp_path: Path, playbook_sources: dict) -> None:
    """A rehearsal on a graph with duplicates: the staging migration stops at validation (exit 4).

    The migration exists (its claim is held on the staging copy), so the run must be recorded in
    its ledger, the failed step included, and the next command routes to the duplicate repair.
    Runner logic only: local backend."""
    source = new_root("local", tmp_path, "source")
    clone(_source("local", "duplicate", playbook_sources, tmp_path)[0], source)
    staging = new_root("local", tmp_path, "staging")
    before_objects = object_listing(source)
    report_path, junit_path = tmp_path / "r.json", tmp_path / "j.xml"
    result = playbook(
        STAGING,
        source,
        "--yes",
        "--var",
        f"staging={staging}",
        "--report",
        str(report_path),
        "--junit",
        str(junit_path),
        cwd=tmp_path,
    )
    assert result.returncode == 4, describe(result)
    assert object_listing(source) == before_objects

    report = json.loads(report_path.read_text())
    assert step_outcomes(report) == [("preflight-source", "ok"), ("copy", "ok"), ("migrate", "failed")]
    failed = report["steps"][-1]
    assert "duplicate-repair" in failed["next_command"] and open_store(staging).uri in failed["next_command"]
    assert f"next: {failed['next_command']}" in result.stderr
    attributes, cases = read_junit(junit_path)
    assert (attributes["tests"], attributes["failures"], attributes["skipped"]) == ("5", "1", "2")
    assert [case.outcome for case in cases] == ["ok", "ok", "failure", "skipped", "skipped"]

    assert stamp(staging) == "migrating"
    holder = claim_holder(staging)
    assert holder is not None
    assert playbook_steps(staging, holder.migration_id) == [
        ("staging-rehearsal", "preflight-source", "ok"),
        ("staging-rehearsal", "copy", "ok"),
        ("staging-rehearsal", "migrate", "failed"),
    ]
    assert report["recorded_in_ledger"] == f"{open_store(staging).uri}/{ledger_dir(holder.migration_id)}"


# --------------------------------------------------------------------------------------------
# 3. a migration killed by a failpoint, then resume-crashed.yaml


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # local only: a resumed crash on S3 is test_migration's
@pytest.mark.parametrize("failpoint", ["unit.after_pk", "migrate.before_stamp"])
def test_resume_crashed_playbook_after_a_failpoint_converges(compact_graph: str, tmp_path: Path, failpoint: str) -> None:
    before = exports(compact_graph)
    crashed = playbook(UPGRADE, compact_graph, "--yes", cwd=tmp_path, failpoint=failpoint)
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, describe(crashed)
    assert stamp(compact_graph) == "migrating"
    token = claim_token(compact_graph)
    holder = claim_holder(compact_graph)
    migration_id = holder.migration_id
    replay = Ledger(open_store(compact_graph), ledger_dir(migration_id)).replay()
    units, records = replay.state.units, len(replay.records)
    # a unit in progress is one whose sidecar is still there (nothing else is recorded before it completes)
    interrupted = layout.remaining(open_store(compact_graph), migration_id)
    assert all(units[unit].status == "planned" for unit in interrupted), units

    report_path, junit_path = tmp_path / "r.json", tmp_path / "j.xml"
    result = playbook(
        RESUME, compact_graph, "--yes", "--holder-dead", "--report", str(report_path), "--junit", str(junit_path), cwd=tmp_path
    )
    assert result.returncode == 0, describe(result)
    # the status step shows the ledger's tail, not the whole ledger
    shown = [line for line in result.stderr.split("[2/", 1)[0].splitlines() if re.match(r"\d+ +\d{4}-", line)]
    assert len(shown) == min(records, STATUS_TAIL), shown
    assert (f"(the last {STATUS_TAIL} of {records} ledger records;" in result.stderr) == (records > STATUS_TAIL)
    assert records > STATUS_TAIL or failpoint == "unit.after_pk"
    report = json.loads(report_path.read_text())
    assert report["ok"] is True
    assert step_outcomes(report) == [(step, "ok") for step in RESUME_STEPS]
    steps = {step["id"]: step for step in report["steps"]}
    story = steps["story"]["summary"]
    assert migration_id in story
    if failpoint == "unit.after_pk":
        assert len(interrupted) == 1, units
        assert f"{interrupted[0]} (sidecar written)" in story, story
    else:
        assert interrupted == []
        assert f"{len(units)}/{len(units)}" in story, story
    assert steps["resume"]["data"]["migration_id"] == migration_id
    assert steps["resume"]["data"]["token"] == token  # resumed with the crashed holder's claim

    assert_fully_migrated(compact_graph, before, migration_id, tables=COMPACT_TABLES)
    assert report["recorded_in_ledger"] == f"{open_store(compact_graph).uri}/{ledger_dir(migration_id)}"
    recorded = [entry for entry in playbook_steps(compact_graph, migration_id) if entry[0] == "resume-crashed"]
    assert recorded == [("resume-crashed", step, "ok") for step in RESUME_STEPS]
    attributes, cases = read_junit(junit_path)
    assert (attributes["tests"], attributes["failures"]) == ("5", "0")
    assert case_ids(cases) == RESUME_STEPS


# --------------------------------------------------------------------------------------------
# 4. duplicate-repair.yaml


def _stopped_migration(uri: str, tmp_path: Path) -> dict[str, Any]:
    """``omnigraph-migrate run`` stops at validation (exit 4) and keeps the barrier."""
    stopped = run_cli("run", uri, "--owner", "sre", "--json", cwd=tmp_path)
    assert stopped.returncode == 4, describe(stopped)
    error = json.loads(stopped.stdout)["error"]
    assert error["code"] == "validation_failed"
    assert stamp(uri) == "migrating"
    return error["details"]


def _assert_nothing_repaired(uri: str, migration_id: str, twin: str, dup_before: list[str], versions_before: dict[str, int]) -> None:
    assert stamp(uri) == "migrating"
    assert claim_holder(uri) is not None
    assert exports(uri)["dup"] == dup_before
    assert count_ids(uri, "dup", "node:Person", twin) > 1
    assert "repair_applied" not in ledger_kinds(uri, migration_id)
    assert manifest_versions(uri) == versions_before


def manifest_versions(uri: str) -> dict[str, int]:
    manifest = Manifest(open_store(uri))
    return {branch: manifest.snapshot(branch).manifest_version for branch in sorted(manifest.branches())}


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_duplicate_repair_playbook_template_then_decisions_then_migration(duplicate_graph: tuple[str, str], tmp_path: Path) -> None:
    """(a) template and stop, nothing written; (c) an entry without an action is refused before
    any write; (b) filled decisions repair the branch and the migration completes."""
    uri, twin = duplicate_graph
    details = _stopped_migration(uri, tmp_path)
    migration_id = details["migration_id"]
    before = exports(uri)
    versions = manifest_versions(uri)
    decisions = tmp_path / "decisions.yaml"

    # (a) the first run writes a template and stops at `decisions`, writing nothing to the graph.
    report_path, junit_path = tmp_path / "a.json", tmp_path / "a.xml"
    first = playbook(
        REPAIR,
        uri,
        "--yes",
        "--var",
        f"decisions={decisions}",
        "--report",
        str(report_path),
        "--junit",
        str(junit_path),
        cwd=tmp_path,
    )
    assert first.returncode == 4, describe(first)
    report = json.loads(report_path.read_text())
    assert report["ok"] is False and report["exit_code"] == 4
    assert step_outcomes(report) == [("status", "ok"), ("inventory", "ok"), ("decisions", "failed")]
    next_command = report["steps"][-1]["next_command"]
    assert str(decisions) in next_command and "playbook run" in next_command
    assert f"next: {next_command}" in first.stderr
    attributes, cases = read_junit(junit_path)
    assert (attributes["tests"], attributes["failures"], attributes["skipped"]) == ("6", "1", "3")
    assert case_ids(cases) == REPAIR_STEPS
    assert [case.outcome for case in cases] == ["ok", "ok", "failure", "skipped", "skipped", "skipped"]
    assert str(decisions) in cases[2].text
    _assert_nothing_repaired(uri, migration_id, twin, before["dup"], versions)

    template = yaml.safe_load(decisions.read_text())
    assert template["migration_id"] == migration_id
    entries = template["decisions"]
    assert [(e["graph_branch"], e["table_key"], e["entity_id"], e["action"]) for e in entries] == [("dup", "node:Person", twin, None)]
    assert len(entries[0]["rows"]) == count_ids(uri, "dup", "node:Person", twin)
    assert playbook_steps(uri, migration_id) == [
        ("duplicate-repair", "status", "ok"),
        ("duplicate-repair", "inventory", "ok"),
        ("duplicate-repair", "decisions", "failed"),
    ]

    # (c) a file where one entry is decided and another was left without an action: refused
    # as a whole, before any write.
    partial = tmp_path / "partial.yaml"
    decided = dict(entries[0], action="keep", keep_row_id=entries[0]["rows"][0]["row_id"])
    undecided = {k: v for k, v in entries[0].items() if k != "action"}
    undecided["keep_row_id"] = entries[0]["rows"][-1]["row_id"]
    partial.write_text(yaml.safe_dump(dict(template, decisions=[decided, undecided]), sort_keys=True))
    report_path = tmp_path / "c.json"
    refused = playbook(REPAIR, uri, "--yes", "--var", f"decisions={partial}", "--report", str(report_path), cwd=tmp_path)
    assert refused.returncode == 4, describe(refused)
    report = json.loads(report_path.read_text())
    assert step_outcomes(report) == [("status", "ok"), ("inventory", "ok"), ("decisions", "failed")]
    assert "action" in report["steps"][-1]["summary"]
    assert str(partial) in report["steps"][-1]["next_command"]
    _assert_nothing_repaired(uri, migration_id, twin, before["dup"], versions)

    # (b) the operator keeps the first listed row; the rerun repairs and completes the migration.
    keep = entries[0]["rows"][0]
    entries[0]["action"] = "keep"
    entries[0]["keep_row_id"] = keep["row_id"]
    decisions.write_text(yaml.safe_dump(template, sort_keys=True))
    report_path, junit_path = tmp_path / "b.json", tmp_path / "b.xml"
    second = playbook(
        REPAIR,
        uri,
        "--yes",
        "--var",
        f"decisions={decisions}",
        "--report",
        str(report_path),
        "--junit",
        str(junit_path),
        cwd=tmp_path,
    )
    assert second.returncode == 0, describe(second)
    report = json.loads(report_path.read_text())
    assert step_outcomes(report) == [(step, "ok") for step in REPAIR_STEPS]
    attributes, cases = read_junit(junit_path)
    assert (attributes["tests"], attributes["failures"]) == ("6", "0")
    assert [case.outcome for case in cases] == ["ok"] * 6

    assert count_ids(uri, "dup", "node:Person", twin) == 1
    after = exports(uri)
    assert {b: lines for b, lines in after.items() if b != "dup"} == {b: lines for b, lines in before.items() if b != "dup"}
    deduplicated = [line for i, line in enumerate(before["dup"]) if line not in before["dup"][:i]]
    assert after["dup"] == deduplicated
    kept = [json.loads(line) for line in after["dup"] if json.loads(line).get("data", {}).get("id") == twin]
    assert len(kept) == 1 and kept[0]["type"] == "Person"
    assert {k: v for k, v in keep["values"].items() if v is not None} == kept[0]["data"]

    assert stamp(uri) == "5"
    all_tables_fenced(uri)
    assert claim_holder(uri) is None
    replay = Ledger(open_store(uri), ledger_dir(migration_id)).replay()
    repairs = [r for _, r in replay.records if isinstance(r, RepairApplied)]
    assert [(r.graph_branch, r.table_key) for r in repairs] == [("dup", "node:Person")]
    assert [(d.entity_id, d.action) for d in repairs[0].decisions] == [(twin, "keep")]
    assert replay.state.phase == "released" and replay.state.stamp_written
    assert {u.status for u in replay.state.units.values()} == {"completed"}
    assert playbook_steps(uri, migration_id)[6:] == [("duplicate-repair", step, "ok") for step in REPAIR_STEPS]


# --------------------------------------------------------------------------------------------
# 5. a declined confirmation


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_declined_confirmation_stops_at_the_first_step_and_writes_nothing(compact_graph: str, tmp_path: Path) -> None:
    before = object_listing(compact_graph)
    report_path = tmp_path / "r.json"
    result = playbook(UPGRADE, compact_graph, "--report", str(report_path), cwd=tmp_path, stdin="n\n")
    assert result.returncode != 0, describe(result)
    next_lines = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("next:")]
    assert len(next_lines) == 1, describe(result)
    assert "omnigraph-migrate playbook run" in next_lines[0]
    report = json.loads(report_path.read_text())
    assert report["ok"] is False and report["exit_code"] == result.returncode
    assert step_outcomes(report) == [("preflight", "failed")]
    assert next_lines[0] == f"next: {report['steps'][0]['next_command']}"

    assert stamp(compact_graph) == "4"
    assert claim_holder(compact_graph) is None
    assert not has_migration_dir(compact_graph)
    assert object_listing(compact_graph) == before


# --------------------------------------------------------------------------------------------
# 6. refused playbooks


def _playbook_file(tmp_path: Path, name: str, steps: list[dict[str, Any]]) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "description": "test", "audience": "tests", "steps": steps}))
    return path


def _copy_step(step_id: str, source: Path, destination: str) -> dict[str, Any]:
    """A first step with a visible effect: copies ``source`` to ``destination``."""
    return {
        "id": step_id,
        "title": "Copy a root",
        "action": "copy",
        "explain": "copies a root",
        "with": {"source": str(source), "destination": destination},
    }


def _seed(tmp_path: Path) -> Path:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "object.bin").write_bytes(b"x" * 64)
    return seed


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_playbook_with_an_unknown_action_is_refused_before_any_step(backend: str, tmp_path: Path) -> None:
    graph = new_root(backend, tmp_path)
    destination = new_root(backend, tmp_path, "copy-target")
    path = _playbook_file(
        tmp_path,
        "unknown-action",
        [
            _copy_step("first", _seed(tmp_path), destination),
            {"id": "second", "title": "Nonsense", "action": "launch-missiles", "explain": "no such action"},
        ],
    )
    report_path = tmp_path / "r.json"
    result = playbook(str(path), graph, "--yes", "--report", str(report_path), cwd=tmp_path)
    assert result.returncode == 1, describe(result)
    assert "launch-missiles" in result.stderr and "action" in result.stderr.lower(), describe(result)
    assert "[1/2]" not in result.stderr, "a step ran before the playbook was refused:\n" + describe(result)
    assert open_store(destination).is_empty_root(), "the first step ran before the playbook was refused"
    assert "internal" not in result.stderr.lower() and "KeyError" not in result.stderr, describe(result)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_playbook_with_a_duplicate_step_id_is_refused_before_any_step(backend: str, tmp_path: Path) -> None:
    graph = new_root(backend, tmp_path)
    destination = new_root(backend, tmp_path, "copy-target")
    path = _playbook_file(
        tmp_path,
        "duplicate-id",
        [
            _copy_step("twice-used", _seed(tmp_path), destination),
            {"id": "twice-used", "title": "Verify", "action": "verify", "explain": "verifies", "with": {"graph": "${graph}"}},
        ],
    )
    result = playbook(str(path), graph, "--yes", cwd=tmp_path)
    assert result.returncode == 1, describe(result)
    assert str(path) in result.stderr
    assert "unique" in result.stderr or "duplicate" in result.stderr.lower(), describe(result)
    assert "[1/2]" not in result.stderr
    assert open_store(destination).is_empty_root()


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_an_unknown_playbook_name_lists_the_bundled_playbooks(backend: str, tmp_path: Path) -> None:
    graph = new_root(backend, tmp_path)
    result = playbook("nosuch", graph, "--yes", cwd=tmp_path)
    assert result.returncode == 1, describe(result)
    assert "nosuch" in result.stderr
    for name in BUNDLED:
        assert name in result.stderr, describe(result)
    as_json = playbook("nosuch", graph, "--yes", "--json", cwd=tmp_path)
    assert as_json.returncode == 1
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "bad_request"
    assert all(name in error["message"] for name in BUNDLED)


def test_unknown_or_built_in_vars_are_refused_and_still_reported(tmp_path: Path) -> None:
    graph = str(tmp_path / "absent-graph")
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    for setting, named in (("ownr=x", "ownr"), ("graph=/elsewhere", "graph")):
        refused = playbook(UPGRADE, graph, "--yes", "--var", setting, "--report", str(report), "--junit", str(junit), cwd=tmp_path)
        assert refused.returncode == 1, describe(refused)
        assert named in refused.stderr and "settable: max_outage, owner" in refused.stderr
        document = json.loads(report.read_text())
        assert document["ok"] is False and document["steps"] == [] and document["error"]["code"] == "bad_request"
        attributes, cases = read_junit(junit)
        assert attributes["failures"] == "1" and [c.outcome for c in cases] == ["failure"]
