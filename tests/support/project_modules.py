"""The project's modules as the installed distribution names them, found on disk without importing.

The distribution installs one import package, ``omnigraph``; its sub-packages ``engine``,
``migrator``, ``ledger``, ``claims`` and ``playbooks`` are links to the repository's top-level
folders of those names, so the walk follows links. Each module is named as it is imported
(``omnigraph.engine.storage.store``) and paired with its file.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "omnigraph"


def module_name(relative: Path) -> str:
    """The dotted name of the module whose file is ``relative`` (to the repository root)."""
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(*extra: str) -> dict[str, Path]:
    """Every module of the ``omnigraph`` package (links followed), plus those of the top-level
    folders ``extra`` (``examples``, say), by dotted name, in name order."""
    found: dict[str, Path] = {}
    for top in (PACKAGE, *extra):
        for directory, subdirectories, files in os.walk(ROOT / top, followlinks=True):
            subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = Path(directory) / name
                    found[module_name(path.relative_to(ROOT))] = path
    return dict(sorted(found.items()))


def package_files(package: str) -> list[tuple[str, Path]]:
    """``(module, file)`` for every module of ``package`` (a dotted name such as
    ``omnigraph.engine``), itself included, in name order."""
    return [(name, path) for name, path in project_modules().items() if name == package or name.startswith(package + ".")]
