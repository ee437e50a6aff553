"""``docs/python-api.md`` runs as written: every ```python block, in order, in one namespace, in an
empty directory (what a reader following the page would do), and the README links the page."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "python-api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[str]:
    """The source of every ```python block of a Markdown text, in order."""
    return BLOCK.findall(text)


def test_the_tutorial_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = python_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 10
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMNIGRAPH_ACTOR", "tutorial")
    namespace: dict[str, object] = {"__name__": "tutorial"}
    printed = io.StringIO()
    for number, block in enumerate(blocks, start=1):
        with contextlib.redirect_stdout(printed):
            exec(compile(block, f"{PAGE.name} block {number}", "exec"), namespace)
    output = printed.getvalue()
    # What the page says the blocks show: a fenced graph, one refused duplicate, a fast-forward
    # merge, the query's rows, a clean check, a refused read-only write, a finished migration.
    assert "key_conflict" in output
    assert "fast_forward" in output and "up_to_date" in output
    assert "read_only" in output
    assert "migrated 5" in output
    assert "{'p.name': 'Alice', 'p.age': 35}" in output
    assert "True" in output


def test_the_readme_links_the_tutorial() -> None:
    assert "docs/python-api.md" in (ROOT / "README.md").read_text(encoding="utf-8")
