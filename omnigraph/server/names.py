"""The branch names a request may carry, checked at the HTTP boundary before any storage is touched.

A branch named in the path (``/branches/{branch}/...``, ``/branches/{name}``) or in a body
(``name`` and ``from`` of a create, ``into`` of a merge) must be one a branch can have
(:func:`omnigraph.graph.is_branch_name`); anything else (a NUL, a control character, ``..``, a
very long name) is 400 ``bad_request`` naming the rule, never a file system error.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from omnigraph.errors import BadRequest
from omnigraph.graph import is_branch_name

PATH_PARAMETERS = ("branch", "name")
RULE = "letters, digits, '.', '_' and '-', at most 100, starting with a letter or digit (no '..', not ending in '.' or '.lock')"
SHOWN = 100


def shown(name: str) -> str:
    """``name`` as an error may repeat it: at most :data:`SHOWN` characters."""
    return name if len(name) <= SHOWN else name[:SHOWN] + "..."


def problem(name: str) -> str | None:
    """Why ``name`` cannot be a branch name, or None when it can."""
    return None if is_branch_name(name) else f"invalid branch name {shown(name)!r}: a branch name is {RULE}"


def check_path(path_params: dict[str, str]) -> None:
    """Refuse (``bad_request``) a request whose path names a branch that cannot exist."""
    for parameter in PATH_PARAMETERS:
        name = path_params.get(parameter)
        if name is not None and (found := problem(name)) is not None:
            raise BadRequest(found, {"branch": shown(name)})


def _body_name(name: str) -> str:
    found = problem(name)
    if found is not None:
        raise ValueError(found)
    return name


BranchName = Annotated[str, AfterValidator(_body_name)]
"""A branch name in a request body (refused by validation, 400, when it cannot be one)."""
