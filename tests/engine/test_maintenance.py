"""Routine Lance maintenance must not wedge a graph (engine/reconcile/drift/detect.py, engine/maintenance/optimize.py).

Commits are made by hand with Lance directly, as an operator would; the graph's next write must
adopt the ones that change no row (a recorded graph commit) and refuse the others with
``table_drift``, whose message names commands that really resolve the state: every such command
is parsed from the message and run here. Both backends (local disk and the S3 server).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from click.testing import CliRunner

from omnigraph.engine.errors import TableDrift
from omnigraph.engine.graph import init_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.reconcile import drift, recovery
from omnigraph.engine.reconcile.recovery import WriteIntent
from omnigraph.engine.storage.lance_io import open_dataset
from omnigraph.engine.storage.process import process_start_marker, this_host
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import (
    ACTOR,
    FENCED_PROFILE,
    LEGACY_PROFILE,
    OMNIGRAPH,
    OMNIGRAPH_V4,
    Cli,
    export_text,
    invoke,
    jsonl,
    load_lines,
    omnigraph,
    person,
    write_jsonl,
)
from tests.support.process_race import race

SCHEMA = """
node Person { name: String @key  age: I32? }
node Tag { label: String }
"""
WRITERS = 8
PERSON = "node:Person"


# -- helpers -----------------------------------------------------------------------------------


def _person_table(uri: str, branch: str = "main") -> lance.LanceDataset:
    """The latest version of the Lance branch holding ``branch``'s Person table."""
    store = open_store(uri)
    entry = Manifest(store).snapshot(branch).table(PERSON)
    dataset = lance.dataset(store.dataset_uri(entry.table_path), storage_options=store.storage_options)
    return dataset if entry.table_branch is None else dataset.checkout_version((entry.table_branch, None))


def _ids(uri: str, branch: str = "main") -> list[str]:
    store = open_store(uri)
    entry = Manifest(store).snapshot(branch).table(PERSON)
    table = open_dataset(store, entry.table_path, entry.table_branch, entry.table_version).to_table(columns=["id"])
    return sorted(table.column("id").to_pylist())


def _head_message(uri: str, branch: str = "main") -> tuple[str, str]:
    head = Manifest(open_store(uri)).snapshot(branch).head
    return head.actor, head.message


def _write(uri: str, tmp_path: Path, name: str) -> Cli:
    data = write_jsonl(tmp_path, f"{name}.jsonl", [person(name)])
    return invoke(OMNIGRAPH, "load", "--mode", "append", "--data", data, "--json", uri)


def _commands_in(message: str, verb: str) -> list[str]:
    """The `omnigraph drift VERB ...` commands quoted in an error message."""
    return [c for c in re.findall(r"`([^`]+)`", message) if c.startswith(f"omnigraph drift {verb} ")]


def _run_quoted(command: str) -> Cli:
    """Run an ``omnigraph ...`` command exactly as a message printed it."""
    argv = shlex.split(command)
    assert argv[0] == "omnigraph", command
    return invoke(OMNIGRAPH, *argv[1:])


def _drift_refusal(result: Cli, operation: str) -> dict[str, Any]:
    assert result.returncode == 5, result.describe()
    error = result.json()["error"]
    assert error["code"] == "table_drift", result.describe()
    assert error["details"]["table_key"] == PERSON
    assert [c["operation"] for c in error["details"]["operations"]] == [operation]
    return error


# -- out-of-band commits by hand -----------------------------------------------------------------


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_hand_made_commits_are_adopted_or_refused_with_commands_that_resolve_them(root_uri: str, tmp_path: Path) -> None:
    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE, ACTOR)
    load_lines(root_uri, [person("ann"), person("bob")])
    load_lines(root_uri, [person("cyd")])

    # 1. an index by hand: adopted by the next write, recorded with actor and reason
    before = _person_table(root_uri).version
    _person_table(root_uri).create_scalar_index("id", "BTREE")
    _write(root_uri, tmp_path, "dan").ok()
    commits = invoke(OMNIGRAPH, "commit", "list", "--json", root_uri).ok().json()["commits"]
    assert commits[1]["message"] == f"adopted CreateIndex v{before}..v{before + 1} on {PERSON}"
    assert commits[1]["actor"] == ACTOR
    assert commits[0]["message"].startswith("load")

    # 2. a compaction by hand (the table is indexed: pylance cannot decode this Rewrite)
    before = _person_table(root_uri).version
    _person_table(root_uri).optimize.compact_files()
    _write(root_uri, tmp_path, "eve").ok()
    commits = invoke(OMNIGRAPH, "commit", "list", "--json", root_uri).ok().json()["commits"]
    assert commits[1]["message"] == f"adopted Rewrite v{before}..v{before + 2} on {PERSON}"
    assert _ids(root_uri) == ["ann", "bob", "cyd", "dan", "eve"]

    # 3. a bare Append by hand: table_drift; `drift show` explains it, the named adopt command keeps the row
    hand = _person_table(root_uri).to_table().slice(0, 1).set_column(0, "id", pa.array(["hand"]))
    lance.write_dataset(hand, _person_table(root_uri), mode="append")
    error = _drift_refusal(_write(root_uri, tmp_path, "fay"), "Append")
    shown = _run_quoted(error["details"]["commands"]["show"] + " --json").ok().json()["tables"]
    assert [(t["verdict"], t["rows_preserved"]) for t in shown] == [("drift", False)]
    (adopt,) = _commands_in(error["message"], "adopt")
    _run_quoted(adopt).ok()
    assert _head_message(root_uri)[1].startswith("adopted Append")
    _write(root_uri, tmp_path, "fay").ok()
    assert "hand" in _ids(root_uri) and "fay" in _ids(root_uri)

    # 4. a delete by hand: table_drift; the named revert command brings the row back
    _person_table(root_uri).delete("id = 'ann'")
    error = _drift_refusal(_write(root_uri, tmp_path, "gus"), "Delete")
    (revert,) = _commands_in(error["message"], "revert")
    _run_quoted(revert).ok()
    assert _head_message(root_uri)[1].startswith("reverted Delete")
    _write(root_uri, tmp_path, "gus").ok()
    assert _ids(root_uri) == ["ann", "bob", "cyd", "dan", "eve", "fay", "gus", "hand"]

    # 5. a duplicate id appended by hand: adopting it fails the fencing checks and names the revert
    duplicate = _person_table(root_uri).to_table().slice(0, 1)
    lance.write_dataset(duplicate, _person_table(root_uri), mode="append")
    error = _drift_refusal(_write(root_uri, tmp_path, "hal"), "Append")
    (adopt,) = _commands_in(error["message"], "adopt")
    refused = _run_quoted(adopt + " --json")
    assert refused.returncode == 4, refused.describe()
    assert refused.json()["error"]["code"] == "validation_failed"
    assert _ids(root_uri).count("ann") == 1  # nothing was adopted
    (revert,) = _commands_in(refused.json()["error"]["message"], "revert")
    _run_quoted(revert).ok()
    _write(root_uri, tmp_path, "hal").ok()
    assert _ids(root_uri) == ["ann", "bob", "cyd", "dan", "eve", "fay", "gus", "hal", "hand"]

    # after all of it (a BTREE on id included) a same-id race still has exactly one winner
    files = [str(write_jsonl(tmp_path, f"racer-{i}.jsonl", [person("racer")])) for i in range(WRITERS)]
    outcomes = race("omnigraph", [["load", "--mode", "append", "--data", f, "--json", root_uri] for f in files])
    winners = [o for o in outcomes if o.returncode == 0]
    assert len(winners) == 1, [o.stderr for o in outcomes]
    assert all(o.json()["error"]["code"] == "key_conflict" for o in outcomes if o.returncode != 0)
    assert _ids(root_uri).count("racer") == 1
    assert _person_table(root_uri).describe_indices()  # the index is still there


def test_hand_made_index_on_a_branch_fork_is_adopted_on_the_next_read_write_open(root_uri: str) -> None:
    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE, ACTOR)
    load_lines(root_uri, [person("ann")])
    invoke(OMNIGRAPH, "branch", "create", "feat", root_uri).ok()
    load_lines(root_uri, [person("bob")], branch="feat")
    before = _person_table(root_uri, "feat").version
    _person_table(root_uri, "feat").create_scalar_index("id", "BTREE")
    invoke(OMNIGRAPH, "branch", "create", "other", root_uri).ok()  # any read-write open
    actor, message = _head_message(root_uri, "feat")
    assert message == f"adopted CreateIndex v{before}..v{before + 1} on {PERSON}"
    assert actor == ACTOR
    assert invoke(OMNIGRAPH, "drift", "show", "--branch", "feat", "--json", root_uri).ok().json()["tables"] == []


def test_table_drift_is_a_503_with_exit_code_5() -> None:
    error = TableDrift("x")
    assert (error.code, error.http_status, error.exit_code) == ("table_drift", 503, 5)


# -- optimize ------------------------------------------------------------------------------------


def _every_pinned_image(uri: str) -> dict[tuple[str, str | None, int], int]:
    """Row count of every table image pinned by any __manifest version of any branch."""
    manifest = Manifest(open_store(uri))
    counts = {}
    for branch in manifest.branches():
        for version in manifest.head_versions(branch):
            for entry in manifest.snapshot(branch, version).tables.values():
                counts[(entry.table_path, entry.table_branch, entry.table_version)] = entry.row_count
    return counts


def _check_images_readable(uri: str, expected: dict[tuple[str, str | None, int], int]) -> None:
    store = open_store(uri)
    for (path, branch, version), rows in sorted(expected.items(), key=lambda item: (item[0][0], item[0][1] or "", item[0][2])):
        assert open_dataset(store, path, branch, version).count_rows() == rows, (path, branch, version)


def _make_live(store: Any, intent: WriteIntent, pid: int, start: str | None) -> None:
    """Re-arm ``intent`` as if process ``pid`` owned it."""
    recovery.disarm(store, intent.operation_id)
    recovery.arm(store, intent.model_copy(update={"pid": pid, "process_start": start, "host": this_host()}))


def test_optimize_cleanup_keeps_every_version_a_branch_commit_or_intent_needs(root_uri: str, tmp_path: Path) -> None:
    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE, ACTOR)
    for name in ("ann", "bob", "cyd"):
        load_lines(root_uri, [person(name)])
    invoke(OMNIGRAPH, "branch", "create", "lazy", root_uri).ok()  # pins main's image as it is now
    invoke(OMNIGRAPH, "branch", "create", "own", root_uri).ok()
    load_lines(root_uri, [person("own-1")], branch="own")
    for name in ("dan", "eve"):
        load_lines(root_uri, [person(name)])
    _person_table(root_uri).optimize.compact_files()  # by hand: adopted, leaves an unpinned version
    # a writer on `own` crashed after its effect landed; its intent is made to look alive
    data = write_jsonl(tmp_path, "crash.jsonl", [person("own-2")])
    crashed = omnigraph(
        "load", "--mode", "append", "--data", data, "--branch", "own", root_uri, env={"OMNIGRAPH_FAILPOINTS": "write.after_effect"}
    )
    assert crashed.returncode == 86, crashed.describe()
    store = open_store(root_uri)
    (intent,) = recovery.list_intents(store)
    _make_live(store, intent, os.getpid(), process_start_marker(os.getpid()))

    exports = {b: export_text(root_uri, b) for b in ("main", "lazy", "own")}
    images = _every_pinned_image(root_uri)
    assert invoke(OMNIGRAPH, "optimize", "--index", "nope", root_uri).returncode == 1  # no such column
    assert invoke(OMNIGRAPH, "optimize", "--cleanup-older-than", "soon", root_uri).returncode == 2
    dry = invoke(OMNIGRAPH, "optimize", "--compact", "--cleanup-older-than", "0s", "--dry-run", "--json", root_uri).ok().json()
    result = invoke(OMNIGRAPH, "optimize", "--compact", "--index", "id", "--cleanup-older-than", "0s", "--json", root_uri).ok().json()
    deleted = {(c["table_path"], c["table_branch"]): c["deleted_versions"] for c in result["cleanup"]}
    assert any(deleted.values()), result  # something was really cleaned up
    assert {k: v for k, v in deleted.items() if v} == {
        (c["table_path"], c["table_branch"]): c["deleted_versions"] for c in dry["cleanup"] if c["deleted_versions"]
    }
    assert [t["table_key"] for t in result["tables"]] == [PERSON, "node:Tag"]
    assert _head_message(root_uri)[1].startswith("optimized ")

    assert {b: export_text(root_uri, b) for b in ("main", "lazy", "own")} == exports
    _check_images_readable(root_uri, images)
    # the crashed writer is dead after all: recovery still restores its table from the kept pin
    _make_live(store, intent, intent.pid, intent.process_start)
    load_lines(root_uri, [person("own-3")], branch="own")
    assert _ids(root_uri, "own") == sorted(["ann", "bob", "cyd", "own-1", "own-3"])
    assert export_text(root_uri, "lazy") == exports["lazy"]
    # writes still go through the door on the compacted, indexed main table
    assert _write(root_uri, tmp_path, "ann").json()["error"]["code"] == "key_conflict"


def _migrate(*args: str) -> Cli:
    from omnigraph.cli.migrate import cli as migrate_cli

    result = CliRunner().invoke(
        migrate_cli, list(args), env={"OMNIGRAPH_ACTOR": ACTOR}, catch_exceptions=False, prog_name="omnigraph-migrate"
    )
    return Cli(("omnigraph-migrate", *args), result.exit_code, result.stdout, result.stderr)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_format_4_graph_with_hand_made_commits_and_optimize_still_migrates(root_uri: str, tmp_path: Path) -> None:
    init_graph(open_store(root_uri), SCHEMA, LEGACY_PROFILE, ACTOR)
    for name in ("ann", "bob"):
        load_lines(root_uri, [person(name)], profile=LEGACY_PROFILE)
    load_lines(root_uri, jsonl([json.dumps({"type": "Tag", "data": {"id": "t1", "label": "x"}})]), profile=LEGACY_PROFILE)
    invoke(OMNIGRAPH_V4, "branch", "create", "lazy", root_uri).ok()
    load_lines(root_uri, [person("cyd")], profile=LEGACY_PROFILE)

    # row-changing drift stops preflight and run before anything is claimed; the named command works at format 4
    hand = _person_table(root_uri).to_table().slice(0, 1).set_column(0, "id", pa.array(["hand"]))
    lance.write_dataset(hand, _person_table(root_uri), mode="append")
    refused = _migrate("preflight", "--json", root_uri)
    assert refused.returncode == 5 and refused.json()["error"]["code"] == "table_drift", refused.describe()
    assert _migrate("run", root_uri, "--owner", "ops").returncode == 5
    assert not open_store(root_uri).exists("__migration/claim.json")
    (adopt,) = _commands_in(refused.json()["error"]["message"], "adopt")
    _run_quoted(adopt).ok()

    # a compaction by hand is reported by preflight and adopted by run under the claim
    _person_table(root_uri).optimize.compact_files()
    report = _migrate("preflight", "--json", root_uri).ok().json()
    assert [(r["table_key"], r["verdict"]) for r in report["out_of_band"]] == [(PERSON, "adoptable")]
    exports = {b: export_text(root_uri, b, profile=LEGACY_PROFILE) for b in ("main", "lazy")}
    invoke(OMNIGRAPH, "optimize", "--compact", "--cleanup-older-than", "0s", root_uri).ok()
    # optimize adopted the hand compaction at its read-write open, then cleaned up
    assert _migrate("preflight", "--json", root_uri).ok().json()["out_of_band"] == []

    _person_table(root_uri).create_scalar_index("id", "BTREE", replace=True)  # by hand again
    _migrate("run", root_uri, "--owner", "ops").ok()
    _migrate("verify", root_uri).ok()
    assert {b: export_text(root_uri, b) for b in ("main", "lazy")} == exports
    store = open_store(root_uri)
    head = Manifest(store).snapshot("main").head
    assert head.message.startswith("adopted CreateIndex") and head.actor.startswith("omnigraph-migrate "), head
    # cleanup never pinned anything wrong: every reachable image still opens
    _check_images_readable(root_uri, _every_pinned_image(root_uri))


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_unpublished_fork_made_by_hand_is_drift_that_revert_resolves(root_uri: str, tmp_path: Path) -> None:
    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE, ACTOR)
    load_lines(root_uri, [person("ann")])
    invoke(OMNIGRAPH, "branch", "create", "feat", root_uri).ok()
    store = open_store(root_uri)
    entry = Manifest(store).snapshot("feat").table(PERSON)
    main_table = lance.dataset(store.dataset_uri(entry.table_path), storage_options=store.storage_options)
    main_table.create_branch("feat", reference=("main", entry.table_version))  # by hand, as the engine would
    hand = main_table.to_table().set_column(0, "id", pa.array(["hand"]))
    lance.write_dataset(hand, main_table.checkout_version(("feat", None)), mode="append")

    data = write_jsonl(tmp_path, "bob.jsonl", [person("bob")])
    refused = invoke(OMNIGRAPH, "load", "--mode", "append", "--branch", "feat", "--data", data, "--json", root_uri)
    error = _drift_refusal(refused, "Append")
    assert error["details"]["drifted"][0]["unpinned_fork"]["name"] == "feat"
    (revert,) = _commands_in(error["message"], "revert")
    _run_quoted(revert).ok()
    invoke(OMNIGRAPH, "load", "--mode", "append", "--branch", "feat", "--data", data, root_uri).ok()
    assert _ids(root_uri, "feat") == ["ann", "bob"]
    assert _ids(root_uri) == ["ann"]


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_recover_command_named_by_recovery_required_resolves_an_interrupted_commit(root_uri: str, tmp_path: Path) -> None:
    """Every ``recovery_required`` of the write path names ``omnigraph recover GRAPH``
    (:func:`omnigraph.engine.reconcile.drift.recover_command`); it resolves a commit whose writer died after its
    effects landed, and reports drift it cannot resolve with the drift commands."""
    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE, ACTOR)
    load_lines(root_uri, [person("ann")])
    before = export_text(root_uri)
    data = write_jsonl(tmp_path, "crash.jsonl", [person("bob")])
    crashed = omnigraph("load", "--mode", "append", "--data", data, root_uri, env={"OMNIGRAPH_FAILPOINTS": "write.after_effect"})
    assert crashed.returncode == 86, crashed.describe()
    assert len(recovery.list_intents(open_store(root_uri))) == 1
    result = _run_quoted(drift.recover_command(root_uri) + " --json").ok().json()
    assert [r["outcome"] for r in result["recovered"]] == ["rolled_back"]
    assert recovery.list_intents(open_store(root_uri)) == []
    assert export_text(root_uri) == before
    hand = _person_table(root_uri).to_table().set_column(0, "id", pa.array(["hand"]))
    lance.write_dataset(hand, _person_table(root_uri), mode="append")
    refused = _run_quoted(drift.recover_command(root_uri) + " --json")
    (revert,) = _commands_in(_drift_refusal(refused, "Append")["message"], "revert")
    _run_quoted(revert).ok()
    _write(root_uri, tmp_path, "bob").ok()
    assert _ids(root_uri) == ["ann", "bob"]


def test_optimize_cleanup_keeps_a_version_a_migration_sidecar_pins(root_uri: str) -> None:
    from omnigraph.engine.schema.ids import new_ulid
    from omnigraph.engine.storage.store import canonical_json
    from omnigraph.ledger.records import UnitPlan
    from omnigraph.migrator.layout import ManifestDelta, UnitSidecar, sidecar_path

    init_graph(open_store(root_uri), SCHEMA, FENCED_PROFILE, ACTOR)
    load_lines(root_uri, [person("ann")])
    load_lines(root_uri, [person("bob")])
    before = _person_table(root_uri).version
    _person_table(root_uri).optimize.compact_files()  # two versions; the first is never pinned
    unpinned = before + 1
    store = open_store(root_uri)
    path = Manifest(store).snapshot("main").table(PERSON).table_path
    migration_id = new_ulid()
    unit = UnitPlan(
        unit_id="main~node-Person",
        graph_branch="main",
        branch_incarnation="main",
        table_key=PERSON,
        table_path=path,
        pinned_table_branch=None,
        pinned_table_version=unpinned,
        image_id=f"{path}@main@v{unpinned}",
    )
    sidecar = UnitSidecar(
        migration_id=migration_id,
        token="t",
        unit=unit,
        planned_fork=None,
        planned_pk=["id"],
        manifest_delta=ManifestDelta(
            graph_branch="main", table_key=PERSON, table_branch=None, migration_id=migration_id, migration_unit=unit.unit_id
        ),
    )
    assert store.put_if_absent(sidecar_path(migration_id, unit.unit_id), canonical_json(sidecar))

    def cleaned() -> list[int]:
        result = invoke(OMNIGRAPH, "optimize", "--cleanup-older-than", "0s", "--json", root_uri).ok().json()
        return [v for c in result["cleanup"] if c["table_path"] == path for v in c["deleted_versions"]]

    assert unpinned not in cleaned()
    assert open_dataset(store, path, None, unpinned).count_rows() == 2
    store.delete(sidecar_path(migration_id, unit.unit_id))
    assert cleaned() == [unpinned]
    assert export_text(root_uri).count("Person") == 2
