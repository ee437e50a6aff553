"""The migrator end to end, on fixture graphs built only with the format-4 writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnigraph.claims.claim import inspect
from omnigraph.cli import parallel_option
from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.failpoints import FAILPOINT_EXIT_STATUS
from omnigraph.engine.graph import open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.key_indexes import btree_indexes
from omnigraph.engine.storage.lance_io import list_branches, open_dataset, primary_key
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.ledger import Ledger
from omnigraph.migrator import layout, unit
from omnigraph.migrator.executors import fan_out
from omnigraph.migrator.layout import CLAIM_PATH, ledger_dir
from tests.conftest import new_root
from tests.support.check_helpers import assert_check_clean, assert_check_finds
from tests.support.migration_cli import assert_fully_migrated, claim_token, migrate
from tests.support.migration_fixtures import BIN, BRANCHES, build_fixture, clone, exports
from tests.support.process_race import race

MIGRATE = str(BIN / "omnigraph-migrate")


@pytest.fixture(scope="session")
def fixture_sources() -> dict[tuple[str, bool], str]:
    """Built format-4 fixtures by (backend, compact), each built on first use."""
    return {}


def _fresh_copy(backend: str, tmp_path: Path, sources: dict[tuple[str, bool], str], compact: bool) -> str:
    if (backend, compact) not in sources:
        source = new_root(backend, tmp_path, "fixture-source")
        build_fixture(source, compact=compact)
        sources[(backend, compact)] = source
    uri = new_root(backend, tmp_path)
    clone(sources[(backend, compact)], uri)
    return uri


@pytest.fixture
def graph(backend: str, tmp_path: Path, fixture_sources: dict[tuple[str, bool], str]) -> str:
    """A fresh copy of the standard format-4 fixture on the parametrised backend."""
    return _fresh_copy(backend, tmp_path, fixture_sources, compact=False)


@pytest.fixture
def compact_graph(backend: str, tmp_path: Path, fixture_sources: dict[tuple[str, bool], str]) -> str:
    """A fresh copy of the compact format-4 fixture (same branch shapes, four tables)."""
    return _fresh_copy(backend, tmp_path, fixture_sources, compact=True)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # on S3: every crash case resumes to a full migration
def test_run_migrates_every_branch_in_place(graph: str) -> None:
    before = exports(graph)
    preflight = migrate("preflight", graph, "--validate", "--json")
    assert preflight.returncode == 0, preflight.stderr
    assert len(json.loads(preflight.stdout)["units"]) == len(BRANCHES) * 9
    result = migrate("run", graph, "--owner", "ci", "--json")
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["stamp"] == "5" and outcome["units"] == len(BRANCHES) * 9
    assert_fully_migrated(graph, before, outcome["migration_id"])
    store = open_store(graph)
    for branch in BRANCHES:  # the key indexes of every table cover every row the migration found
        for table_key, entry in Manifest(store).snapshot(branch).tables.items():
            dataset = open_dataset(store, entry.table_path, entry.table_branch, entry.table_version)
            for column, name in sorted(btree_indexes(dataset).items()):
                if column not in ("id", "src", "dst"):
                    continue
                assert dataset.stats.index_stats(name)["num_unindexed_fragments"] == 0, (branch, table_key, column)
    kinds = [r.kind for _, r in Ledger(open_store(graph), ledger_dir(outcome["migration_id"])).replay().records]
    # Prepared online (plan, a receipt per image), then the barrier and the plan under it.
    barrier = kinds.index("barrier_set")
    assert kinds[:2] == ["migration_started", "plan_recorded"] and kinds[barrier - 1 : barrier + 2] == [
        "prepared",
        "barrier_set",
        "plan_recorded",
    ]
    assert "image_validated" not in kinds[barrier:]  # nothing moved since the receipts
    assert kinds[-3:] == ["verified", "stamp_written", "claim_released"]
    assert kinds.count("unit_completed") == len(BRANCHES) * 9
    verify = migrate("verify", graph, "--json")
    assert verify.returncode == 0 and json.loads(verify.stdout)["ok"] is True
    again = migrate("run", graph, "--owner", "ci", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "up_to_date", again.stdout


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_after_migration_same_id_races_have_one_winner_on_main_and_lazy(graph: str, tmp_path: Path) -> None:
    assert migrate("run", graph, "--owner", "ci").returncode == 0
    for branch in ("main", "lazy"):
        data = tmp_path / f"{branch}.jsonl"
        data.write_text(json.dumps({"type": "Person", "data": {"name": f"racer on {branch}"}}) + "\n")
        outcomes = race("omnigraph", [["load", "--mode", "append", "--branch", branch, "--data", str(data), "--json", graph]] * 8)
        assert sorted(o.returncode for o in outcomes) == [0] + [1] * 7, [o.stderr for o in outcomes]
        assert all(o.json()["error"]["code"] == "key_conflict" for o in outcomes if o.returncode)
        from tests.support.migration_fixtures import count_ids

        assert count_ids(graph, branch, "node:Person", f"racer on {branch}") == 1
    assert_check_clean(graph)


FAILPOINTS = [
    "migrate.after_claim",
    "migrate.after_barrier",
    "migrate.after_plan",
    "migrate.after_validate",
    "unit.after_sidecar",
    "unit.after_fork",
    "unit.after_pk",
    "unit.after_publish",
    "unit.after_digest",
    "migrate.after_units",
    "migrate.before_stamp",
    "migrate.after_stamp",
    "optimize.before_publish",
    "migrate.before_release",
    "migrate.after_release",
]
# On S3: a crash after the claim (a create-if-absent object) and after a unit's manifest publish
# (a Lance commit, as the PK commit and the stamp are). A crash after a table fork on S3 is
# test_engine_crash's; the other failpoints repeat one of these kinds of write.
S3_FAILPOINTS = [
    "migrate.after_claim",
    "unit.after_publish",
]
CRASH_CASES = [("local", f) for f in FAILPOINTS] + [("s3", f) for f in S3_FAILPOINTS]


@pytest.mark.parametrize("backend, failpoint", CRASH_CASES, indirect=["backend"])
def test_crash_at_each_failpoint_then_resume_converges(compact_graph: str, failpoint: str) -> None:
    before = exports(compact_graph)
    crashed = migrate("run", compact_graph, "--owner", "ci", failpoint=failpoint)
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    store = open_store(compact_graph)
    if failpoint == "migrate.after_release":
        assert inspect(store, CLAIM_PATH) is None
        nothing = migrate("resume", compact_graph, "--token", "0" * 32, "--json")
        assert nothing.returncode == 1 and json.loads(nothing.stdout)["error"]["code"] == "not_found"
        migration_id = json.loads(migrate("status", compact_graph, "--json").stdout)["migration_id"]
    else:
        token = claim_token(compact_graph)
        resumed = migrate("resume", compact_graph, "--token", token, "--json")
        assert resumed.returncode == 0, resumed.stderr
        migration_id = json.loads(resumed.stdout)["migration_id"]
    assert_fully_migrated(compact_graph, before, migration_id, tables=4)


@pytest.mark.parametrize(
    "backend, first, second",
    [
        ("local", "unit.after_pk", "unit.after_publish"),
        ("local", "unit.after_fork", "migrate.before_stamp"),
        ("local", "migrate.after_validate", "unit.after_digest"),
    ],
    indirect=["backend"],
)
def test_a_second_crash_during_resume_also_converges(compact_graph: str, first: str, second: str) -> None:
    before = exports(compact_graph)
    assert migrate("run", compact_graph, "--owner", "ci", failpoint=first).returncode == FAILPOINT_EXIT_STATUS
    token = claim_token(compact_graph)
    assert migrate("resume", compact_graph, "--token", token, failpoint=second).returncode == FAILPOINT_EXIT_STATUS
    resumed = migrate("resume", compact_graph, "--token", token, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert_fully_migrated(compact_graph, before, json.loads(resumed.stdout)["migration_id"], tables=4)


# local only: on S3, create-if-absent races are test_claims' and test_storage's
@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_two_runs_at_once_one_proceeds_the_other_exits_3(graph: str) -> None:
    outcomes = race("omnigraph-migrate", [["run", graph, "--owner", f"sre-{i}", "--json"] for i in range(2)])
    codes = sorted(o.returncode for o in outcomes)
    assert codes == [0, 3], [o.stderr for o in outcomes]
    loser = next(o for o in outcomes if o.returncode == 3)
    error = loser.json()["error"]
    assert error["code"] == "claim_held"
    assert "sre-" in error["message"]
    assert_check_clean(graph)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_resume_with_a_wrong_token_is_refused(graph: str) -> None:
    assert migrate("run", graph, "--owner", "ci", failpoint="unit.after_pk").returncode == FAILPOINT_EXIT_STATUS
    refused = migrate("resume", graph, "--token", "f" * 32, "--json")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["code"] == "precondition_failed"
    assert Manifest(open_store(graph)).read_stamp()[0] == "migrating"
    # The crashed unit's PK commit is not published yet: its table HEAD is one past the pin.
    assert_check_finds(graph, ["migration_in_progress", "table_head_ahead"])


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_abort_restores_stamp_4_keeps_pks_and_a_later_run_completes(graph: str) -> None:
    before = exports(graph)
    assert migrate("run", graph, "--owner", "ci", failpoint="unit.after_publish").returncode == FAILPOINT_EXIT_STATUS
    token = claim_token(graph)
    aborted = migrate("abort", graph, "--token", token, "--json")
    assert aborted.returncode == 0, aborted.stderr
    store = open_store(graph)
    assert Manifest(store).read_stamp() == ("4", None)
    assert inspect(store, CLAIM_PATH) is None
    # The first unit's PK stays (roll-forward only), and old writers work again.
    entry = Manifest(store).snapshot("main").tables["edge:Knows"]
    assert primary_key(open_dataset(store, entry.table_path, entry.table_branch, entry.table_version).schema) == ["id"]
    open_graph(open_store(graph), LEGACY_PROFILE, write=True)
    rerun = migrate("run", graph, "--owner", "ci", "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert_fully_migrated(graph, before, json.loads(rerun.stdout)["migration_id"])


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_foreign_fork_is_refused_on_resume(graph: str) -> None:
    assert migrate("run", graph, "--owner", "ci", failpoint="unit.after_sidecar").returncode == FAILPOINT_EXIT_STATUS
    store = open_store(graph)
    token = claim_token(graph)
    # feat2 inherits edge:Knows from main: plant a Lance branch named feat2 on that table,
    # forked from another version than feat2 pins, before the resume reaches that unit.
    entry = Manifest(store).snapshot("feat2").tables["edge:Knows"]
    dataset = open_dataset(store, entry.table_path)
    dataset.create_branch("feat2", reference=("main", 1))
    refused = migrate("resume", graph, "--token", token, "--json")
    assert refused.returncode == 1, refused.stderr
    assert json.loads(refused.stdout)["error"]["code"] == "migration_refused"
    assert "feat2" in list_branches(open_dataset(store, entry.table_path))
    assert Manifest(store).read_stamp()[0] == "migrating"
    report = assert_check_finds(graph, ["migration_in_progress", "unpinned_table_branch"])
    assert [f["table_path"] for f in report["findings"] if f["kind"] == "unpinned_table_branch"] == [entry.table_path]


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_an_interrupted_abort_is_finished_by_aborting_again(compact_graph: str) -> None:
    assert migrate("run", compact_graph, "--owner", "ci", failpoint="unit.after_fork").returncode == FAILPOINT_EXIT_STATUS
    token = claim_token(compact_graph)
    interrupted = migrate("abort", compact_graph, "--token", token, failpoint="abort.before_release")
    assert interrupted.returncode == FAILPOINT_EXIT_STATUS
    refused = migrate("resume", compact_graph, "--token", token, "--json")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["code"] == "precondition_failed"
    assert "aborted" in json.loads(refused.stdout)["error"]["message"]
    finished = migrate("abort", compact_graph, "--token", token, "--json")
    assert finished.returncode == 0, finished.stderr
    store = open_store(compact_graph)
    assert Manifest(store).read_stamp() == ("4", None) and inspect(store, CLAIM_PATH) is None
    ledger = Ledger(store, ledger_dir(json.loads(finished.stdout)["migration_id"]))
    kinds = [r.kind for _, r in ledger.replay().records]
    assert kinds.count("aborted") == 1 and kinds.count("claim_released") == 1
    # The abort keeps the fork the crashed unit made and never published; check names it.
    report = assert_check_finds(compact_graph, ["unpinned_table_branch"])
    assert [f["details"]["table_branch"] for f in report["findings"]] == ["feat"]


# --parallel: units of distinct branches in flight at once. The compact fixture has four
# branches, so a crash with --parallel 4 may leave up to four units in progress at once.
@pytest.mark.parametrize("failpoint", ["unit.after_sidecar", "unit.after_pk", "unit.after_publish"])
@pytest.mark.parametrize("backend", ["local"], indirect=True)  # on S3 the default is 16 in flight: S3_FAILPOINTS
def test_crash_with_units_in_flight_then_parallel_resume_converges(compact_graph: str, failpoint: str) -> None:
    before = exports(compact_graph)
    crashed = migrate("run", compact_graph, "--owner", "ci", "--parallel", "4", failpoint=failpoint)
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    token = claim_token(compact_graph)
    holder = inspect(open_store(compact_graph), CLAIM_PATH)
    assert holder is not None
    in_progress = layout.remaining(open_store(compact_graph), holder.migration_id)
    assert len(in_progress) >= 1
    assert len({unit.split("~")[0] for unit in in_progress}) == len(in_progress)  # at most one per branch
    resumed = migrate("resume", compact_graph, "--token", token, "--parallel", "4", "--json")
    assert resumed.returncode == 0, resumed.stderr
    migration_id = json.loads(resumed.stdout)["migration_id"]
    assert_fully_migrated(compact_graph, before, migration_id, tables=4)
    records = Ledger(open_store(compact_graph), ledger_dir(migration_id)).replay().records
    assert [seq for seq, _ in records] == list(range(1, len(records) + 1))


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_parallel_out_of_range_is_a_usage_error_with_nothing_written(compact_graph: str) -> None:
    for value in ("0", "65", "x"):
        refused = migrate("run", compact_graph, "--owner", "ci", "--parallel", value)
        assert refused.returncode == 2, refused.stderr
        assert "--parallel" in refused.stderr
    assert Manifest(open_store(compact_graph)).read_stamp()[0] == "4"
    assert inspect(open_store(compact_graph), CLAIM_PATH) is None
    assert unit.MAX_PARALLEL == parallel_option.MAX_PARALLEL


def test_fan_out_keeps_the_order_of_its_inputs_and_raises_the_first_failure() -> None:
    import threading
    import time

    seen: set[str] = set()

    def slow_echo(item: int) -> int:
        seen.add(threading.current_thread().name)
        time.sleep(0.02 * (5 - item))
        return item * 10

    assert fan_out(slow_echo, [0, 1, 2, 3, 4], 5) == [0, 10, 20, 30, 40]
    assert len(seen) > 1  # really in flight at once

    def failing(item: int) -> int:
        time.sleep(0.01 * (5 - item))
        if item in (1, 3):
            raise ValueError(f"item {item}")
        return item

    with pytest.raises(ValueError, match="item 1"):
        fan_out(failing, [0, 1, 2, 3, 4], 4)


@pytest.mark.parametrize("backend", ["local", "s3"], indirect=True)
def test_a_fork_killed_inside_lance_is_made_again_on_resume(compact_graph: str) -> None:
    """A process killed inside Lance's fork leaves the fork's ``tree/<branch>`` without a ref,
    which Lance refuses to fork again. Resume removes it (the unit's sidecar planned that fork)
    and forks again. The state is made here as the kill leaves it: the fork made, its ref gone."""
    before = exports(compact_graph)
    crashed = migrate("run", compact_graph, "--owner", "ci", "--parallel", "1", failpoint="unit.after_sidecar")
    assert crashed.returncode == FAILPOINT_EXIT_STATUS, crashed.stderr
    store = open_store(compact_graph)
    holder = inspect(store, CLAIM_PATH)
    assert holder is not None
    state = Ledger(store, ledger_dir(holder.migration_id)).replay().state
    inherited = next(u for u in state.plan if u.pinned_table_branch != u.graph_branch and u.graph_branch != "main")
    # the unit with the sidecar is main's (owned); make the interrupted fork of an inherited one
    dataset = open_dataset(store, inherited.table_path)
    parent = inherited.pinned_table_branch or "main"
    dataset.create_branch(inherited.graph_branch, reference=(parent, inherited.pinned_table_version))
    store.delete(f"{inherited.table_path}/_refs/branches/{inherited.graph_branch}.json")
    assert inherited.graph_branch not in list_branches(open_dataset(store, inherited.table_path))
    resumed = migrate("resume", compact_graph, "--token", claim_token(compact_graph), "--json")
    assert resumed.returncode == 0, resumed.stderr
    migration_id = json.loads(resumed.stdout)["migration_id"]
    assert_fully_migrated(compact_graph, before, migration_id, tables=4)
    completed = [
        r
        for _, r in Ledger(store, ledger_dir(migration_id)).replay().records
        if r.kind == "unit_completed" and r.unit_id == inherited.unit_id
    ]
    assert [r.fork for r in completed] == ["created"]
