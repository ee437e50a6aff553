"""``--parallel N``: how many migration units ``run``, ``resume`` and ``refence`` keep in flight.

Light at import: :mod:`omnigraph.migrate`, which names the bounds and defaults, imports no Lance or
Arrow module until a migration runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from omnigraph.migrate import DEFAULT_PARALLEL_LOCAL, DEFAULT_PARALLEL_OBJECT_STORE, MAX_PARALLEL

F = TypeVar("F", bound=Callable[..., object])

_parallel_option = click.option(
    "--parallel",
    type=click.IntRange(1, MAX_PARALLEL),
    default=None,
    metavar="N",
    help=f"Units of distinct branches in flight at once (1 to {MAX_PARALLEL}) [default: "
    f"{DEFAULT_PARALLEL_OBJECT_STORE} on an object store, {DEFAULT_PARALLEL_LOCAL} on local disk].",
)


def parallel_option(command: F) -> F:
    """Add ``--parallel`` (None when not given: the migrator picks the default for the store)."""
    return _parallel_option(command)
