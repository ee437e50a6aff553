"""Tokens of the project's two languages, ``.pg`` schemas and ``.gq`` queries, with 1-based positions.

One scanner serves both. It skips whitespace (space, tab, carriage return, line feed), ``//``
line comments and ``/* ... */`` block comments, reads a string literal wherever a ``"`` starts a
token, and ends the list with one ``eof`` token. A :class:`Dialect` says what a language adds:

* ``tokens``: a pattern whose named groups are the language's other token kinds, tried in order
  at each position (the group's name is the token's kind);
* ``read_string``: how a string literal that starts at a ``"`` is read and decoded;
* ``value``: the kind and value of a matched token (a number becomes a number, an annotation its
  name);
* ``refuse``: the error a refusal raises, with the language's wording: an ``unexpected_character``
  (no token starts here) or an ``unterminated_comment`` (``/*`` with no ``*/``).

Each token keeps its source ``text``, its ``value``, where it starts, and ``newline_before``:
whether a line break (possibly inside a comment) separates it from the token before it.
Columns count characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

import msgspec

Refusal = Literal["unexpected_character", "unterminated_comment"]
"""What the scanner itself refuses; the dialect words the error."""

_WHITESPACE = re.compile(r"[ \t\r\n]+")


class Token(msgspec.Struct, frozen=True):
    """One token: its kind, its source text, its value and where it starts (1-based)."""

    kind: str
    text: str
    value: Any
    line: int
    column: int
    newline_before: bool = False


class Dialect(msgspec.Struct, frozen=True):
    """What one language adds to the shared scanner (see the module docstring)."""

    tokens: re.Pattern[str]
    read_string: Callable[[str, int, int, int], tuple[Any, int]]
    """``(source, index of the opening quote, line, column)`` -> ``(value, index after the literal)``."""
    value: Callable[[str, str, int, int], tuple[str, Any]]
    """``(group name, matched text, line, column)`` -> ``(token kind, token value)``."""
    refuse: Callable[[Refusal, str, int, int], Exception]
    """``(refusal, offending text, line, column)`` -> the error to raise."""


def tokenize(source: str, dialect: Dialect) -> list[Token]:
    """All tokens of ``source`` in ``dialect``, ending with ``eof`` (value None).

    Raises:
        Exception: what ``dialect`` raises for a character no token starts with, an unterminated
            block comment, or a string literal or number it refuses.
    """
    tokens: list[Token] = []
    position, line, line_start = 0, 1, 0
    newline = False
    while position < len(source):
        column = position - line_start + 1
        skipped = True
        if (blank := _WHITESPACE.match(source, position)) is not None:
            end = blank.end()
        elif source.startswith("//", position):
            end = source.find("\n", position)
            end = len(source) if end < 0 else end
        elif source.startswith("/*", position):
            close = source.find("*/", position + 2)
            if close < 0:
                raise dialect.refuse("unterminated_comment", "/*", line, column)
            end = close + 2
        elif source[position] == '"':
            value, end = dialect.read_string(source, position, line, column)
            tokens.append(Token("string", source[position:end], value, line, column, newline))
            skipped = False
        else:
            match = dialect.tokens.match(source, position)
            if match is None:
                raise dialect.refuse("unexpected_character", source[position], line, column)
            kind, value = dialect.value(str(match.lastgroup), match.group(), line, column)
            tokens.append(Token(kind, match.group(), value, line, column, newline))
            end = match.end()
            skipped = False
        breaks = source.count("\n", position, end)
        newline = (newline or breaks > 0) if skipped else False
        if breaks:
            line += breaks
            line_start = source.rfind("\n", position, end) + 1
        position = end
    tokens.append(Token("eof", "", None, line, position - line_start + 1, newline))
    return tokens
