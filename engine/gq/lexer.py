"""Tokens of the ``.gq`` mutation language, with 1-based line and column.

Token kinds: ``name`` (``[A-Za-z_][A-Za-z0-9_]*``, keywords included: the parser decides by
position), ``param`` (``$name``), ``string`` (a double-quoted JSON string literal; ``value`` holds
the decoded text), ``int`` and ``float`` (an optional leading ``-``; ``value`` holds the number),
``op`` (``= != < <= > >=``), ``punct`` (``{ } ( ) [ ] , : ?``) and one final ``eof``. ``//`` line
comments and ``/* */`` block comments are skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from engine.gq.errors import GqError

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\n]+)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*.*?\*/)
  | (?P<param>\$[A-Za-z_][A-Za-z0-9_]*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
  | (?P<op>!=|<=|>=|=|<|>)
  | (?P<punct>[{}()\[\],:?])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class Token:
    """One token: its kind, its source text, its decoded value and where it starts."""

    kind: str
    text: str
    value: Any
    line: int
    column: int


def tokenize(source: str) -> list[Token]:
    """Split ``source`` into tokens ending with ``eof``; an unknown character raises :class:`GqError`."""
    tokens: list[Token] = []
    position, line, line_start = 0, 1, 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        column = position - line_start + 1
        if match is None:
            if source.startswith("/*", position):
                raise GqError("unterminated block comment", line, column, "/*")
            if source[position] == '"':
                raise GqError("unterminated string literal", line, column, source[position:].split("\n", 1)[0])
            raise GqError("unexpected character", line, column, source[position])
        kind = str(match.lastgroup)
        text = match.group()
        if kind == "string":
            try:
                tokens.append(Token(kind, text, json.loads(text), line, column))
            except ValueError as error:
                raise GqError(f"invalid string literal: {error.msg}", line, column, text) from None
        elif kind == "number":
            is_float = any(c in text for c in ".eE")
            tokens.append(Token("float" if is_float else "int", text, float(text) if is_float else int(text), line, column))
        elif kind not in ("space", "line_comment", "block_comment"):
            tokens.append(Token(kind, text, text, line, column))
        newlines = text.count("\n")
        if newlines:
            line += newlines
            line_start = match.start() + text.rindex("\n") + 1
        position = match.end()
    tokens.append(Token("eof", "", None, line, position - line_start + 1))
    return tokens
