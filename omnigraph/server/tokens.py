"""The tokens file: who may call the server, identified by the SHA-256 of a bearer token.

The file is YAML or JSON (YAML parses both) and holds, per token, an actor name, the hex SHA-256
of the token, its grants and optionally its ``branch_scope``; never the token itself. Optionally,
the branches that only a merge may write (:mod:`omnigraph.server.scopes`)::

    protected_branches: [main]
    tokens:
      - actor: loader-ci
        sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
        grants: [read, write]
        branch_scope: [staging-*]

:func:`new_token` makes a token and its entry (``omnigraph token create``). :class:`TokenTable`
checks a presented token against every entry in constant time: the time taken does not depend on
which entry matched, or on how much of a hash an attacker guessed.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator, model_validator

from omnigraph.errors import BadRequest
from omnigraph.server.grants import Grant, Principal
from omnigraph.server.scopes import Access, BranchPattern, BranchScope

TOKEN_PREFIX = "og_"
ACTOR_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127}$"
Actor = Annotated[str, StringConstraints(pattern=ACTOR_PATTERN)]
MAX_FILE_BYTES = 4 * 1024 * 1024


class TokenEntry(BaseModel):
    """One token: the actor its commits record, the hex SHA-256 of the token, its grants, the branches it may write.

    The grants are sorted, each once. ``branch_scope`` is ``any`` (the default), ``protected``,
    ``unprotected`` or a list of branch patterns (:mod:`omnigraph.server.scopes`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    actor: Actor
    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    grants: list[Grant] = Field(min_length=1)
    branch_scope: BranchScope = "any"

    @field_validator("grants")
    @classmethod
    def _grants_once(cls, grants: list[Grant]) -> list[Grant]:
        if len(set(grants)) != len(grants):
            raise ValueError("a grant is listed twice")
        return sorted(grants)

    @field_validator("branch_scope")
    @classmethod
    def _some_branch(cls, scope: BranchScope) -> BranchScope:
        if isinstance(scope, list) and not scope:
            raise ValueError("an empty branch_scope lets the token write no branch: list patterns, or leave branch_scope out for any")
        return sorted(set(scope)) if isinstance(scope, list) else scope


class TokensFile(BaseModel):
    """The whole file: the protected branches (patterns), at least one token, no hash twice."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    protected_branches: list[BranchPattern] = Field(default_factory=list)
    tokens: list[TokenEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _scopes_need_protection(self) -> TokensFile:
        for index, entry in enumerate(self.tokens):
            if entry.branch_scope in ("protected", "unprotected") and not self.protected_branches:
                raise ValueError(
                    f"tokens.{index}.branch_scope is {entry.branch_scope!r} but the file lists no protected_branches: "
                    "add protected_branches: [PATTERN, ...] at the top of the file, or give the token a list of patterns"
                )
        return self

    @field_validator("tokens")
    @classmethod
    def _hashes_once(cls, tokens: list[TokenEntry]) -> list[TokenEntry]:
        hashes = [entry.sha256 for entry in tokens]
        if len(set(hashes)) != len(hashes):
            raise ValueError("a sha256 is listed twice")
        return tokens


def token_hash(token: str) -> str:
    """The hex SHA-256 of ``token`` (UTF-8), as the tokens file stores it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token(actor: str, grants: list[Grant], branch_scope: BranchScope = "any") -> tuple[str, TokenEntry]:
    """A fresh random token (256 bits) and the entry that admits it; the token is not kept anywhere."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, TokenEntry(actor=actor, sha256=token_hash(token), grants=grants, branch_scope=branch_scope)


def read_tokens_file(path: str | Path) -> TokensFile:
    """The validated tokens file at ``path``; ``bad_request`` naming the file and every problem."""
    where = Path(path)
    try:
        raw = where.read_bytes()
    except OSError as error:
        raise BadRequest(f"cannot read the tokens file {where}: {error.strerror or error}", {"path": str(where)}) from error
    if len(raw) > MAX_FILE_BYTES:
        raise BadRequest(f"the tokens file {where} is larger than {MAX_FILE_BYTES} bytes", {"path": str(where)})
    try:
        document = yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as error:
        raise BadRequest(f"the tokens file {where} is not YAML or JSON: {error}", {"path": str(where)}) from error
    try:
        return TokensFile.model_validate(document)
    except ValidationError as error:
        problems = [f"{'.'.join(str(p) for p in item['loc']) or '(file)'}: {item['msg']}" for item in error.errors()]
        raise BadRequest(
            f"the tokens file {where} is invalid: {'; '.join(problems)} "
            "(the file is {protected_branches (optional), tokens}; each entry is {actor, sha256, grants, branch_scope (optional)}; "
            "`omnigraph token create` prints one)",
            {"path": str(where), "errors": problems},
        ) from error


class TokenTable:
    """The tokens of one file, ready to authenticate requests."""

    def __init__(self, document: TokensFile) -> None:
        self._entries = [(bytes.fromhex(entry.sha256), entry) for entry in document.tokens]
        self._protected = tuple(document.protected_branches)

    def authenticate(self, token: str) -> Principal | None:
        """The principal of ``token``, or None.

        Every entry is compared (no early exit), each in constant time, so timing reveals neither a
        partial match nor which entry matched.
        """
        presented = hashlib.sha256(token.encode("utf-8")).digest()
        found: TokenEntry | None = None
        for digest, entry in self._entries:
            if hmac.compare_digest(presented, digest):
                found = entry
        if found is None:
            return None
        scope = tuple(found.branch_scope) if isinstance(found.branch_scope, list) else found.branch_scope
        return Principal(found.actor, frozenset(found.grants), authenticated=True, access=Access(scope, self._protected))
