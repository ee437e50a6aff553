"""Shared CLI plumbing: error reporting, exit codes and output channels.

Contract: the result a command was asked for goes to stdout, as a human rendering
(:func:`echo_result`) or, with ``--json``, exactly one JSON document (:func:`emit_json`; on failure
``{"error": {code, message, details}}``). Progress bars, warnings, advice and error text go to
stderr (:func:`say`), so ``omnigraph-migrate plan GRAPH | less`` shows the plan and nothing else.
Exit codes: 0 ok, 1 error, 2 usage, 3 claim/barrier held, 4 validation failed, 5 recovery
required, 6 format refused.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import click

import omnigraph
from omnigraph.errors import ClaimHeld, Internal, OmnigraphError, exit_code_for

P = ParamSpec("P")
R = TypeVar("R")

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")


def emit_json(document: Any, *, sort_keys: bool = True) -> None:
    """Print ``document`` as indented JSON on stdout, every mapping's keys sorted unless ``sort_keys`` is False."""
    click.echo(json.dumps(document, sort_keys=sort_keys, indent=2, ensure_ascii=False))


def echo_result(line: str) -> None:
    """One line of a command's human-readable result: stdout."""
    click.echo(line)


def say(message: str) -> None:
    """Progress, warnings, advice and error text: stderr."""
    click.echo(message, err=True)


def reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn errors into the CLI contract: a message (or JSON error), and the error's exit code."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        as_json = bool(kwargs.get("as_json"))
        try:
            outcome = command(*args, **kwargs)
            sys.stdout.flush()
            return outcome
        except BrokenPipeError:
            # The reader of stdout went away (`plan | head`): stop quietly, as Unix tools do.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        except OmnigraphError as error:
            _report(error, as_json)
            sys.exit(exit_code_for(error))
        except click.ClickException:
            raise
        except Exception as error:
            if os.environ.get("OMNIGRAPH_DEBUG"):
                traceback.print_exc()
            internal = Internal(f"{type(error).__name__}: {error}")
            _report(internal, as_json)
            sys.exit(exit_code_for(internal))

    return wrapper


def _report(error: OmnigraphError, as_json: bool) -> None:
    """The error on stderr (and as JSON on stdout with ``--json``).

    An error listing several bad input lines (``details.error_count`` and ``details.errors``)
    prints each of them on a line of its own.
    """
    if as_json:
        emit_json(error.to_json())
    say(f"error [{error.code}]: {error.message}")
    if "error_count" in error.details:
        for listed in error.details.get("errors", ()):
            say(f"  {listed['message']}")


def open_for_command(uri: str, *, read_only: bool = False, program: str = omnigraph.ENGINE) -> omnigraph.Graph:
    """The graph a command acts on: opened now, with the stamp and the claim checked at the open only.

    A command opens, acts once and exits, as a one-shot program always has. A read-write open
    refused because a migration claim is held (``claim_held``, exit 3) names the command that
    releases the claim, with its token, as ``omnigraph-migrate status`` prints it.
    """
    try:
        return omnigraph.open(uri, read_only=read_only, program=program, stamp_checks="at_open")
    except ClaimHeld:
        from omnigraph.migrate import claim_refusal

        explained = claim_refusal(uri, program)
        if explained is None:
            raise  # the claim was released meanwhile: the refusal as it was met
        raise explained from None


def say_recovered(graph: omnigraph.Graph) -> None:
    """One stderr line per interrupted commit the graph's read-write open resolved."""
    for record in graph.recovered:
        say(f"recovered interrupted commit {record.operation_id} on {record.graph_branch}: {record.outcome}")


def actor_name() -> str:
    """Who is writing: ``OMNIGRAPH_ACTOR`` or the login name."""
    return omnigraph.default_actor()
