"""A format-4 writer that opened before the barrier and publishes after stamp 5 is caught.

A real ``omnigraph-v4 load`` process opens the format-4 graph and is held alive right after its
stamp check (failpoint ``open.after_stamp``, :mod:`tests.support.paused_process`); the migration then runs
to stamp 5; released, the old writer publishes without the fence. Afterwards every format-5
read-write open refuses with ``format_refused`` naming that commit, ``verify`` and the readiness
check report it, and the command the refusal names (``omnigraph-migrate refence``) fences the
graph again: writes work, the old writer's rows are kept, every table has PK ``[id]``.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import lance
import pytest
from click.testing import CliRunner

from omnigraph.cli.migrate import cli as migrate_cli
from omnigraph.engine.access.writer_audit import readiness_problems
from omnigraph.engine.manifest.manifest import FORMAT_KEY, Manifest
from omnigraph.engine.storage.lance_io import open_dataset, primary_key
from omnigraph.engine.storage.names import MANIFEST_DIR
from omnigraph.engine.storage.store import open_store
from omnigraph.server.service import GraphService
from tests.conftest import new_root
from tests.support.graph_helpers import OMNIGRAPH, SCHEMA_PATH, Cli, invoke
from tests.support.migration_fixtures import build_fixture
from tests.support.paused_process import pause_at

LATE_ROWS = {
    "append": ("node:Person", {"type": "Person", "data": {"name": "Late Writer", "age": 51}}),
    "overwrite": ("node:Audit", {"type": "Audit", "data": {"note": "written late"}}),
}


def migrate(*args: str) -> Cli:
    """``omnigraph-migrate`` in this process (never with a failpoint armed)."""
    result = CliRunner().invoke(
        migrate_cli, list(args), env={"OMNIGRAPH_FAILPOINTS": None}, catch_exceptions=False, prog_name="omnigraph-migrate"
    )
    return Cli(("omnigraph-migrate", *args), result.exit_code, result.stdout, result.stderr)


def _write(tmp_path: Path, name: str, *records: dict) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _late_format4_commit(uri: str, tmp_path: Path, mode: str) -> str:
    """Migrate ``uri`` while an old writer waits after its stamp check; return its late commit id."""
    data = _write(tmp_path, "late.jsonl", LATE_ROWS[mode][1])
    old_writer = pause_at("open.after_stamp", "omnigraph-v4", "load", "--mode", mode, "--data", str(data), uri)
    try:
        migrated = migrate("run", uri, "--owner", "sre", "--json")
        assert migrated.returncode == 0, migrated.describe()
    finally:
        returncode, _, stderr = old_writer.release("continue")
    assert returncode == 0, stderr  # the old binary never re-reads the stamp: it publishes
    head = Manifest(open_store(uri)).snapshot("main").head
    assert (head.writer_program, head.writer_format) == ("omnigraph-v4", "4")
    return head.commit_id


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_late_format4_append_refuses_writes_until_refenced(backend: str, tmp_path: Path) -> None:
    _caught_then_refenced(new_root(backend, tmp_path), tmp_path, "append")


def test_late_format4_overwrite_dropping_the_pk_is_caught_and_refenced(tmp_path: Path) -> None:
    """Local backend only: the S3 path is the same code, exercised by the append case."""
    _caught_then_refenced(new_root("local", tmp_path), tmp_path, "overwrite")


def _caught_then_refenced(uri: str, tmp_path: Path, mode: str) -> None:
    build_fixture(uri, compact=True)
    late = _late_format4_commit(uri, tmp_path, mode)
    store = open_store(uri)
    table_key, late_row = LATE_ROWS[mode]
    # An old append lands without the fence; an old overwrite also drops the table's PK.
    assert _pk_of(uri, table_key) == ([] if mode == "overwrite" else ["id"])

    other = _write(tmp_path, "other.jsonl", {"type": "Company", "data": {"name": "Initech"}})
    refused = invoke(OMNIGRAPH, "load", "--mode", "append", "--data", str(other), "--json", uri)
    assert refused.returncode == 6, refused.describe()
    error = refused.json()["error"]
    assert error["code"] == "format_refused" and late in error["message"]
    assert [c["commit_id"] for c in error["details"]["foreign_commits"]] == [late]
    branch = invoke(OMNIGRAPH, "branch", "create", "side", uri)
    assert branch.returncode == 6, branch.describe()
    assert invoke(OMNIGRAPH, "snapshot", uri).returncode == 0  # reads still work

    problems = readiness_problems(store, Manifest(store))
    assert any(late in p for p in problems), problems
    ready = GraphService(uri).readiness()
    assert ready["format"] == "5" and ready["writable"] is False and late in ready["reason"], ready
    verified = migrate("verify", uri, "--json")
    assert verified.returncode == 1, verified.describe()
    assert any(late in p for p in verified.json()["error"]["details"]["problems"])

    named = re.search(r"`(omnigraph-migrate refence [^`]+)`", error["message"])
    assert named is not None, error["message"]
    argv = shlex.split(named.group(1).replace("NAME", "oncall"))
    refenced = migrate(*argv[1:], "--json")
    assert refenced.returncode == 0, refenced.describe()
    assert migrate("verify", uri).returncode == 0
    assert readiness_problems(store, Manifest(store)) == []
    assert GraphService(uri).readiness()["writable"] is True

    assert _pk_of(uri, table_key) == ["id"]
    written = invoke(OMNIGRAPH, "load", "--mode", "append", "--data", str(other), uri)
    assert written.returncode == 0, written.describe()
    type_name = table_key.split(":", 1)[1]
    exported = [json.loads(line) for line in invoke(OMNIGRAPH, "export", "--type", type_name, uri).ok().stdout.splitlines()]
    ids = [row["data"]["id"] for row in exported]
    assert len(ids) == len(set(ids))
    assert any(late_row["data"].items() <= row["data"].items() for row in exported)  # the late row is kept
    if mode == "append":  # the old writer's keyed row is now fenced like any other
        again = invoke(OMNIGRAPH, "load", "--mode", "append", "--data", str(tmp_path / "late.jsonl"), "--json", uri)
        assert again.returncode == 1 and again.json()["error"]["code"] == "key_conflict"


def _pk_of(uri: str, table_key: str) -> list[str]:
    store = open_store(uri)
    entry = Manifest(store).snapshot("main").tables[table_key]
    return primary_key(open_dataset(store, entry.table_path, entry.table_branch, entry.table_version).schema)


def test_a_manifest_without_writer_columns_stays_readable_and_writable(tmp_path: Path) -> None:
    """Graphs whose ``__manifest`` predates the writer columns: writer unknown, never flagged."""
    uri = new_root("local", tmp_path)
    assert invoke(OMNIGRAPH, "init", "--schema", str(SCHEMA_PATH), uri).returncode == 0
    store = open_store(uri)
    current = Manifest(store).dataset()
    old_layout = current.to_table().drop_columns(["writer_program", "writer_format"])
    schema = old_layout.schema.with_metadata({FORMAT_KEY: "5"})
    lance.write_dataset(old_layout.cast(schema), store.dataset_uri(MANIFEST_DIR), schema=schema, mode="overwrite")
    assert "writer_program" not in Manifest(store).dataset().schema.names

    data = _write(tmp_path, "one.jsonl", {"type": "Company", "data": {"name": "Initech"}})
    assert invoke(OMNIGRAPH, "load", "--mode", "append", "--data", str(data), uri).returncode == 0
    head = Manifest(store).snapshot("main").head
    assert (head.message, head.writer_program, head.writer_format) == ("load --mode append", None, None)
    assert readiness_problems(store, Manifest(store)) == []
