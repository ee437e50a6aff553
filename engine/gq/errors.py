"""The error of a refused ``.gq`` source: where it is and which token was refused."""

from __future__ import annotations

from typing import Any

from omnigraph.engine.errors import BadRequest


class GqError(BadRequest):
    """A refused ``.gq`` source (syntax or type).

    The message reads ``gq error at LINE:COLUMN near 'TOKEN': ...``; ``details`` holds
    ``{"line", "column", "token"}`` (1-based, columns count characters; ``token`` is the source
    text of the offending token, ``""`` at the end of the input), plus any ``extra`` details.
    """

    def __init__(self, message: str, line: int, column: int, token: str, extra: dict[str, Any] | None = None) -> None:
        shown = repr(token) if token else "end of input"
        super().__init__(
            f"gq error at {line}:{column} near {shown}: {message}",
            {"line": line, "column": column, "token": token, **(extra or {})},
        )
        self.line = line
        self.column = column
        self.token = token
