"""Playbook steps are durable: a runner killed at any step leaves every step it reached on record.

The upgrade playbook runs as a real ``omnigraph-migrate`` process that a failpoint ends at each
step in turn: ``playbook.acting.<step>`` (the step is recorded, its action has not run) and
``playbook.finished.migrate``. The run's journal (``--journal ROOT``, ``ROOT/<run_id>/``) must
hold ``acting`` and ``finished`` records for every earlier step, the killed step's
``acting`` record, and nothing after it; once the migration exists its ledger holds every
finished step, those that ran before it existed included. Local backend: the journal is written
with the same create-if-absent store call as the ledger, which runs on both backends elsewhere.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from omnigraph.claims.claim import inspect
from omnigraph.engine.failpoints import FAILPOINT_EXIT_STATUS
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.store import open_store
from omnigraph.ledger.ledger import Ledger
from omnigraph.ledger.records import PlaybookStep
from omnigraph.migrator.layout import CLAIM_PATH, ledger_dir, migration_ids
from omnigraph.playbooks.journal import RunJournal
from tests.support.migration_fixtures import BIN, compact_copy

UPGRADE_STEPS = ["preflight", "prepare", "migrate", "verify", "smoke-test", "release"]


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    """A compact format-4 source graph per backend, built on first use."""
    return {}


def _killed_upgrade(uri: str, journal: Path, failpoint: str) -> None:
    killed = subprocess.run(
        [str(BIN / "omnigraph-migrate"), "playbook", "run", "upgrade", uri, "--yes", "--journal", str(journal)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMNIGRAPH_FAILPOINTS": failpoint},
    )
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.stderr


def _journal(root: Path) -> list[tuple[str, str, str | None]]:
    store = open_store(str(root))
    [run_id] = store.list("")
    return [(r.step, r.phase, r.status) for r in RunJournal(store, run_id).records()]


def _ledger_steps(uri: str) -> list[tuple[str, str]]:
    store = open_store(uri)
    ids = migration_ids(store)
    if not ids:
        return []
    [migration_id] = ids
    return [(r.step, r.status) for _, r in Ledger(store, ledger_dir(migration_id)).replay().records if isinstance(r, PlaybookStep)]


@pytest.mark.parametrize("step", UPGRADE_STEPS)
def test_runner_killed_before_each_step_acts(step: str, tmp_path: Path, sources: dict[str, str]) -> None:
    uri = compact_copy("local", tmp_path, sources)
    _killed_upgrade(uri, tmp_path / "journal", f"playbook.acting.{step}")
    done = UPGRADE_STEPS[: UPGRADE_STEPS.index(step)]
    expected = [entry for earlier in done for entry in ((earlier, "acting", None), (earlier, "finished", "ok"))]
    assert _journal(tmp_path / "journal") == [*expected, (step, "acting", None)]
    prepared, migrated = "prepare" in done, "migrate" in done
    assert _ledger_steps(uri) == ([(earlier, "ok") for earlier in done] if prepared else [])
    stamp = Manifest(open_store(uri)).read_stamp()[0]
    assert stamp == ("5" if migrated else "4")  # the killed step's action never ran
    held = inspect(open_store(uri), CLAIM_PATH)
    assert (held is not None) == (prepared and not migrated)  # prepare's online claim, until the cutover
    assert held is None or held.online


def test_runner_killed_after_the_migration_step_keeps_the_earlier_steps(tmp_path: Path, sources: dict[str, str]) -> None:
    uri = compact_copy("local", tmp_path, sources)
    _killed_upgrade(uri, tmp_path / "journal", "playbook.finished.migrate")
    assert _journal(tmp_path / "journal") == [
        ("preflight", "acting", None),
        ("preflight", "finished", "ok"),
        ("prepare", "acting", None),
        ("prepare", "finished", "ok"),
        ("migrate", "acting", None),
        ("migrate", "finished", "ok"),
    ]
    assert _ledger_steps(uri) == [("preflight", "ok"), ("prepare", "ok"), ("migrate", "ok")]
