"""Every ``omnigraph check`` finding says what resolves it, and the command it names is run as printed.

* Every kind the check (and the migrator's claim findings) can report has a fix text in
  :data:`omnigraph.engine.maintenance.fixes.FIXES`, and ``docs/operations.md`` section 11 lists
  every kind.
* After ``abort`` (a migration killed after a unit installed its primary key), ``check`` reports
  ``table_head_ahead`` naming ``omnigraph recover``, which is run exactly as printed: the check is
  clean again.
* A staging copy whose source root was moved away: one ``source_missing`` finding naming the
  source (not ``internal``, nor a damaged manifest), at stamp 4 and after the copy's migration.
"""

from __future__ import annotations

import re
from pathlib import Path

import omnigraph
import omnigraph.migrate
from omnigraph.engine.failpoints import FAILPOINT_EXIT_STATUS
from omnigraph.engine.maintenance.fixes import FIXES
from tests.support.advice import first_command, run_printed
from tests.support.check_helpers import assert_check_clean
from tests.support.graph_helpers import OMNIGRAPH, invoke
from tests.support.migration_cli import claim_token, migrate
from tests.support.migration_fixtures import build_fixture

ROOT = Path(__file__).resolve().parents[2]
REPORTERS = ("engine/maintenance/check.py", "migrator/status.py")


def _reported_kinds() -> set[str]:
    kinds: set[str] = set()
    for path in REPORTERS:
        source = (ROOT / path).read_text(encoding="utf-8")
        kinds |= set(re.findall(r'\.add\(\s*"([a-z_]+)"', source)) | set(re.findall(r'kind="([a-z_]+)"', source))
    return kinds


def _findings(uri: str) -> list[dict]:
    result = invoke(OMNIGRAPH, "check", "--json", uri)
    assert result.returncode == 4, result.describe()
    return list(result.json()["error"]["details"]["findings"])


def test_every_finding_kind_has_a_fix_and_is_documented() -> None:
    kinds = _reported_kinds()
    assert {"table_head_ahead", "claim_held", "migration_in_progress", "source_missing"} <= kinds
    assert kinds <= set(FIXES), sorted(kinds - set(FIXES))
    assert all(fix.words("/g").strip() for fix in FIXES.values())
    section = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8").split("## 11.", 1)[1].split("\n## ", 1)[0]
    assert [kind for kind in sorted(FIXES) if f"`{kind}`" not in section] == []


def test_table_head_ahead_after_abort_names_recover_which_resolves_it(tmp_path: Path) -> None:
    uri = str(tmp_path / "legacy")
    build_fixture(uri, compact=True)
    assert migrate("run", uri, "--owner", "sre", failpoint="unit.after_pk").returncode == FAILPOINT_EXIT_STATUS
    assert migrate("abort", uri, "--token", claim_token(uri)).returncode == 0
    [finding] = _findings(uri)
    assert finding["kind"] == "table_head_ahead"
    command = finding["details"]["next"]
    assert command == first_command(finding["message"]) == f"omnigraph recover {uri}"
    run_printed(command).ok()
    assert_check_clean(uri)


def test_a_copy_whose_source_is_gone_is_one_finding_naming_the_source(tmp_path: Path) -> None:
    source, copy = str(tmp_path / "source"), str(tmp_path / "copy")
    build_fixture(source, compact=True)
    omnigraph.migrate.copy(source, copy)
    moved = tmp_path / "moved"
    for stamp in ("4", "5"):
        Path(source).rename(moved)
        [finding] = _findings(copy)
        assert finding["kind"] == "source_missing" and finding["details"]["source"] == source, finding
        assert finding["message"].startswith(f"{source}, the root this graph was copied from, cannot be read")
        assert omnigraph.check(copy).stamp == stamp
        moved.rename(source)
        if stamp == "4":
            omnigraph.migrate.run(copy, owner="staging")
    assert_check_clean(copy)
