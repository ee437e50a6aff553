"""Tokens of the ``.pg`` schema language, each with its 1-based line and column.

Whitespace, ``// line`` and ``/* block */`` comments separate tokens and are dropped. Token
kinds:

- ``ident``: ``[A-Za-z_][A-Za-z0-9_]*``;
- ``number``: an optional ``-``, decimal digits, and an optional fraction (``.`` then digits),
  so ``1..5`` is ``1``, ``..``, ``5``; the value is the text as written;
- ``string``: ``"..."`` on one line; the value is the decoded text. Escapes: ``\\"``, ``\\\\``,
  ``\\n``, ``\\t``; any other escape, a raw line break or a missing closing quote is refused;
- ``annotation``: ``@`` immediately followed by an identifier; the value is the identifier;
- ``punct``: one of ``{ } ( ) [ ] : , ? * =`` or ``->`` or ``..``;
- a final ``eof``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from omnigraph.engine.schema.parser import SchemaError

_TOKEN = re.compile(
    r"(?P<ws>[ \t\r\n]+)"
    r"|(?P<line_comment>//[^\n]*)"
    r"|(?P<block_comment>/\*)"
    r"|(?P<annotation>@[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<punct>->|\.\.|[{}()\[\]:,?*=])"
    r"|(?P<number>-?[0-9]+(?:\.[0-9]+)?)"
    r"|(?P<string>\")"
)
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}


@dataclass(frozen=True)
class Token:
    """One token: ``kind``, its ``value`` (text; the name for annotations) and position."""

    kind: str
    value: str
    line: int
    column: int


def _string(source: str, start: int, line: int, column: int) -> tuple[str, int]:
    """The decoded string whose opening quote is at ``start``, and the index after its closing quote."""
    chars: list[str] = []
    pos = start + 1
    while pos < len(source):
        char = source[pos]
        if char == '"':
            return "".join(chars), pos + 1
        if char == "\n":
            break
        if char == "\\":
            escaped = source[pos + 1 : pos + 2]
            if escaped not in _ESCAPES:
                raise SchemaError(
                    f"unsupported escape '\\{escaped}' in a string (use \\\", \\\\, \\n or \\t)",
                    line,
                    column + (pos - start),
                )
            chars.append(_ESCAPES[escaped])
            pos += 2
            continue
        chars.append(char)
        pos += 1
    raise SchemaError("unterminated string", line, column)


def tokenize(source: str) -> list[Token]:
    """All tokens of ``source`` ending with ``eof``; a character outside the language, an
    unterminated block comment or string, or a bad escape raises :class:`SchemaError` at its
    position."""
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
        elif kind == "string":
            value, end = _string(source, pos, line, column)
            tokens.append(Token(kind, value, line, column))
        elif kind == "annotation":
            tokens.append(Token(kind, match.group()[1:], line, column))
        elif kind in ("ident", "number", "punct"):
            tokens.append(Token(kind, match.group(), line, column))
        newlines = source.count("\n", pos, end)
        if newlines:
            line += newlines
            line_start = source.rfind("\n", pos, end) + 1
        pos = end
    tokens.append(Token("eof", "", line, pos - line_start + 1))
    return tokens
