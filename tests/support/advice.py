"""Running the commands the tools print, exactly as printed.

Advice is a command in backticks (``next: `omnigraph-migrate resume G --token T` continues ...``)
or a bare command line (a playbook step's ``next``). :func:`commands_in` finds them,
:func:`run_printed` runs one as a real process of the named console script, with no failpoint
armed, and returns its result.
"""

from __future__ import annotations

import re
import shlex

from tests.support.graph_helpers import BIN, Cli, run_cli

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


def run_printed(command: str, timeout: float = 300) -> Cli:
    """Run ``command`` (a command line of a console script) as a real process."""
    argv = shlex.split(command)
    assert argv and argv[0] in PROGRAMS, command
    return run_cli(BIN / argv[0], *argv[1:], timeout=timeout)
