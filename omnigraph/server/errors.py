"""The errors the HTTP layer itself refuses a request with, before any handler runs.

They belong to the one error family (:class:`omnigraph.engine.errors.OmnigraphError`), so every refusal is
``{"error": {code, message, details}}`` with the status of its code, like the engine's errors.
"""

from __future__ import annotations

from omnigraph.errors import OmnigraphError


class Unauthorized(OmnigraphError):
    """No bearer token, a malformed one, or one that is not in the tokens file (401)."""

    code = "unauthorized"
    http_status = 401


class Forbidden(OmnigraphError):
    """A valid token without the grant the endpoint (or the actor header) needs (403)."""

    code = "forbidden"
    http_status = 403


class OriginRefused(OmnigraphError):
    """A write carrying an ``Origin`` that is neither the server's own nor an allowed one (403)."""

    code = "origin_refused"
    http_status = 403


class RequestTimeout(OmnigraphError):
    """The request body did not arrive within the body timeout (408)."""

    code = "request_timeout"
    http_status = 408


class UnsupportedMediaType(OmnigraphError):
    """A body whose ``Content-Type`` the endpoint does not take (415)."""

    code = "unsupported_media_type"
    http_status = 415


class MisdirectedRequest(OmnigraphError):
    """A ``Host`` header that names none of the server's allowed host names (421)."""

    code = "misdirected_request"
    http_status = 421


class BranchOutOfScope(OmnigraphError):
    """A write to a branch outside the token's ``branch_scope`` (403)."""

    code = "branch_out_of_scope"
    http_status = 403


class BranchProtected(OmnigraphError):
    """A load, mutate or delete of a protected branch, or its creation without the ``merge`` grant (403)."""

    code = "branch_protected"
    http_status = 403


class Overloaded(OmnigraphError):
    """The worker already holds ``--max-connections`` connections (503); the open routes are still answered."""

    code = "overloaded"
    http_status = 503


class RangeNotSatisfiable(OmnigraphError):
    """A ``Range`` that selects no byte of a Blob cell (416; ``Content-Range: bytes */SIZE`` says its size)."""

    code = "range_not_satisfiable"
    http_status = 416
