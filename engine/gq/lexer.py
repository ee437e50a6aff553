"""Tokens of the ``.gq`` language, with 1-based line and column.

Token kinds: ``name`` (``[A-Za-z_][A-Za-z0-9_]*``, keywords included: the parser decides by
position), ``param`` (``$name``; ``$_`` too), ``string`` (a double-quoted literal; ``value`` holds
the decoded text), ``int`` and ``float`` (an optional leading ``-``; ``value`` holds the number),
``op`` (``= != < <= > >=``), ``punct`` (``{ } ( ) [ ] , : ? .``) and one final ``eof``. ``//``
line comments and ``/* */`` block comments are skipped. ``newline_before`` tells whether a line
break (possibly inside a comment) separates a token from the one before it: lists of
assignments and return items accept a line break as a separator.

String escapes are exactly ``\\"``, ``\\\\``, ``\\n``, ``\\t`` and ``\\u{HEX}`` (1 to 6 hex digits
naming a Unicode scalar value); any other escape is refused at its position. A string does not
span lines.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from omnigraph.engine.gq.syntax import GqError

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\n]+)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*.*?\*/)
  | (?P<param>\$[A-Za-z_][A-Za-z0-9_]*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>"(?:[^"\\\n]|\\[^\n])*")
  | (?P<number>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
  | (?P<op>!=|<=|>=|=|<|>)
  | (?P<punct>[{}()\[\],:?.])
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPE = re.compile(r'\\(?:(?P<simple>["\\nt])|u\{(?P<hex>[0-9A-Fa-f]{1,6})\}|(?P<other>.?))', re.DOTALL)
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}


@dataclass(frozen=True)
class Token:
    """One token: its kind, its source text, its decoded value and where it starts."""

    kind: str
    text: str
    value: Any
    line: int
    column: int
    newline_before: bool = False


def _decode_string(text: str, line: int, column: int) -> str:
    """The value of the string literal ``text`` (quotes included) that starts at ``line:column``."""
    body = text[1:-1]
    parts: list[str] = []
    position = 0
    for match in _ESCAPE.finditer(body):
        parts.append(body[position : match.start()])
        where = column + 1 + match.start()
        if match.group("simple"):
            parts.append(_SIMPLE_ESCAPES[match.group("simple")])
        elif match.group("hex"):
            code = int(match.group("hex"), 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise GqError("\\u{...} must name a Unicode scalar value", line, where, match.group())
            parts.append(chr(code))
        else:
            raise GqError('unknown escape (a string accepts \\", \\\\, \\n, \\t and \\u{HEX})', line, where, match.group())
        position = match.end()
    parts.append(body[position:])
    return "".join(parts)


def tokenize(source: str) -> list[Token]:
    """Split ``source`` into tokens ending with ``eof``; an unknown character raises :class:`GqError`."""
    tokens: list[Token] = []
    position, line, line_start = 0, 1, 0
    newline = False
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
            tokens.append(Token(kind, text, _decode_string(text, line, column), line, column, newline))
        elif kind == "number":
            is_float = any(c in text for c in ".eE")
            value = float(text) if is_float else int(text)
            if is_float and not math.isfinite(value):
                raise GqError("number out of range", line, column, text)
            tokens.append(Token("float" if is_float else "int", text, value, line, column, newline))
        elif kind not in ("space", "line_comment", "block_comment"):
            tokens.append(Token(kind, text, text, line, column, newline))
        newlines = text.count("\n")
        if kind in ("space", "line_comment", "block_comment"):
            newline = newline or newlines > 0
        else:
            newline = False
        if newlines:
            line += newlines
            line_start = match.start() + text.rindex("\n") + 1
        position = match.end()
    tokens.append(Token("eof", "", None, line, position - line_start + 1, newline))
    return tokens
