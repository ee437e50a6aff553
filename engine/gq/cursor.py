"""The token cursor both ``.gq`` grammars (mutations and reads) parse with, and the shared values.

Values::

    value    := STRING | INT | FLOAT | "true" | "false" | "null" | "[" (value ("," value)*)? "]"
              | "date" "(" STRING ")" | "datetime" "(" STRING ")" | PARAM | "now" "(" ")"

A read query accepts the literals without ``null``, lists and ``now()``
(:meth:`Cursor.operand_value`). A ``date``/``datetime`` literal's text is checked here (a
``YYYY-MM-DD`` date; an ISO 8601 instant, naive = UTC, at most millisecond precision).
"""

from __future__ import annotations

from omnigraph.engine.gq.errors import GqError
from omnigraph.engine.gq.lexer import Token
from omnigraph.engine.gq.syntax import LiteralValue, Now, ParamRef, Value
from omnigraph.engine.schema.types import ScalarType
from omnigraph.engine.schema.values import InvalidValue, coerce_value

TYPED_LITERALS = {"date": "Date", "datetime": "DateTime"}


class Cursor:
    """A position in a token list, with the helpers of a recursive-descent parser."""

    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._index = 0

    @property
    def peek(self) -> Token:
        return self._tokens[self._index]

    def ahead(self, offset: int) -> Token:
        """The token ``offset`` places after the current one (``eof`` past the end)."""
        return self._tokens[min(self._index + offset, len(self._tokens) - 1)]

    def next(self) -> Token:
        token = self._tokens[self._index]
        if token.kind != "eof":
            self._index += 1
        return token

    def fail(self, message: str, token: Token | None = None) -> GqError:
        token = token or self.peek
        return GqError(message, token.line, token.column, token.text)

    def at(self, kind: str, text: str | None = None) -> bool:
        token = self.peek
        return token.kind == kind and (text is None or token.text == text)

    def expect(self, kind: str, text: str | None = None, what: str | None = None) -> Token:
        if not self.at(kind, text):
            raise self.fail(f"expected {what or repr(text) if text else what or kind}")
        return self.next()

    def keyword(self, word: str) -> Token:
        return self.expect("name", word, f"'{word}'")

    def separator(self, close: str) -> None:
        """After a list member: a ``,``, a line break before the next member, or ``close``."""
        if self.at("punct", ","):
            self.next()
        elif not self.at("punct", close) and not self.peek.newline_before:
            raise self.fail(f"expected ',', a line break or '{close}'")

    # -- values ------------------------------------------------------------------------------

    def value(self) -> Value:
        """A mutation value: a literal (``null`` and lists included), ``$param`` or ``now()``."""
        token = self.peek
        if token.kind == "name" and token.text == "null":
            self.next()
            return LiteralValue(None, token)
        if token.kind == "name" and token.text == "now" and self.ahead(1).text == "(":
            self.next()
            self.expect("punct", "(", "'(' after now")
            self.expect("punct", ")", "')': now() takes no argument")
            return Now(token)
        if token.kind == "punct" and token.text == "[":
            self.next()
            items: list[object] = []
            while not self.at("punct", "]"):
                item = self.value()
                if not isinstance(item, LiteralValue) or isinstance(item.value, list):
                    raise self.fail("a list literal holds scalar literals only", item.token)
                items.append(item.value)
                if not self.at("punct", "]"):
                    self.expect("punct", ",", "',' or ']'")
            self.next()
            return LiteralValue(items, token)
        found = self.operand_value()
        if found is None:
            raise self.fail("expected a value (a literal, $param or now())")
        return found

    def operand_value(self) -> LiteralValue | ParamRef | None:
        """A scalar literal or ``$param`` at the cursor (consumed), or None if there is none."""
        token = self.peek
        if token.kind in ("string", "int", "float"):
            self.next()
            return LiteralValue(token.value, token)
        if token.kind == "param":
            self.next()
            return ParamRef(token.text[1:], token)
        if token.kind == "name" and token.text in ("true", "false"):
            self.next()
            return LiteralValue(token.text == "true", token)
        if token.kind == "name" and token.text in TYPED_LITERALS and self.ahead(1).text == "(":
            return self._typed_literal()
        return None

    def _typed_literal(self) -> LiteralValue:
        word = self.next()
        typed = TYPED_LITERALS[word.text]
        self.expect("punct", "(", f"'(' after {word.text}")
        text = self.expect("string", what=f'a quoted {typed} ({word.text}("..."))')
        try:
            coerce_value(ScalarType(typed), text.value)
        except InvalidValue as error:
            raise self.fail(f"{word.text}(...): {error}", text) from None
        self.expect("punct", ")", f"')' closing {word.text}(...)")
        return LiteralValue(text.value, word, typed)
