"""Which branches a token may write: its ``branch_scope``, and the tokens file's ``protected_branches``.

Spelled as upstream's server policy spells them. In the tokens file::

    protected_branches: [main, release-*]      # written only by a merge (the `merge` grant)
    tokens:
      - actor: feature-bot
        sha256: ...
        grants: [read, write, branch]
        branch_scope: [feature-*]               # or any (the default), protected, unprotected

A pattern is a branch name in which ``*`` stands for any run of characters. The rules, applied
by :meth:`Access.check_write` before anything is read or written:

- a write to a branch outside the token's scope (a load or mutate of it, creating or deleting it,
  a merge into it) is 403 ``branch_out_of_scope``; ``POST /schema/apply`` writes every branch, so
  it needs ``branch_scope: any``. Reads are governed by the grants alone;
- a protected branch takes no load or mutate, and is never deleted over HTTP (403
  ``branch_protected``); it changes only by a merge into it, which needs the ``merge`` grant
  (the route's own). Creating a branch with a protected name publishes content into it too, so it
  needs the ``merge`` grant as well as ``branch``. A schema change (``admin``) reaches every branch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Annotated, Literal

from pydantic import AfterValidator

from omnigraph.server.errors import BranchOutOfScope, BranchProtected

PATTERN = re.compile(r"[A-Za-z0-9*][A-Za-z0-9._*-]{0,99}")
ScopeKind = Literal["any", "protected", "unprotected"]
Operation = Literal["load", "mutate", "create", "delete", "merge"]


def _pattern(value: str) -> str:
    if not PATTERN.fullmatch(value):
        hint = f" (branch names have no '/': write {value.replace('/', '-')!r})" if "/" in value else ""
        raise ValueError(
            f"{value!r} can match no branch: a pattern is a branch name (letters, digits, '.', '_', '-') "
            f"in which '*' stands for any run of characters{hint}"
        )
    return value


BranchPattern = Annotated[str, AfterValidator(_pattern)]
"""A branch name in which ``*`` stands for any run of characters."""
BranchScope = ScopeKind | list[BranchPattern]
"""``any``, ``protected``, ``unprotected``, or the patterns of the branches a token may write."""


def matches(patterns: tuple[str, ...], branch: str) -> bool:
    """Whether ``branch`` matches one of ``patterns``."""
    return any(fnmatchcase(branch, pattern) for pattern in patterns)


@dataclass(frozen=True)
class Access:
    """A principal's branch scope and the server's protected branches (both empty: every branch, none protected)."""

    scope: ScopeKind | tuple[str, ...] = "any"
    protected: tuple[str, ...] = ()

    def in_scope(self, branch: str) -> bool:
        """Whether the scope covers ``branch``."""
        if isinstance(self.scope, tuple):
            return matches(self.scope, branch)
        if self.scope == "any":
            return True
        return matches(self.protected, branch) == (self.scope == "protected")

    def _shown_scope(self) -> str | list[str]:
        return list(self.scope) if isinstance(self.scope, tuple) else self.scope

    def check_every_branch(self, actor: str) -> None:
        """Refuse (403 ``branch_out_of_scope``) a write of every branch (a schema change) unless the scope is ``any``."""
        if self.scope != "any":
            raise BranchOutOfScope(
                f"actor {actor!r} may write only the branches of its branch_scope {self._shown_scope()}, and a schema change "
                "writes every branch: use a token whose entry has no branch_scope (or branch_scope: any)",
                {"actor": actor, "branch": None, "branch_scope": self._shown_scope()},
            )

    def check_write(self, actor: str, branch: str, operation: Operation, *, may_merge: bool) -> None:
        """Refuse (403) ``operation`` on ``branch`` by ``actor`` when the scope or the protection forbids it.

        ``may_merge``: the principal holds the ``merge`` grant.
        """
        scope = self._shown_scope()
        if not self.in_scope(branch):
            raise BranchOutOfScope(
                f"actor {actor!r} may not write branch {branch!r}: it is outside the token's branch_scope {scope} "
                "(use a token whose branch_scope covers it, or widen this token's entry and restart the server)",
                {"actor": actor, "branch": branch, "branch_scope": scope},
            )
        if not matches(self.protected, branch):
            return
        if operation in ("load", "mutate", "delete") or (operation == "create" and not may_merge):
            how = "merge a branch into it (`POST /branches/{src}/merge` with the merge grant)"
            if operation == "create":
                how = "create it with a token that also holds the merge grant"
            elif operation == "delete":
                how = "remove it from protected_branches in the tokens file and restart the server first"
            raise BranchProtected(
                f"branch {branch!r} is protected (protected_branches {list(self.protected)}): no {operation} of it; {how}",
                {"branch": branch, "operation": operation, "protected_branches": list(self.protected)},
            )
