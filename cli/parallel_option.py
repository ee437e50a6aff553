"""``--parallel N``: how many migration units ``run``, ``resume`` and ``refence`` keep in flight.

Light at import (no engine, Lance or migrator import): the bounds are repeated here and checked
against :mod:`migrator.unit_pool` by a test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])

MAX_PARALLEL = 64

_parallel_option = click.option(
    "--parallel",
    type=click.IntRange(1, MAX_PARALLEL),
    default=None,
    metavar="N",
    help="Units of distinct branches in flight at once (1 to 64) [default: 16 on an object store, 1 on local disk].",
)


def parallel_option(command: F) -> F:
    """Add ``--parallel`` (None when not given: the migrator picks the default for the store)."""
    return _parallel_option(command)  # type: ignore[return-value]
