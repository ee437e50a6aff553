"""``--queries F.gq`` and ``--query-params P.json``: the upgrade's answer check.

``run`` and ``resume`` record every read query's answer on every live branch before the first
PK effect and take them again before the stamp; ``verify`` takes the recorded ones again on
demand (see :class:`omnigraph.migrate.AnswerQueries`). Usage errors (exit 2, before anything is read or written):
``--query-params`` without ``--queries``, and files that are not a ``.gq`` source with a read
query or a JSON object of params objects.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from omnigraph.migrate import AnswerQueries

F = TypeVar("F", bound=Callable[..., Any])

_PATH = click.Path(dir_okay=False, path_type=Path)
queries_option = click.option(
    "--queries",
    "queries_path",
    type=_PATH,
    metavar="F.gq",
    help="Read queries whose answers must not change: answered on every live branch before the first "
    "primary key and again before the stamp (any difference refuses the stamp: answers_changed, exit 4).",
)
query_params_option = click.option(
    "--query-params",
    "query_params_path",
    type=_PATH,
    metavar="P.json",
    help="With --queries: a JSON object mapping a query name to its params object.",
)


def answer_check_options(command: F) -> F:
    """Add ``--queries`` and ``--query-params`` to ``command``."""
    return queries_option(query_params_option(command))


def chosen_queries(queries_path: Path | None, query_params_path: Path | None) -> AnswerQueries | None:
    """The answer check the options name (None without ``--queries``).

    ``--query-params`` without ``--queries`` is a usage error (exit 2); files that cannot be
    read or used are ``bad_request`` (exit 1), as every file a command reads.
    """
    if queries_path is None:
        if query_params_path is not None:
            raise click.UsageError("--query-params needs --queries")
        return None
    from omnigraph.migrate import AnswerQueries

    return AnswerQueries.from_files(queries_path, query_params_path)
