"""Tokens of the ``.pg`` schema language, each with its 1-based line and column.

Whitespace, ``// line`` and ``/* block */`` comments separate tokens and are dropped. Token
kinds: ``ident`` (``[A-Za-z_][A-Za-z0-9_]*``), ``int`` (decimal digits), ``annotation``
(``@`` immediately followed by an identifier; the value is the identifier), ``punct`` (one of
``{ } ( ) [ ] : , ?`` or ``->``) and a final ``eof``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.schema.errors import SchemaError

_TOKEN = re.compile(
    r"(?P<ws>[ \t\r\n]+)"
    r"|(?P<line_comment>//[^\n]*)"
    r"|(?P<block_comment>/\*)"
    r"|(?P<annotation>@[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<int>[0-9]+)"
    r"|(?P<punct>->|[{}()\[\]:,?])"
)


@dataclass(frozen=True)
class Token:
    """One token: ``kind``, its ``value`` (text; the name for annotations) and position."""

    kind: str
    value: str
    line: int
    column: int


def tokenize(source: str) -> list[Token]:
    """All tokens of ``source`` ending with ``eof``; a character outside the language or an
    unterminated block comment raises :class:`SchemaError` at its position."""
    tokens: list[Token] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        column = pos - line_start + 1
        if match is None:
            raise SchemaError(f"unexpected character {source[pos]!r}", line, column)
        kind = match.lastgroup
        end = match.end()
        if kind == "block_comment":
            close = source.find("*/", end)
            if close < 0:
                raise SchemaError("unterminated block comment", line, column)
            end = close + 2
        elif kind == "annotation":
            tokens.append(Token(kind, match.group()[1:], line, column))
        elif kind in ("ident", "int", "punct"):
            tokens.append(Token(kind, match.group(), line, column))
        newlines = source.count("\n", pos, end)
        if newlines:
            line += newlines
            line_start = source.rfind("\n", pos, end) + 1
        pos = end
    tokens.append(Token("eof", "", line, pos - line_start + 1))
    return tokens
