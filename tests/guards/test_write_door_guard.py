"""Source-walk guard: keyed-table writes happen only in the fenced door and the legacy writer.

Outside ``engine/door/table_store.py`` (the door) and ``engine/door/legacy.py`` (the format-4
emulation) no module may call ``write_dataset(..., mode="append")``, ``execute_uncommitted``,
``use_index(True)``, ``merge_insert`` (every merge goes through the door, which merges ON exactly
the table's primary key), ``LanceOperation.Append`` or ``write_fragments``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ["engine", "claims", "ledger", "migrator", "playbooks", "bench", "omnigraph/server"]
ALLOWED = {Path("engine/door/table_store.py"), Path("engine/door/legacy.py")}


def forbidden_calls(source: str) -> list[tuple[int, str]]:
    """(line, what) for every forbidden keyed-write call in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "Append":
            found.append((node.lineno, "LanceOperation.Append"))
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("execute_uncommitted", "execute_uncommitted_batches", "write_fragments", "merge_insert"):
            found.append((node.lineno, name))
        if name == "use_index" and any(isinstance(a, ast.Constant) and a.value is True for a in node.args):
            found.append((node.lineno, "use_index(True)"))
        if name == "write_dataset":
            modes = [kw.value for kw in node.keywords if kw.arg == "mode"] + node.args[3:4]
            if any(isinstance(m, ast.Constant) and m.value == "append" for m in modes):
                found.append((node.lineno, 'write_dataset(mode="append")'))
    return found


def _project_files() -> list[Path]:
    files = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel in ALLOWED:
                continue
            files.append(rel)
    return files


def test_no_forbidden_keyed_writes_outside_the_door() -> None:
    files = _project_files()
    assert Path("engine/manifest/manifest.py") in files  # the walk really covers the engine
    violations = [f"{rel}:{line}: {what}" for rel in files for line, what in forbidden_calls((ROOT / rel).read_text(encoding="utf-8"))]
    assert violations == []


@pytest.mark.parametrize(
    "snippet, expected",
    [
        ('lance.write_dataset(t, uri, mode="append")', 'write_dataset(mode="append")'),
        ('write_dataset(t, uri, None, "append")', 'write_dataset(mode="append")'),
        ("ds.merge_insert('id').execute_uncommitted(t)", "execute_uncommitted"),
        ("ds.merge_insert('v').when_not_matched_insert_all().execute(t)", "merge_insert"),
        ("b.use_index(True)", "use_index(True)"),
        ("lance.LanceOperation.Append(frags)", "LanceOperation.Append"),
        ("lance.fragment.write_fragments(t, uri)", "write_fragments"),
    ],
)
def test_guard_catches_each_forbidden_call(snippet: str, expected: str) -> None:
    assert expected in [what for _, what in forbidden_calls(snippet)]


def test_guard_accepts_reads_and_overwrites() -> None:
    source = 'lance.write_dataset(t, uri, mode="overwrite")\nds.to_table()\nb.use_index(False)\n'
    assert forbidden_calls(source) == []


def test_the_door_itself_uses_the_fenced_route() -> None:
    door = (ROOT / "engine/door/table_store.py").read_text(encoding="utf-8")
    assert ".use_index(False)" in door and ".conflict_retries(0)" in door
    assert {what for _, what in forbidden_calls(door)} == {"merge_insert"}
