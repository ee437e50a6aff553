"""``omnigraph-v4``: the previous release's CLI (format 4, unfenced writes).

Every subcommand is imported only when it is invoked (:class:`omnigraph.cli.lazy.LazyGroup`).
"""

from __future__ import annotations

from typing import NoReturn

import click

import omnigraph
from omnigraph.cli.console import run_script
from omnigraph.cli.lazy import LazyGroup
from omnigraph.cli.shared_commands import shared_lazy_commands

COMMANDS = shared_lazy_commands(omnigraph.FORMAT_4_WRITER)
"""The lazy subcommands: where each is built and the one-line help ``omnigraph-v4 --help`` lists."""


@click.group(cls=LazyGroup, lazy_commands=COMMANDS)
def cli() -> None:
    """omnigraph-v4: the format-4 writer (no key-conflict fencing)."""


def main() -> NoReturn:
    """The ``omnigraph-v4`` console script: :func:`omnigraph.cli.console.run_script` of :data:`cli`."""
    run_script(cli)
