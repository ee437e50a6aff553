"""Compile the project's packages to bytecode before a benchmark measures any process.

With ``PYTHONDONTWRITEBYTECODE`` set, Python never writes the ``.pyc`` files it compiles, so a
measured process whose project modules were never compiled would spend part of its start-up
compiling them again, every run. ``make venv`` compiles the installed packages; this compiles the
project's own (the same step as ``make bytecode``), so start-up is measured as a user who ran the
README's commands sees it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cli", "engine", "claims", "ledger", "migrator", "playbooks", "server")


def compile_project() -> None:
    """Write the bytecode of every project package (``compileall``; quiet, fails loudly)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", *(str(ROOT / name) for name in PACKAGES)],
        check=True,
    )
