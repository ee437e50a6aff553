"""``omnigraph-v4``: the previous release's CLI (format 4, unfenced writes)."""

from __future__ import annotations

import click

import omnigraph
from cli.serve_commands import add_serve_command
from cli.shared_commands import add_shared_commands


@click.group()
def cli() -> None:
    """omnigraph-v4: the format-4 writer (no key-conflict fencing)."""


add_shared_commands(cli, omnigraph.FORMAT_4_WRITER)
add_serve_command(cli, omnigraph.FORMAT_4_WRITER)


def main() -> None:
    cli()
