"""The ``name:stop`` failpoint action and :func:`omnigraph.engine.failpoints.run_held`, on real processes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from omnigraph.engine.failpoints import run_held

CHILD = """
import os, sys
from omnigraph.engine.failpoints import failpoint
open(sys.argv[1], "w").write(str(os.getpid()))
print("before", flush=True)
failpoint("test.hold")
print("after")
"""


def _state(pid: int) -> str:
    """The process state letter from ``/proc`` (``T``: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_held_process_stays_stopped_while_the_other_work_runs_then_finishes(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    def during() -> str:
        return _state(int(pid_file.read_text()))

    held, state = run_held([sys.executable, "-c", CHILD, str(pid_file)], "test.hold", during)
    assert state == "T"
    assert (held.returncode, held.stdout) == (0, "before\nafter\n"), held.stderr
    assert "failpoint test.hold: stopped until SIGCONT" in held.stderr


def test_a_process_that_ends_before_its_failpoint_is_an_error_and_nothing_runs() -> None:
    ran: list[bool] = []
    with pytest.raises(ChildProcessError, match="before reaching its stop failpoint"):
        run_held([sys.executable, "-c", "pass"], "test.hold", lambda: ran.append(True))
    assert ran == []
