"""``--executor`` and ``--ray-address``: where ``run``, ``resume`` and ``refence`` validate images.

Usage errors (exit 2, before anything is read or written): ``--ray-address`` without
``--executor ray``, an address that is not ``HOST:PORT`` or ``auto``, and ``--executor ray`` when Ray is not installed (the
message names the command that installs the ``[ray]`` extra).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from omnigraph.migrate import EXECUTORS, executor_unavailable, open_executor, ray_address_problem

if TYPE_CHECKING:
    from omnigraph.migrate import ImageExecutor

F = TypeVar("F", bound=Callable[..., Any])

_executor_option = click.option(
    "--executor",
    type=click.Choice(EXECUTORS),
    default="local",
    show_default=True,
    help="Where every pinned image is validated: in this process, or as tasks on a Ray cluster "
    "(needs the [ray] extra). Same records, results and exit codes either way.",
)
_ray_address_option = click.option(
    "--ray-address",
    metavar="ADDR",
    help="With --executor ray: the Ray cluster to use (HOST:PORT of its head, or `auto` for the one this "
    "machine joined). Without it a private local Ray instance is started and stopped.",
)


def executor_options(command: F) -> F:
    """Add ``--executor`` and ``--ray-address`` to ``command``."""
    return _executor_option(_ray_address_option(command))


def chosen_executor(executor: str, ray_address: str | None) -> AbstractContextManager[ImageExecutor]:
    """The executor the options name, as a context manager; a click usage error if they cannot run."""
    if ray_address is not None and executor != "ray":
        raise click.UsageError("--ray-address needs --executor ray")
    if ray_address is not None and (problem := ray_address_problem(ray_address)) is not None:
        raise click.BadParameter(problem, param_hint="--ray-address")
    missing = executor_unavailable(executor)
    if missing is not None:
        raise click.UsageError(missing)
    return open_executor(executor, ray_address)
