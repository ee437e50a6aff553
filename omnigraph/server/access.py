"""How a route declares what it needs, and the audit that no route forgets.

Every route of the application declares exactly one :class:`Policy` through a FastAPI dependency:

- ``principal: Annotated[Principal, requires(Grant.WRITE)]`` when the handler needs the caller
  (its ``actor`` is what the commit records), or ``dependencies=[requires(Grant.READ)]`` when it
  does not;
- ``requires(Grant.WRITE, body=NDJSON_BODY)`` for a route whose body is JSONL (the load limit and
  the JSONL content types apply instead of the JSON ones);
- ``dependencies=[public()]`` for the few routes anyone may call (health, readiness, the API
  description and its viewer).

The declaration is what :mod:`omnigraph.server.gate` enforces, before the body is read: the route's
handler is a :class:`omnigraph.server.gate.GuardedRoute`, which refuses (401, 403) a caller without the
grant. A router added later (for example a query router) gets the same checks by being created
with ``APIRouter(route_class=GuardedRoute)``, declaring each route (or the router, with
``APIRouter(dependencies=[requires(...)])``) the same way, and being included in the app before
it starts; :func:`omnigraph.server.gate.audit_routes` refuses to start an app with a route of another
class, or one that declares nothing, or two different policies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Depends, Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from omnigraph.errors import Internal
from omnigraph.server.grants import Grant, Principal

BodyKind = Literal["json", "ndjson"]
JSON_BODY: BodyKind = "json"
NDJSON_BODY: BodyKind = "ndjson"
PRINCIPAL_KEY = "omnigraph_principal"
BEARER = HTTPBearer(auto_error=False, description="A token of the server's tokens file (`omnigraph token create`).")


@dataclass(frozen=True)
class Policy:
    """What a route needs: ``grant`` None = open to anyone; ``body`` picks its limit and content types."""

    grant: Grant | None
    body: BodyKind = JSON_BODY


class _Declaration:
    """A dependency that carries a route's :class:`Policy` (what :func:`audit_routes` looks for)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy


class Requires(_Declaration):
    """A guarded route's declaration; hands the handler the principal the gate admitted.

    Its bearer parameter only describes the scheme in the OpenAPI document (the gate checks it).
    """

    def __call__(self, request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)]) -> Principal:
        """The principal the gate admitted for ``request`` (``internal`` if the app runs without the gate)."""
        principal = request.scope.get("state", {}).get(PRINCIPAL_KEY)
        if not isinstance(principal, Principal):
            raise Internal("no principal for a guarded route: the app runs without omnigraph.server.gate.Gate")
        return principal


class Open(_Declaration):
    """An open route's declaration."""

    def __call__(self) -> None:
        """Nothing: an open route needs no principal."""
        return None


def requires(grant: Grant, body: BodyKind = JSON_BODY) -> Any:
    """Declare that a route needs ``grant``; as a parameter's default it yields the :class:`Principal`."""
    return Depends(Requires(Policy(grant, body)))


def public() -> Any:
    """Declare a route open to anyone (no token checked)."""
    return Depends(Open(Policy(None)))


def _declared(dependencies: list[Any]) -> list[Policy]:
    found: list[Policy] = []
    for dependant in dependencies:
        if isinstance(dependant.call, _Declaration):
            found.append(dependant.call.policy)
        found += _declared(dependant.dependencies)
    return found


def single_policy(route: APIRoute) -> Policy | None:
    """The one policy ``route`` declares (on itself or through its router's dependencies).

    None when it declares none or several.
    """
    declared = set(_declared(route.dependant.dependencies))
    return declared.pop() if len(declared) == 1 else None
