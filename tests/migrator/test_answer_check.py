"""The upgrade's answer check: ``run|resume|verify --queries`` and the upgrade playbooks.

Read queries are answered on every live branch under the barrier before the first primary key
and again before the stamp. The refusing fixture changes a row the way nothing in the toolkit
can: the bytes of a data file rewritten in place, the same size, so the physical fingerprint
and the id digests the migration's own verification compares still match.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.failpoints import FAILPOINT_EXIT_STATUS
from omnigraph.engine.graph import open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.ops.load import load
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.errors import LedgerCorrupt
from omnigraph.ledger.fold import fold
from omnigraph.ledger.ledger import Ledger
from omnigraph.ledger.records import AnswersChecked, AnswersRecorded, MigrationStarted, PlanRecorded, UnitPlan, UnitStep
from omnigraph.migrator.layout import ledger_dir
from tests.support.graph_helpers import OMNIGRAPH_V4, run_cli
from tests.support.migration_cli import claim_token, migrate
from tests.support.migration_fixtures import BRANCHES, clone, compact_copy
from tests.support.paused_process import pause_at

QUERIES = """
query people() {
  match { $p: Person }
  return { $p.name, $p.age }
  order { $p.name asc }
}
query by_name($n: String) {
  match { $p: Person { name: $n } }
  return { $p.name, $p.age }
}
query employers() {
  match { $p: Person  $p worksAt $c }
  return { $p.name, $c.name }
  order { $p.name asc }
}
query headcount() {
  match { $p: Person }
  return { count($p) as n }
}
query unemployed() {
  match { $p: Person  not { $p worksAt $c } }
  return { $p.name }
  order { $p.name asc }
}
query add($name: String) {
  insert Person { name: $name }
}
"""
READS = ["by_name", "employers", "headcount", "people", "unemployed"]


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    return {}


@pytest.fixture
def graph(backend: str, tmp_path: Path, sources: dict[str, str]) -> str:
    """A fresh copy of the compact format-4 fixture (four branches) on ``backend``."""
    return compact_copy(backend, tmp_path, sources)


@pytest.fixture
def query_files(tmp_path: Path) -> tuple[str, str]:
    queries = tmp_path / "app.gq"
    queries.write_text(QUERIES, encoding="utf-8")
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"by_name": {"n": "Bob"}}), encoding="utf-8")
    return str(queries), str(params)


def _records(uri: str, migration_id: str) -> list[object]:
    return [record for _, record in Ledger(open_store(uri), ledger_dir(migration_id)).replay().records]


def _stamp(uri: str) -> str:
    return Manifest(open_store(uri)).read_stamp()[0]


def _rewrite_in_place(root: Path, old: bytes, new: bytes) -> int:
    """Replace ``old`` by ``new`` (same length) in every data file under ``root``; files changed."""
    assert len(old) == len(new)
    changed = 0
    for path in sorted(root.rglob("*.lance")):
        data = path.read_bytes()
        if old in data:
            path.write_bytes(data.replace(old, new))
            changed += 1
    return changed


@pytest.mark.parametrize("backend", ["local", "s3"], indirect=True)
def test_a_clean_migration_records_every_answer_and_checks_it_before_the_stamp(graph: str, query_files: tuple[str, str]) -> None:
    queries, params = query_files
    ran = migrate("run", graph, "--owner", "ci", "--queries", queries, "--query-params", params, "--json")
    assert ran.returncode == 0, ran.stderr
    outcome = json.loads(ran.stdout)
    cases = outcome["answer_check"]
    assert [(c["query"], c["graph_branch"]) for c in cases] == [(q, b) for q in READS for b in BRANCHES]
    assert all(c["ok"] for c in cases)
    by_key = {(c["query"], c["graph_branch"]): c for c in cases}
    assert by_key[("by_name", "main")]["rows"] == 1 and by_key[("by_name", "main")]["params"] == '{"n":"Bob"}'
    records = _records(graph, outcome["migration_id"])
    recorded = [r for r in records if isinstance(r, AnswersRecorded)]
    checked = [r for r in records if isinstance(r, AnswersChecked)]
    assert len(recorded) == 1 and len(recorded[0].answers) == len(READS) * len(BRANCHES)
    assert recorded[0].requeried == []  # nothing moved after the answers taken before the barrier
    assert [r.ok for r in checked] == [True]
    kinds = [r.kind for r in records]
    # the baseline is taken before the first PK effect, the check after verification, before the stamp
    assert kinds.index("answers_recorded") < kinds.index("unit_completed")
    assert kinds.index("verified") < kinds.index("answers_checked") < kinds.index("stamp_written")
    verified = migrate("verify", graph, "--queries", queries, "--query-params", params, "--json")
    assert verified.returncode == 0, verified.stderr
    assert len(json.loads(verified.stdout)["answer_check"]) == len(READS) * len(BRANCHES)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_only_a_branch_that_moved_before_the_barrier_is_queried_behind_it(graph: str, query_files: tuple[str, str], tmp_path: Path) -> None:
    """The baseline is taken at stamp 4, before the barrier; behind it only branches whose head moved since are queried again.

    ``run`` is held between its answers and its barrier (``migrate.before_barrier``) while a
    format-4 writer lands a row on ``feat``: only ``feat`` is queried behind the barrier, and the
    check still holds. A resume behind the barrier (``migrate.after_barrier``: the process that
    took the answers died with them) queries every branch behind it.
    """
    queries, params = query_files
    held = pause_at(
        "migrate.before_barrier",
        "omnigraph-migrate",
        "run",
        graph,
        "--owner",
        "ci",
        "--queries",
        queries,
        "--query-params",
        params,
        "--json",
    )
    try:
        data = tmp_path / "meanwhile.jsonl"
        data.write_text(json.dumps({"type": "Person", "data": {"name": "Meanwhile"}}) + "\n", encoding="utf-8")
        run_cli(OMNIGRAPH_V4, "load", "--mode", "append", "--branch", "feat", "--data", data, graph).ok()
    finally:
        returncode, out, err = held.release("continue")
    assert returncode == 0, err
    outcome = json.loads(out)
    [recorded] = [r for r in _records(graph, outcome["migration_id"]) if isinstance(r, AnswersRecorded)]
    assert recorded.requeried == ["feat"]
    assert all(c["ok"] for c in outcome["answer_check"])
    people = {c["graph_branch"]: c["rows"] for c in outcome["answer_check"] if c["query"] == "people"}
    assert people["feat"] == people["lazy"] + 2  # its own row from the fixture, and the one landed meanwhile

    again = compact_copy("local", tmp_path / "again", {})
    crashed = migrate("run", again, "--owner", "ci", "--queries", queries, "--query-params", params, failpoint="migrate.after_barrier")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    done = migrate("resume", again, "--token", claim_token(again), "--json")
    assert done.returncode == 0, done.stderr
    [recorded] = [r for r in _records(again, json.loads(done.stdout)["migration_id"]) if isinstance(r, AnswersRecorded)]
    assert recorded.requeried == sorted(BRANCHES)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # the fixture rewrites files on local disk
def test_a_row_changed_outside_the_engine_refuses_the_stamp_naming_query_branch_and_row(graph: str, query_files: tuple[str, str]) -> None:
    queries, params = query_files
    crashed = migrate("run", graph, "--owner", "ci", "--queries", queries, "--query-params", params, failpoint="migrate.after_answers")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    assert _rewrite_in_place(Path(graph), b"Bob", b"Bop") >= 1
    token = claim_token(graph)
    refused = migrate("resume", graph, "--token", token, "--json")  # the recorded queries are checked
    assert refused.returncode == 4, refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "answers_changed"
    message = error["message"]
    assert "query 'people' on branch 'main': row 2 was" in message
    assert '"p.name":"Bob"' in message and '"p.name":"Bop"' in message
    assert "query 'by_name' on branch 'main'" in message and "no row" in message  # Bob is gone by name
    failed = {(c["query"], c["graph_branch"]) for c in error["details"]["answer_check"] if not c["ok"]}
    assert ("people", "main") in failed and ("headcount", "main") not in failed
    assert _stamp(graph) == "migrating"
    states = [r for r in _records(graph, error["details"]["migration_id"]) if isinstance(r, AnswersChecked)]
    assert [s.ok for s in states] == [False]
    # the command the refusal names resolves the state
    abort = message.split("`")[1]
    assert abort == f"omnigraph-migrate abort {graph} --token {token}"
    aborted = migrate(*abort.split()[1:])
    assert aborted.returncode == 0, aborted.stderr
    assert _stamp(graph) == "4"


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_resume_reuses_the_recorded_queries_and_refuses_other_ones(graph: str, query_files: tuple[str, str], tmp_path: Path) -> None:
    queries, params = query_files
    crashed = migrate("run", graph, "--owner", "ci", "--queries", queries, "--query-params", params, failpoint="unit.after_pk")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    token = claim_token(graph)
    other = tmp_path / "other.gq"
    other.write_text(QUERIES.replace("asc", "desc"), encoding="utf-8")
    refused = migrate("resume", graph, "--token", token, "--queries", str(other), "--query-params", params, "--json")
    assert refused.returncode == 1 and json.loads(refused.stdout)["error"]["code"] == "precondition_failed"
    assert "without them" in json.loads(refused.stdout)["error"]["message"]
    resumed = migrate("resume", graph, "--token", token, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert len(json.loads(resumed.stdout)["answer_check"]) == len(READS) * len(BRANCHES)
    records = _records(graph, json.loads(resumed.stdout)["migration_id"])
    assert sum(isinstance(r, AnswersRecorded) for r in records) == 1


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_a_run_that_died_before_its_baseline_is_resumed_as_advised_and_still_checked(graph: str, query_files: tuple[str, str]) -> None:
    queries, params = query_files
    crashed = migrate("run", graph, "--owner", "ci", "--queries", queries, "--query-params", params, failpoint="migrate.after_validate")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    advice = json.loads(migrate("status", graph, "--json").stdout)["next"].split("`")[1]
    assert "--queries" not in advice  # the check was recorded with the start: the advice needs no files
    resumed = migrate(*advice.split()[1:], "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert len(json.loads(resumed.stdout)["answer_check"]) == len(READS) * len(BRANCHES)


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_queries_given_only_after_the_first_primary_key_are_refused_with_a_resume_that_works(
    graph: str, query_files: tuple[str, str]
) -> None:
    queries, params = query_files
    assert migrate("run", graph, "--owner", "ci", failpoint="unit.after_pk").returncode == FAILPOINT_EXIT_STATUS
    token = claim_token(graph)
    refused = migrate("resume", graph, "--token", token, "--queries", queries, "--query-params", params, "--json")
    assert refused.returncode == 1
    message = json.loads(refused.stdout)["error"]["message"]
    advice = message.split("`")[1]
    assert advice == f"omnigraph-migrate resume {graph} --token {token}"
    assert migrate(*advice.split()[1:]).returncode == 0
    assert _stamp(graph) == "5"


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_unusable_query_files_are_refused_before_anything_is_written(graph: str, tmp_path: Path) -> None:
    def refused(source: str, params: object | None = None) -> tuple[int, str, str]:
        queries = tmp_path / "q.gq"
        queries.write_text(source, encoding="utf-8")
        args = ["run", graph, "--owner", "ci", "--queries", str(queries)]
        if params is not None:
            (tmp_path / "p.json").write_text(json.dumps(params), encoding="utf-8")
            args += ["--query-params", str(tmp_path / "p.json")]
        outcome = migrate(*args, "--json")
        return outcome.returncode, outcome.stdout, outcome.stderr

    # a file an option names is content, not the command line: bad_request (exit 1), never usage (2)
    code, stdout, stderr = refused("query add($n: String) { insert Person { name: $n } }")
    assert code == 1 and json.loads(stdout)["error"]["code"] == "bad_request" and "declare no read query" in stderr
    code, stdout, stderr = refused(QUERIES, {"nope": {}})
    assert code == 1 and json.loads(stdout)["error"]["code"] == "bad_request" and "'nope', which is not a read query" in stderr
    code, stdout, _ = refused("query q() { match { $p: Person } return { $p.nme } }")
    assert code == 1 and json.loads(stdout)["error"]["code"] == "bad_request" and "nme" in stdout
    code, stdout, _ = refused(QUERIES)  # by_name's $n has no value
    assert code == 1 and json.loads(stdout)["error"]["code"] == "bad_request"
    params_only = migrate("run", graph, "--query-params", str(tmp_path / "p.json"))
    assert params_only.returncode == 2 and "--query-params needs --queries" in params_only.stderr
    assert _stamp(graph) == "4"
    assert open_store(graph).list("__migration") == []


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_verify_queries_compares_with_the_stamping_migration_and_sees_later_writes(graph: str, query_files: tuple[str, str]) -> None:
    queries, params = query_files
    no_answers = graph + "-plain"
    clone(graph, no_answers)
    assert migrate("run", no_answers, "--owner", "ci").returncode == 0
    nothing = migrate("verify", no_answers, "--queries", queries, "--query-params", params, "--json")
    message = json.loads(nothing.stdout)["error"]["message"]
    assert nothing.returncode == 1 and "recorded no answers" in message
    advised = message.split("`")[1]
    assert advised == f"omnigraph-migrate verify {no_answers}" and migrate(*advised.split()[1:]).returncode == 0
    assert migrate("run", graph, "--owner", "ci", "--queries", queries, "--query-params", params).returncode == 0
    opened = open_graph(open_store(graph), FENCED_PROFILE, write=True)
    load(opened, b'{"type": "Person", "data": {"name": "Carol"}}\n', mode="append", branch="main", actor="ci")
    changed = migrate("verify", graph, "--queries", queries, "--query-params", params, "--json")
    assert changed.returncode == 4
    error = json.loads(changed.stdout)["error"]
    assert error["code"] == "answers_changed"
    failed = sorted((c["query"], c["graph_branch"]) for c in error["details"]["answer_check"] if not c["ok"])
    assert failed == [("headcount", "main"), ("people", "main"), ("unemployed", "main")]


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_the_staging_rehearsal_reports_one_junit_case_per_query_and_branch(
    graph: str, query_files: tuple[str, str], tmp_path: Path
) -> None:
    queries, params = query_files
    junit = tmp_path / "rehearsal.xml"
    ran = migrate(
        "playbook",
        "run",
        "staging-rehearsal",
        graph,
        "--yes",
        "--queries",
        queries,
        "--query-params",
        params,
        "--junit",
        str(junit),
        "--var",
        f"staging={graph}-staging",
    )
    assert ran.returncode == 0, ran.stderr
    suite = ET.fromstring(junit.read_bytes())
    answers = [case for case in suite if case.get("classname") == "playbook.staging-rehearsal.answers"]
    assert sorted(case.get("name") for case in answers) == sorted(f"migrate: query {q} on {b}" for q in READS for b in BRANCHES)
    assert suite.get("failures") == "0" and int(suite.get("tests") or 0) == 5 + len(answers)
    assert _stamp(graph) == "4" and _stamp(f"{graph}-staging") == "5"


def _fold(*records: object) -> object:
    return fold(list(enumerate(records, start=1)), "ledger")


def test_the_ledger_accepts_one_baseline_before_any_unit_progressed() -> None:
    ids = {"token": "a" * 32, "migration_id": "m-1"}
    started = MigrationStarted(owner="ci", host="h", pid=1, tool_version="1", graph_uri="g", **ids)
    unit = UnitPlan(
        unit_id="u",
        graph_branch="main",
        branch_incarnation="main",
        table_key="node:Person",
        table_path="nodes/P",
        pinned_table_branch=None,
        pinned_table_version=1,
        image_id="i",
    )
    plan = PlanRecorded(branches=[], units=[unit], **ids)
    baseline = AnswersRecorded(source="s", params="{}", queries_sha256="x", answers=[], **ids)
    step = UnitStep(unit_id="u", step="sidecar_written", table_branch=None, table_version=None, **ids)
    assert _fold(started, plan, baseline, step).answers_sha256 == "x"
    with pytest.raises(LedgerCorrupt, match="before plan_recorded"):
        _fold(started, baseline)
    with pytest.raises(LedgerCorrupt, match="twice"):
        _fold(started, plan, baseline, baseline)
    with pytest.raises(LedgerCorrupt, match="after units progressed"):
        _fold(started, plan, step, baseline)


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_a_crash_between_the_check_and_the_stamp_is_checked_again_by_the_resume(graph: str, query_files: tuple[str, str]) -> None:
    queries, params = query_files
    crashed = migrate("run", graph, "--owner", "ci", "--queries", queries, "--query-params", params, failpoint="migrate.before_stamp")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    assert _stamp(graph) == "migrating"
    resumed = migrate("resume", graph, "--token", claim_token(graph), "--json")
    assert resumed.returncode == 0, resumed.stderr
    records = _records(graph, json.loads(resumed.stdout)["migration_id"])
    assert [r.ok for r in records if isinstance(r, AnswersChecked)] == [True, True]
    assert _stamp(graph) == "5"
