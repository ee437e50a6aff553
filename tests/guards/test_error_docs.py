"""``docs/errors.md`` lists every error code the project can raise, with its real HTTP status and exit
code, and the README and ``docs/serving.md`` point to it.

The codes come from the source: every class under the project's packages that sets ``code = "..."``
is found with :mod:`ast`, then imported, so its ``http_status`` and ``exit_code`` (inherited or
not) are the ones the CLIs and the server use.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from omnigraph.engine.errors import OmnigraphError
from tests.support.project_modules import package_files

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = tuple(f"omnigraph.{p}" for p in ("engine", "claims", "ledger", "migrator", "playbooks", "server", "cli"))
ROW = re.compile(r"^\| `([a-z_]+)` \| (\d{3}) \| (\d) \|", re.MULTILINE)


def _error_classes() -> dict[str, type[OmnigraphError]]:
    found: dict[str, type[OmnigraphError]] = {}
    for package in PACKAGES:
        for module, path in package_files(package):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                if not isinstance(node, ast.ClassDef):
                    continue
                for statement in node.body:
                    if (
                        isinstance(statement, ast.Assign)
                        and [t.id for t in statement.targets if isinstance(t, ast.Name)] == ["code"]
                        and isinstance(statement.value, ast.Constant)
                    ):
                        cls = getattr(importlib.import_module(module), node.name)
                        assert issubclass(cls, OmnigraphError), f"{module}.{node.name}"
                        found[cls.code] = cls
    return found


def test_every_error_code_is_documented_with_its_status_and_exit_code() -> None:
    documented = {code: (int(status), int(exit_code)) for code, status, exit_code in ROW.findall((ROOT / "docs" / "errors.md").read_text())}
    classes = _error_classes()
    assert len(classes) >= 20
    actual = {code: (cls.http_status, cls.exit_code) for code, cls in classes.items()}
    assert documented == actual


def test_the_readme_and_the_serving_guide_cite_the_errors_page_not_a_missing_file() -> None:
    for name in ("README.md", "docs/serving.md", "docs/operations.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert "REFERENCE.md" not in text, name
    assert "docs/errors.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "errors.md" in (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
