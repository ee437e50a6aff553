"""The ``--ignore-fleet`` option and the fleet listing that ``preflight`` prints on stderr."""

from __future__ import annotations

from typing import Any

import click

from omnigraph.cli.support import say
from omnigraph.migrate import describe_fleet_entry

ignore_fleet_option = click.option(
    "--ignore-fleet",
    is_flag=True,
    help="Proceed even while the fleet registry lists a live writer (the registry is information, not a lock).",
)


def report_fleet(entries: list[dict[str, Any]]) -> None:
    """One stderr line per fleet record (advice for the operator, not the command's result)."""
    for entry in entries:
        say(f"fleet: {describe_fleet_entry(entry)}")
