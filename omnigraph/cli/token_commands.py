"""``token create``: a new bearer token for ``omnigraph serve`` and its tokens-file entry."""

from __future__ import annotations

import json
from typing import cast

import click
from pydantic import ValidationError

from omnigraph.cli.support import echo_result, emit_json, json_option, reports_errors, say
from omnigraph.server.grants import Grant
from omnigraph.server.scopes import BranchScope, ScopeKind
from omnigraph.server.tokens import new_token


@click.group("token")
def token_group() -> None:
    """Bearer tokens for `omnigraph serve`."""


@token_group.command("create")
@click.option("--actor", required=True, help="The actor the token's commits record.")
@click.option(
    "--grant",
    "grants",
    multiple=True,
    required=True,
    type=click.Choice([g.value for g in Grant]),
    help="A grant of the token (repeatable).",
)
@click.option(
    "--branch-scope",
    "branch_scope",
    multiple=True,
    metavar="PATTERN",
    help="A branch the token may write, '*' for any run of characters (repeatable); or one of any (the default), "
    "protected, unprotected (the tokens file's protected_branches).",
)
@json_option
@reports_errors
def token_create(actor: str, grants: tuple[str, ...], branch_scope: tuple[str, ...], as_json: bool) -> None:
    """Print a new random token, once, and the entry that admits it (only its SHA-256 is kept)."""
    scope: BranchScope = list(branch_scope)
    if len(branch_scope) == 1 and branch_scope[0] in ("any", "protected", "unprotected"):
        scope = cast(ScopeKind, branch_scope[0])
    try:
        token, entry = new_token(actor, sorted({Grant(g) for g in grants}), scope or "any")
    except ValidationError as error:
        problem = error.errors()[-1]
        hint = "--branch-scope" if problem["loc"] and problem["loc"][0] == "branch_scope" else "--actor"
        raise click.BadParameter(problem["msg"].removeprefix("Value error, "), param_hint=hint) from error
    document = entry.model_dump(mode="json", exclude_defaults=True)
    if as_json:
        emit_json({"token": token, "entry": document})
        return
    echo_result(f"token: {token}")
    echo_result("tokens file entry (add it under `tokens:`):")
    echo_result(f"  - {json.dumps(document)}")
    say("the token is shown only this once: the server keeps only its SHA-256")
