"""Errors of the claims package that :mod:`engine.errors` does not already name."""

from __future__ import annotations

from pydantic import ValidationError

from engine.errors import OmnigraphError


def validation_problem(error: ValidationError) -> str:
    """A one-line, deterministic description of why a stored document failed to parse."""
    return "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or '<document>'}: {item['msg']}" for item in error.errors()
    )


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
