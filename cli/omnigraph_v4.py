"""``omnigraph-v4``: the previous release's CLI (format 4, unfenced writes)."""

from __future__ import annotations

import click

from cli.serve_commands import add_serve_command
from cli.shared_commands import add_shared_commands
from engine.door import LEGACY_PROFILE


@click.group()
def cli() -> None:
    """omnigraph-v4: the format-4 writer (no key-conflict fencing)."""


add_shared_commands(cli, LEGACY_PROFILE)
add_serve_command(cli, LEGACY_PROFILE)


def main() -> None:
    cli()
