"""Hold a real CLI process at a named failpoint, then let it continue or exit.

The child runs the console script's click command with ``OMNIGRAPH_FAILPOINTS=name``; its
``os._exit`` is replaced so that reaching the failpoint prints ``paused`` on stdout and waits for
one line on stdin: ``continue`` returns from the failpoint (the command goes on as if the
failpoint were not armed), ``exit`` ends the process with the failpoint status (86). Between the
two the process is alive, holding whatever it holds (a claim, an open graph).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

LAUNCHER = r"""
import os, sys
program = sys.argv[1]
if program == "omnigraph":
    from omnigraph.cli.omnigraph import cli
elif program == "omnigraph-v4":
    from omnigraph.cli.omnigraph_v4 import cli
else:
    from omnigraph.cli.migrate import cli
real_exit = os._exit
def hold(status):
    print("paused", flush=True)
    if sys.stdin.readline().strip() != "continue":
        real_exit(status)
os._exit = hold
cli.main(args=sys.argv[2:], prog_name=program)
"""


@dataclass
class PausedProcess:
    """A CLI process stopped at a failpoint (alive until released)."""

    process: subprocess.Popen[str]

    @property
    def pid(self) -> int:
        return self.process.pid

    def release(self, how: str, timeout: float = 180) -> tuple[int, str, str]:
        """Send ``continue`` or ``exit``; wait for the process; (returncode, stdout, stderr)."""
        out, err = self.process.communicate(f"{how}\n", timeout=timeout)
        return self.process.returncode, out, err


def pause_at(failpoint: str, program: str, *args: str, env: dict[str, str] | None = None, timeout: float = 180) -> PausedProcess:
    """Start ``program args`` and return once it is held at ``failpoint``."""
    full_env = {**os.environ, "OMNIGRAPH_FAILPOINTS": failpoint, **(env or {})}
    process = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, program, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if line != "paused":
        out, err = process.communicate(timeout=timeout)
        raise AssertionError(f"{program} {' '.join(args)} did not reach {failpoint}: {line!r}\n{out}\n{err}")
    return PausedProcess(process)
