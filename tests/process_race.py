"""Run N real CLI processes that start their command at the same instant."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

LAUNCHER = r"""
import sys, time
start = float(sys.argv[1])
program = sys.argv[2]
if program == "omnigraph":
    from engine.cli import cli
elif program == "omnigraph-v4":
    from engine.legacy.cli import cli
else:
    from migrator.cli import cli
while time.time() < start:
    time.sleep(0.002)
cli.main(args=sys.argv[3:], prog_name=program)
"""


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def race(program: str, argv_list: list[list[str]], lead_seconds: float = 2.0, timeout: float = 240) -> list[Outcome]:
    """Start one process per argv (imports done), release them together, collect outcomes."""
    start = time.time() + lead_seconds + 0.25 * len(argv_list) / 4
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, str(start), program, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argv_list
    ]
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        outcomes.append(Outcome(proc.returncode, out, err))
    return outcomes
