"""The one exception family of the toolkit, with HTTP statuses and CLI exit codes.

Every error the engine, the migrator and their CLIs raise on purpose is an ``OmnigraphError``
with a stable ``code``, an ``http_status`` and a JSON-serialisable ``details`` mapping. CLIs map
``code`` to an exit status with :func:`exit_code_for`.
"""

from __future__ import annotations

from typing import Any, ClassVar

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CLAIM_HELD = 3
EXIT_VALIDATION_FAILED = 4
EXIT_RECOVERY_REQUIRED = 5
EXIT_FORMAT_REFUSED = 6


class OmnigraphError(Exception):
    """Base error: ``code`` names the failure, ``details`` carries its structured facts."""

    code: ClassVar[str] = "internal"
    http_status: ClassVar[int] = 500
    exit_code: int = EXIT_ERROR
    """The exit status of a console script that stops on this error (an instance may carry its own)."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details or {})

    def to_json(self) -> dict[str, Any]:
        """The ``{"error": {code, message, details}}`` document printed by ``--json``."""
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class BadRequest(OmnigraphError):
    """The input is wrong (a schema, a record, a query, an argument); nothing was written."""

    code = "bad_request"
    http_status = 400


class NotFound(OmnigraphError):
    """What the request names does not exist: no graph at the root, an unknown branch, commit or table."""

    code = "not_found"
    http_status = 404


class Conflict(OmnigraphError):
    """A write lost to committed state: a key that exists, a branch that moved, branches that disagree.

    Nothing was written; what to do next depends on the kind (each subclass says).
    """

    http_status = 409


class KeyConflict(Conflict):
    """A strict insert met an id that already exists (or was inserted concurrently)."""

    code = "key_conflict"

    def __init__(self, entity_kind: str, type_name: str, entity_id: str, message: str | None = None):
        super().__init__(
            message or f"{entity_kind} {type_name} with id {entity_id!r} already exists",
            {"entity_kind": entity_kind, "type_name": type_name, "entity_id": entity_id},
        )


class ReadSetConflict(Conflict):
    """An update or delete read a branch that another writer moved before the commit; run it again."""

    code = "read_set_conflict"


class BranchExists(Conflict):
    """A branch create named a branch that already exists; nothing was written."""

    code = "branch_exists"


class MergeConflict(Conflict):
    """A branch merge found ids changed differently on both branches (every one listed)."""

    code = "merge_conflict"


class PreconditionFailed(OmnigraphError):
    """An expectation the caller stated does not hold (``details``: expected and actual)."""

    code = "precondition_failed"
    http_status = 412


class ResourceLimit(OmnigraphError):
    """One commit would exceed a limit (``resource``, its ``limit``, the ``actual`` amount); nothing was written."""

    code = "resource_limit"
    http_status = 413

    def __init__(self, resource: str, limit: int, actual: int, message: str, **extra: Any):
        super().__init__(message, {"resource": resource, "limit": limit, "actual": actual, **extra})


class QueryTimeout(OmnigraphError):
    """A read query ran past its time limit (``details.timeout_seconds``) and was stopped; nothing was written."""

    code = "timeout"
    http_status = 408


class QueryCancelled(OmnigraphError):
    """A read query was stopped because its caller cancelled it (an HTTP client that went away)."""

    code = "cancelled"
    http_status = 499


class RecoveryRequired(OmnigraphError):
    """A commit was interrupted after an effect landed (``operation_id``); a read-write open must resolve it first."""

    code = "recovery_required"
    http_status = 503
    exit_code = EXIT_RECOVERY_REQUIRED

    def __init__(self, operation_id: str | None, message: str, **extra: Any):
        super().__init__(message, {"operation_id": operation_id, **extra})


class TableDrift(OmnigraphError):
    """A table branch was changed outside the engine in a way that changes rows.

    Writes to it wait until an operator adopts or reverts the change (``omnigraph drift``).
    """

    code = "table_drift"
    http_status = 503
    exit_code = EXIT_RECOVERY_REQUIRED


class FormatRefused(OmnigraphError):
    """The graph's format refuses what was asked.

    A stamp this program does not open that way (read-write or read-only), a table whose primary key
    is not the one the write needs, a ``__manifest`` that does not read as a format this program
    knows, or an operation the format-4 writer does not have.
    """

    code = "format_refused"
    http_status = 409
    exit_code = EXIT_FORMAT_REFUSED


class ClaimHeld(OmnigraphError):
    """A migration claim is held: no other migration starts and no program writes the graph."""

    code = "claim_held"
    http_status = 409
    exit_code = EXIT_CLAIM_HELD


class FormatBarrier(OmnigraphError):
    """A server refuses a write: the stamp is not one its program writes (a migration barrier)."""

    code = "format_barrier"
    http_status = 503
    exit_code = EXIT_CLAIM_HELD


class ValidationFailed(OmnigraphError):
    """The data fails a check it must pass (duplicate or null ids, an integrity finding, an unfenced image)."""

    code = "validation_failed"
    http_status = 422
    exit_code = EXIT_VALIDATION_FAILED


class ReadOnlyGraph(OmnigraphError):
    """A write was asked of a graph handle opened read-only (``omnigraph.open(..., read_only=True)``).

    Nothing was read or written.
    """

    code = "read_only"
    http_status = 409


class StorageAccessDenied(OmnigraphError):
    """The object store refused our credentials for the graph's bucket."""

    code = "access_denied"
    http_status = 403


class StorageUnavailable(OmnigraphError):
    """The object store kept failing (5xx, dropped connections) past the retry budget."""

    code = "storage_unavailable"
    http_status = 503


class Internal(OmnigraphError):
    """A bug: an invariant of the toolkit does not hold."""

    code = "internal"
    http_status = 500


def exit_code_for(error: BaseException) -> int:
    """CLI exit status for an error: its class's code, 1 for anything unexpected."""
    if isinstance(error, OmnigraphError):
        return error.exit_code
    return EXIT_ERROR
