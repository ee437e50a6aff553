"""What a caller may do: the grants a token carries, and the principal a request acts as."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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
    holds every grant.
    """

    actor: str
    grants: frozenset[Grant]
    authenticated: bool

    def may(self, grant: Grant) -> bool:
        """True if the principal holds ``grant``."""
        return grant in self.grants


def anonymous() -> Principal:
    """The principal of every request to an unauthenticated server."""
    return Principal(UNAUTHENTICATED_ACTOR, ALL_GRANTS, authenticated=False)
