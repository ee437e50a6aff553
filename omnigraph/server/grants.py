"""What a caller may do: the grants a token carries, and the principal a request acts as."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from omnigraph.server.scopes import Access, Operation


class Grant(StrEnum):
    """One permission of a token. An endpoint needs exactly one (``omnigraph.server.access``)."""

    READ = "read"  # branches, snapshots, commits, /metrics
    EXPORT = "export"  # the export stream (every row of a branch)
    WRITE = "write"  # load, mutate
    BRANCH = "branch"  # create and delete branches
    MERGE = "merge"  # merge one branch into another
    ADMIN = "admin"  # schema changes (POST /schema/apply)
    IMPERSONATE = "impersonate"  # record another actor with X-Omnigraph-Actor

    @property
    def writes(self) -> bool:
        """True for the grants of routes that may publish commits (``read`` and ``export`` routes only read)."""
        return self not in (Grant.READ, Grant.EXPORT, Grant.IMPERSONATE)


ALL_GRANTS: frozenset[Grant] = frozenset(Grant)
UNAUTHENTICATED_ACTOR = "http"


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: ``actor`` is what commits record.

    ``authenticated`` is False only on a server started ``--unauthenticated``, where every request
    holds every grant. ``access`` is its token's branch scope and the protected branches.
    """

    actor: str
    grants: frozenset[Grant]
    authenticated: bool
    access: Access = field(default_factory=Access)

    def may(self, grant: Grant) -> bool:
        """True if the principal holds ``grant``."""
        return grant in self.grants

    def check_write(self, branch: str, operation: Operation) -> None:
        """Refuse (403 ``branch_out_of_scope`` or ``branch_protected``) a write its scope or a protection forbids."""
        self.access.check_write(self.actor, branch, operation, may_merge=self.may(Grant.MERGE))

    def check_every_branch(self) -> None:
        """Refuse (403 ``branch_out_of_scope``) a write of every branch unless its scope is ``any``."""
        self.access.check_every_branch(self.actor)


def anonymous() -> Principal:
    """The principal of every request to an unauthenticated server."""
    return Principal(UNAUTHENTICATED_ACTOR, ALL_GRANTS, authenticated=False)
