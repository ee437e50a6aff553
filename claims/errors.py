"""Errors of the claims package: the one constructor of ``claim_held``, and its own errors.

Its own errors are those :mod:`omnigraph.engine.errors` does not already name.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from omnigraph.claims.document import ClaimDocument
from omnigraph.engine.errors import ClaimHeld, OmnigraphError


def claim_held(message: str, holder: ClaimDocument | None, **context: Any) -> ClaimHeld:
    """The ``claim_held`` error (exit 3) about a claim's holder: every one is made here.

    ``message`` says who holds the claim and what to run next. ``details`` is ``context`` (for
    example the claim's ``path``, or the graph's ``stamp``) plus ``holder``: the holder's document
    as JSON, or None when no holder could be read.
    """
    return ClaimHeld(message, {**context, "holder": holder.model_dump(mode="json") if holder else None})


def validation_problem(error: ValidationError) -> str:
    """A one-line, deterministic description of why a stored document failed to parse."""
    return "; ".join(f"{'.'.join(str(part) for part in item['loc']) or '<document>'}: {item['msg']}" for item in error.errors())


class ClaimCorrupt(OmnigraphError):
    """A claim (or break record) exists but does not parse; it is never treated as absent.

    ``details``: ``{"path": <store-relative path>, "problem": <parser message>}``.
    """

    code = "claim_corrupt"
    http_status = 500

    def __init__(self, path: str, problem: str, what: str = "claim document") -> None:
        super().__init__(
            f"{path} exists but is not a valid {what} ({problem}); it was left untouched. "
            "Inspect the object by hand: nothing treats it as free until an operator removes it.",
            {"path": path, "problem": problem},
        )
