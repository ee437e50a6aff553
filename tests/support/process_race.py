"""Start real processes so that they act at the same instant.

Protocol: each child prints ``ready`` on its first stdout line once its imports are done, then
reads a start instant (epoch seconds) from stdin and waits for it. :func:`release_together`
waits for every child's ``ready`` and sends them all the same instant, so no child gets a head
start from a slow interpreter start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from omnigraph.engine.failpoints import FAILPOINT_ENV, run_held

LAUNCHER = r"""
import sys, time
program = sys.argv[1]
if program == "omnigraph":
    from omnigraph.cli.omnigraph import cli
elif program == "omnigraph-v4":
    from omnigraph.cli.omnigraph_v4 import cli
else:
    from omnigraph.cli.migrate import cli
print("ready", flush=True)
start = float(sys.stdin.readline())
while time.time() < start:
    time.sleep(0.001)
cli.main(args=sys.argv[2:], prog_name=program)
"""


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def spawn(argv: list[str]) -> subprocess.Popen[str]:
    """Start a child that follows the ready/start protocol."""
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def release_together(procs: list[subprocess.Popen[str]], timeout: float = 240) -> list[Outcome]:
    """Wait until every child is ready, release them at one instant, collect their outcomes."""
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line == "ready", f"child did not get ready: {line!r} {proc.stderr.read() if proc.stderr else ''}"
    start = time.time() + 0.3
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{start}\n")
        proc.stdin.flush()
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        outcomes.append(Outcome(proc.returncode, out, err))
    return outcomes


def race(program: str, argv_list: list[list[str]], timeout: float = 240) -> list[Outcome]:
    """Run ``program`` (omnigraph, omnigraph-v4 or omnigraph-migrate) once per argv, together."""
    procs = [spawn([sys.executable, "-c", LAUNCHER, program, *argv]) for argv in argv_list]
    return release_together(procs, timeout)


def interleave_held(argv: list[str], failpoint: str, timeout: float = 180) -> tuple[Outcome, Outcome]:
    """Run ``argv`` twice as real processes in one fixed interleaving: A starts with
    ``failpoint:stop`` armed and is held there while B runs to the end; then A goes on.
    Returns the (A, B) outcomes."""
    clean = {key: value for key, value in os.environ.items() if key != FAILPOINT_ENV}
    held, other = run_held(
        argv,
        failpoint,
        lambda: subprocess.run(argv, env=clean, capture_output=True, text=True, timeout=timeout, check=False),
        env=clean,
        timeout=timeout,
    )
    return Outcome(held.returncode, held.stdout, held.stderr), Outcome(other.returncode, other.stdout, other.stderr)
