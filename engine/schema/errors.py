"""The schema-language error: a ``BadRequest`` that always carries a 1-based source position."""

from __future__ import annotations

from omnigraph.engine.errors import BadRequest


class SchemaError(BadRequest):
    """A refused ``.pg`` source.

    The message reads ``schema error at LINE:COLUMN: ...`` and ``details`` holds
    ``{"line": LINE, "column": COLUMN}``; both are 1-based, columns count characters.
    """

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"schema error at {line}:{column}: {message}", {"line": line, "column": column})
        self.line = line
        self.column = column
