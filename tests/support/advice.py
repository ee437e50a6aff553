"""Running the commands the tools print, exactly as printed.

Advice is a command in backticks (``next: `omnigraph-migrate resume G --token T` continues ...``)
or a bare command line (a playbook step's ``next``). :func:`commands_in` finds them,
:func:`run_printed` runs one as a real process of the named console script, with no failpoint
armed, and returns its result.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

from tests.support.graph_helpers import ACTOR, BIN, Cli

PROGRAMS = ("omnigraph-migrate", "omnigraph-v4", "omnigraph")
_QUOTED = re.compile(r"`([^`]+)`")


def commands_in(text: str) -> list[str]:
    """Every backticked command of one of the console scripts in ``text``, in order."""
    return [quoted for quoted in _QUOTED.findall(text) if quoted.split(" ", 1)[0] in PROGRAMS]


def first_command(text: str) -> str:
    """The first command ``text`` names (the test fails if it names none)."""
    found = commands_in(text)
    assert found, f"no command in {text!r}"
    return found[0]


def run_printed(command: str, cwd: Path | None = None, timeout: float = 300) -> Cli:
    """Run ``command`` (a command line of a console script) as a real process in ``cwd``, its stdin
    not a terminal (as in CI), no failpoint armed."""
    argv = shlex.split(command)
    assert argv and argv[0] in PROGRAMS, command
    env = {key: value for key, value in os.environ.items() if key != "OMNIGRAPH_FAILPOINTS"}
    env["OMNIGRAPH_ACTOR"] = ACTOR
    done = subprocess.run(
        [str(BIN / argv[0]), *argv[1:]],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    return Cli(tuple(argv), done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"), done.stdout)
