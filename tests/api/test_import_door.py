"""``omnigraph`` is the one door to the engine: no module under ``cli/`` or ``server/`` imports
``engine`` (only ``omnigraph``, and the migrator's own packages for ``omnigraph-migrate``), and
neither ``engine/`` nor ``migrator/`` imports ``omnigraph``. ``omnigraph.migrate`` is the one door
into the migrator: no module of the CLI or the playbooks imports ``omnigraph.migrator`` (a type
named only for annotations included). Every import counts, wherever it is
(a lazy import inside a function is still a dependency). And ``import omnigraph`` loads none of
Lance, Arrow or DuckDB (the console scripts start without them); the graph machinery loads Lance
and Arrow, and DuckDB waits for the first read query or branch merge.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.guards.test_import_layout import MODULES, imported_modules, imported_modules_of

HEAVY = ("lance", "pyarrow", "duckdb")


INTERNAL = tuple(f"omnigraph.{p}" for p in ("engine", "migrator", "ledger", "claims", "playbooks", "cli", "server"))
FACE = "omnigraph (the face)"
"""The modules of ``omnigraph`` outside its internal sub-packages: the Python API."""


def _inside(module: str, package: str) -> bool:
    if package == FACE:
        return _inside(module, "omnigraph") and not any(_inside(module, internal) for internal in INTERNAL)
    return module == package or module.startswith(package + ".")


def _violations(importers: tuple[str, ...], forbidden: str) -> list[str]:
    return [
        f"{module} imports {target}"
        for module in sorted(MODULES)
        if any(_inside(module, top) for top in importers)
        for target in sorted(imported_modules(module, module_level=False))
        if _inside(target, forbidden)
    ]


def test_the_walk_sees_both_sides() -> None:
    assert {"omnigraph.cli.omnigraph", "omnigraph.server.service", "omnigraph", "omnigraph.graph", "omnigraph.migrator.run"} <= set(MODULES)
    assert "omnigraph" in imported_modules("omnigraph.server.service", module_level=False)


def test_cli_and_server_import_no_engine_module() -> None:
    assert _violations(("omnigraph.cli", "omnigraph.server"), "omnigraph.engine") == []


def test_the_cli_and_the_playbooks_reach_the_migrator_only_through_omnigraph_migrate() -> None:
    assert _violations(("omnigraph.cli", "omnigraph.playbooks"), "omnigraph.migrator") == []
    assert "omnigraph.migrate" in imported_modules("omnigraph.cli.migrate_commands", module_level=False)
    assert "omnigraph.migrate" in imported_modules("omnigraph.playbooks.actions", module_level=False)


def test_the_migrate_door_guard_sees_a_function_level_import(tmp_path: Path) -> None:
    """The walk counts an import inside a function, as a lazy import of the migrator would be."""
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from omnigraph.migrator.run import run_migration\n")
    assert "omnigraph.migrator.run" in imported_modules_of(sample, module_level=False)


def test_engine_and_migrator_never_import_omnigraph() -> None:
    assert _violations(("omnigraph.engine", "omnigraph.migrator"), FACE) == []


def _loaded_after(statement: str) -> list[str]:
    probe = f"import sys; {statement}; print(__import__('json').dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return list(json.loads(completed.stdout))


def test_import_omnigraph_and_the_cli_load_no_lance_arrow_or_duckdb() -> None:
    assert _loaded_after("import omnigraph, omnigraph.errors, omnigraph.results") == []
    assert _loaded_after("import omnigraph.cli.omnigraph") == []
    assert _loaded_after("import omnigraph; omnigraph.Graph") == ["lance", "pyarrow"]  # DuckDB: at the first query or merge
