"""Compile the project's own modules to bytecode (``make bytecode`` runs this; so does every bench).

With ``PYTHONDONTWRITEBYTECODE`` set, Python never writes the ``.pyc`` files it compiles, so a
process whose project modules were never compiled compiles them again at every start: the tests
start hundreds of processes, and a benchmark would measure that compilation in every run.
``make venv`` compiles the installed packages; this compiles the packages ``pyproject.toml``
ships, plus ``examples`` and ``tests``. Usage: ``.venv/bin/python bench/bytecode.py``.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRA = ("examples", "tests")


def project_packages() -> list[Path]:
    """The folders of the packages ``pyproject.toml`` ships (its setuptools ``include`` patterns),
    each folder a package links in (``omnigraph/engine -> ../engine``: ``compileall`` does not
    follow links, and their modules are compiled where they are), then :data:`EXTRA`."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        include = tomllib.load(handle)["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = [ROOT / pattern.rstrip("*") for pattern in include]
    linked = sorted(entry.resolve() for package in packages for entry in package.iterdir() if entry.is_symlink() and entry.is_dir())
    return [*packages, *linked, *(ROOT / name for name in EXTRA)]


def compile_project() -> None:
    """Write the bytecode of every project package (``compileall``; quiet, fails loudly)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", *map(str, project_packages())],
        check=True,
    )


if __name__ == "__main__":
    compile_project()
