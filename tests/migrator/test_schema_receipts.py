"""The migrator refuses a graph whose schema changed under its receipts.

``prepare`` (and every validation behind the barrier) records the identity of the graph's
``_schema.pg`` (the sha256 hex of its exact bytes, the engine's ``Catalog.version_id``)
with the receipts it takes. A hand edit of ``_schema.pg`` between the receipts and the cutover is
refused where the migration relies on them (``cutover``, ``resume``, ``run``'s cutover) with
``migration_refused`` (exit 1, :class:`~omnigraph.migrator.errors.SchemaChanged`), writing
nothing; the refusal and ``status`` name the command that takes the receipts again, and that
command, run as printed, lets the upgrade finish. Every graph is a real format-4 graph made with
the ``omnigraph-v4`` profile, every migrator command a real ``omnigraph-migrate`` process unless
the Python API is the point. The claims checked:

* at stamp 4 (online claim) the refusal names ``prepare --token``, which validates every image
  again with the new schema, and the cutover then completes (local and S3);
* behind the barrier (a run killed after a primary key) ``resume`` and ``cutover`` refuse and
  name ``abort --token``; after it, a new ``run`` completes;
* ``run`` refuses when the schema changes between its prepare round and its barrier, and not when
  it changes before its receipts are taken (they are taken with the new schema);
* the upgrade playbook's failed cutover step names the same command, and it converges;
* putting the schema back clears the refusal;
* a migration whose schema identity was never recorded (as an earlier release leaves it) is not
  refused, and its cutover records the identity.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import omnigraph.migrate
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.graph import open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.names import SCHEMA_FILE
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.ledger import Ledger
from omnigraph.ledger.records import ImageValidated, Prepared
from omnigraph.migrator.errors import MigrationRefused, SchemaChanged
from omnigraph.migrator.layout import ledger_dir, migration_ids, schema_receipt_path
from omnigraph.migrator.schema_receipt import SchemaReceipt, read_schema_receipt
from tests.support.advice import first_command, run_printed
from tests.support.check_helpers import tree_digest
from tests.support.migration_cli import assert_fully_migrated, claim_token, migrate
from tests.support.migration_fixtures import compact_copy, exports
from tests.support.paused_process import pause_at

COMPACT_TABLES = 4
UPGRADE = str(Path(__file__).resolve().parents[2] / "playbooks" / "upgrade.yaml")
HAND_EDIT = b"\n// edited by hand during the upgrade\n"


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    """One compact format-4 fixture per backend, copied for each test."""
    return {}


def _json(result: subprocess.CompletedProcess[str], code: int = 0) -> dict[str, Any]:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    return json.loads(result.stdout)


def _stamp(uri: str) -> str | None:
    return Manifest(open_store(uri)).read_stamp()[0]


def _identity(uri: str) -> str:
    return hashlib.sha256(open_store(uri).read_bytes(SCHEMA_FILE)).hexdigest()


def _edit_schema(uri: str, extra: bytes = HAND_EDIT) -> bytes:
    """Replace ``_schema.pg`` by hand with the same schema plus ``extra`` (a comment); the old bytes."""
    store = open_store(uri)
    original = store.read_bytes(SCHEMA_FILE)
    store.write_bytes(SCHEMA_FILE, original + extra)
    return original


def _refusal(result: subprocess.CompletedProcess[str], recorded: str, uri: str) -> dict[str, Any]:
    """The ``--json`` error of a schema-change refusal, checked for its code, exit and identities."""
    error = _json(result, 1)["error"]
    assert error["code"] == "migration_refused", error
    assert "changed since the receipts" in error["message"] and SCHEMA_FILE in error["message"]
    assert error["details"]["recorded_schema_id"] == recorded
    assert error["details"]["current_schema_id"] == _identity(uri) != recorded
    assert first_command(error["message"]) == error["details"]["next"]
    return error


# Local only: the identity is read through the same store call on S3 (covered by the migrator's S3 suites),
# and the CI budget is spent on the S3 runs of the migration itself.
@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_a_schema_changed_after_prepare_refuses_the_cutover_until_prepare_takes_the_receipts_again(
    backend: str, tmp_path: Path, sources: dict[str, str]
) -> None:
    uri = compact_copy(backend, tmp_path, sources)
    before = exports(uri)
    prepared = _json(migrate("prepare", uri, "--owner", "sre", "--json"))
    token, migration_id = prepared["token"], prepared["migration_id"]
    recorded = read_schema_receipt(open_store(uri), migration_id)
    assert recorded is not None and recorded.receipts_from == 1
    # The identity is the engine's schema id: the sha256 of the exact bytes of _schema.pg.
    assert recorded.schema_id == _identity(uri) == open_graph(open_store(uri), FENCED_PROFILE, write=False).catalog.version_id
    assert migration_ids(open_store(uri)) == [migration_id]  # the schema receipt is not a migration

    _edit_schema(uri)
    untouched = tree_digest(uri)
    refused = _refusal(migrate("cutover", uri, "--token", token, "--max-outage", "60s", "--json"), recorded.schema_id, uri)
    assert tree_digest(uri) == untouched  # nothing written: no barrier, no ledger record, no acting record
    assert _stamp(uri) == "4" and claim_token(uri) == token
    prepare_again = f"omnigraph-migrate prepare {uri} --token {token}"
    assert refused["details"]["next"] == prepare_again
    assert first_command(_json(migrate("status", uri, "--json"))["next"]) == prepare_again
    predicted = _json(migrate("plan", uri, "--json"))["cutover"]  # no receipt holds with the schema now
    assert predicted["changed_rows"] == 0 and predicted["unreceived_rows"] > 0

    run_printed(prepare_again).ok()
    store = open_store(uri)
    retaken = read_schema_receipt(store, migration_id)
    assert retaken is not None and retaken.schema_id == _identity(uri)
    assert retaken.replaced == [recorded.schema_id] and retaken.receipts_from > 1
    records = Ledger(store, ledger_dir(migration_id)).replay().records
    last_round = [r for _, r in records if isinstance(r, Prepared)][-1]
    assert last_round.validated == last_round.images == prepared["images"]  # every image validated again
    retaken_images = {r.image_id for seq, r in records if isinstance(r, ImageValidated) and seq >= retaken.receipts_from}
    assert len(retaken_images) == prepared["images"]
    assert first_command(_json(migrate("status", uri, "--json"))["next"]).startswith(f"omnigraph-migrate cutover {uri}")

    done = _json(migrate("cutover", uri, "--token", token, "--max-outage", "60s", "--json"))
    assert done["status"] == "migrated" and done["stamp"] == "5"
    assert_fully_migrated(uri, before, migration_id, tables=COMPACT_TABLES)
    graph = open_graph(open_store(uri), FENCED_PROFILE, write=False)
    assert graph.catalog.source.endswith(HAND_EDIT.decode()) and graph.catalog.version_id == retaken.schema_id


def test_behind_the_barrier_resume_and_cutover_refuse_and_abort_then_run_finishes(tmp_path: Path, sources: dict[str, str]) -> None:
    uri = compact_copy("local", tmp_path, sources)
    before = exports(uri)
    killed = migrate("run", uri, "--owner", "sre", failpoint="unit.after_pk")
    assert killed.returncode == 86, killed.stderr
    assert _stamp(uri) == "migrating"
    token = claim_token(uri)
    [first_migration] = migration_ids(open_store(uri))
    recorded = read_schema_receipt(open_store(uri), first_migration)
    assert recorded is not None and recorded.schema_id == _identity(uri)

    _edit_schema(uri, b"\n\n")  # whitespace is a change too: the identity is of the exact bytes
    untouched = tree_digest(uri)
    abort = f"omnigraph-migrate abort {uri} --token {token}"
    for command in (("resume", uri, "--token", token, "--json"), ("cutover", uri, "--token", token, "--json")):
        refused = _refusal(migrate(*command), recorded.schema_id, uri)
        assert refused["details"]["next"] == abort, command
        assert f"omnigraph-migrate run {uri}" in refused["message"]
        assert tree_digest(uri) == untouched, command
    assert first_command(_json(migrate("status", uri, "--json"))["next"]) == abort

    run_printed(abort).ok()
    assert _stamp(uri) == "4"
    done = _json(migrate("run", uri, "--owner", "sre", "--json"))
    assert done["status"] == "migrated" and done["migration_id"] != first_migration
    assert_fully_migrated(uri, before, done["migration_id"], tables=COMPACT_TABLES)


@pytest.mark.parametrize(
    ("paused_at", "refused"),
    [("migrate.after_claim", False), ("prepare.after_round", True)],
    ids=["before-the-receipts", "after-the-receipts"],
)
def test_run_refuses_a_schema_changed_between_its_receipts_and_its_barrier(
    tmp_path: Path, sources: dict[str, str], paused_at: str, refused: bool
) -> None:
    uri = compact_copy("local", tmp_path, sources)
    before = exports(uri)
    run = pause_at(paused_at, "omnigraph-migrate", "run", uri, "--owner", "sre", "--json")
    try:
        _edit_schema(uri)
    finally:
        returncode, stdout, stderr = run.release("continue")
    if not refused:  # the receipts were taken with the edited schema: nothing to refuse
        assert returncode == 0, stderr
        done = json.loads(stdout)
        assert read_schema_receipt(open_store(uri), done["migration_id"]).schema_id == _identity(uri)  # type: ignore[union-attr]
        assert_fully_migrated(uri, before, done["migration_id"], tables=COMPACT_TABLES)
        return
    assert returncode == 1, stderr
    error = json.loads(stdout)["error"]
    assert error["code"] == "migration_refused" and "changed since the receipts" in error["message"]
    assert _stamp(uri) == "4"  # refused before its barrier: the graph is writable
    token = claim_token(uri)
    prepare_again = first_command(error["message"])
    assert prepare_again == f"omnigraph-migrate prepare {uri} --token {token}"
    run_printed(prepare_again).ok()
    cutover = first_command(_json(migrate("status", uri, "--json"))["next"])
    assert cutover == f"omnigraph-migrate cutover {uri} --token {token}"
    run_printed(cutover).ok()
    assert_fully_migrated(uri, before, error["details"]["migration_id"], tables=COMPACT_TABLES)


def test_the_upgrade_playbook_names_the_command_that_takes_the_receipts_again(tmp_path: Path, sources: dict[str, str]) -> None:
    uri = compact_copy("local", tmp_path, sources)
    before = exports(uri)
    report_path = tmp_path / "upgrade-report.json"
    options = ("--yes", "--report", str(report_path), "--journal", str(tmp_path / "journal"))
    runner = pause_at("prepare.after_round", "omnigraph-migrate", "playbook", "run", UPGRADE, uri, *options)
    try:
        _edit_schema(uri)  # between the prepare step's receipts and the cutover step
    finally:
        returncode, _, stderr = runner.release("continue")
    assert returncode == 1, stderr
    report = json.loads(report_path.read_text(encoding="utf-8"))
    failed = report["steps"][-1]
    assert (failed["id"], failed["status"]) == ("migrate", "failed"), report
    token = claim_token(uri)
    assert failed["next_command"] == f"omnigraph-migrate prepare {uri} --token {token}"
    assert f"next: {failed['next_command']}" in stderr and _stamp(uri) == "4"
    run_printed(failed["next_command"]).ok()
    run_printed(first_command(_json(migrate("status", uri, "--json"))["next"])).ok()
    [migration_id] = migration_ids(open_store(uri))
    receipt = read_schema_receipt(open_store(uri), migration_id)
    assert receipt is not None and receipt.schema_id == _identity(uri) and len(receipt.replaced) == 1
    assert_fully_migrated(uri, before, migration_id, tables=COMPACT_TABLES)


def test_putting_the_schema_back_clears_the_refusal(tmp_path: Path, sources: dict[str, str]) -> None:
    uri = compact_copy("local", tmp_path, sources)
    before = exports(uri)
    prepared = omnigraph.migrate.prepare(uri, owner="sre")
    original = _edit_schema(uri)
    with pytest.raises(SchemaChanged) as refused:
        omnigraph.migrate.cutover(uri, token=prepared.token, max_outage=60)
    assert isinstance(refused.value, MigrationRefused)
    assert (refused.value.code, refused.value.exit_code, refused.value.http_status) == ("migration_refused", 1, 409)
    open_store(uri).write_bytes(SCHEMA_FILE, original)
    done = omnigraph.migrate.cutover(uri, token=prepared.token, max_outage=60)
    assert done.stamp == "5"
    assert_fully_migrated(uri, before, prepared.migration_id, tables=COMPACT_TABLES)


def test_a_migration_without_a_recorded_schema_is_not_refused(tmp_path: Path, sources: dict[str, str]) -> None:
    """Migrations of an earlier release have no schema receipt: their schema is unknown, not changed."""
    uri = compact_copy("local", tmp_path, sources)
    before = exports(uri)
    prepared = omnigraph.migrate.prepare(uri, owner="sre")
    store = open_store(uri)
    store.delete(schema_receipt_path(prepared.migration_id))
    _edit_schema(uri)
    done = omnigraph.migrate.cutover(uri, token=prepared.token, max_outage=60)
    assert done.stamp == "5"
    assert_fully_migrated(uri, before, prepared.migration_id, tables=COMPACT_TABLES)
    recorded = read_schema_receipt(store, prepared.migration_id)  # the cutover's validation recorded it
    assert recorded is not None and recorded.schema_id == _identity(uri) and recorded.receipts_from == 1
    # A document without an identity loads, its schema unknown.
    unknown = SchemaReceipt.model_validate_json(json.dumps({"migration_id": prepared.migration_id, "token": prepared.token}))
    assert unknown.schema_id is None and unknown.receipts_from == 1 and unknown.replaced == []
