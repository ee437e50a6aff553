"""Syntax of the ``.pg`` schema language: tokens to declarations, positions kept.

Grammar (commas between members are optional; whitespace and newlines separate)::

    schema     := decl*
    decl       := "node" NAME body | "edge" NAME ":" NAME "->" NAME body?
    body       := "{" (member ","?)* "}"
    member     := property | "@key" "(" NAME ("," NAME)* ","? ")"
    property   := NAME ":" type "?"? ("@key" | "@unique" | "@index")*
    type       := SCALAR | "[" SCALAR "]" | "enum" "(" NAME ("," NAME)* ","? ")" | "Vector" "(" INT ")"

A ``@key`` immediately followed by ``(`` is the body-level (composite) form; otherwise it
annotates the property before it. Only syntax is checked here: names, keys and endpoints are
checked by :mod:`engine.schema.checker`.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.schema.errors import SchemaError
from engine.schema.lexer import Token, tokenize
from engine.schema.types import (
    SCALAR_ARROW_TYPES,
    EnumType,
    ListType,
    PropertyType,
    ScalarType,
    VectorType,
)

ANNOTATIONS = ("key", "unique", "index")
MAX_VECTOR_DIM = 2**31 - 1


@dataclass(frozen=True)
class Name:
    """An identifier (or annotation name) and where it was written."""

    value: str
    line: int
    column: int


@dataclass(frozen=True)
class PropDecl:
    """``name: type? @annotations``."""

    name: Name
    type: PropertyType
    nullable: bool
    annotations: tuple[Name, ...]


@dataclass(frozen=True)
class KeyDecl:
    """A body-level ``@key(members)``; ``at`` is the ``@key`` token."""

    at: Name
    members: tuple[Name, ...]


@dataclass(frozen=True)
class TypeDecl:
    """A ``node`` or ``edge`` declaration; endpoints are None for nodes."""

    kind: str
    name: Name
    from_type: Name | None
    to_type: Name | None
    properties: tuple[PropDecl, ...]
    keys: tuple[KeyDecl, ...]


def parse(source: str) -> list[TypeDecl]:
    """The declarations of ``source`` in order; a syntax error raises :class:`SchemaError`."""
    return _Parser(tokenize(source)).schema()


def _name(token: Token) -> Name:
    return Name(token.value, token.line, token.column)


def _describe(token: Token) -> str:
    if token.kind == "eof":
        return "end of input"
    if token.kind == "annotation":
        return f"'@{token.value}'"
    return f"'{token.value}'"


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._pos = 0

    def _peek(self, ahead: int = 0) -> Token:
        return self._tokens[min(self._pos + ahead, len(self._tokens) - 1)]

    def _next(self) -> Token:
        token = self._peek()
        self._pos += 1
        return token

    def _fail(self, token: Token, expected: str) -> SchemaError:
        return SchemaError(f"expected {expected}, found {_describe(token)}", token.line, token.column)

    def _is_punct(self, value: str, ahead: int = 0) -> bool:
        token = self._peek(ahead)
        return token.kind == "punct" and token.value == value

    def _punct(self, value: str) -> Token:
        token = self._next()
        if token.kind != "punct" or token.value != value:
            raise self._fail(token, f"'{value}'")
        return token

    def _ident(self, what: str) -> Name:
        token = self._next()
        if token.kind != "ident":
            raise self._fail(token, what)
        return _name(token)

    def _skip_comma(self) -> None:
        if self._is_punct(","):
            self._next()

    def schema(self) -> list[TypeDecl]:
        decls: list[TypeDecl] = []
        while self._peek().kind != "eof":
            token = self._next()
            if token.kind == "ident" and token.value == "node":
                name = self._ident("a type name")
                properties, keys = self._body()
                decls.append(TypeDecl("node", name, None, None, properties, keys))
            elif token.kind == "ident" and token.value == "edge":
                decls.append(self._edge())
            else:
                raise self._fail(token, "'node' or 'edge'")
        return decls

    def _edge(self) -> TypeDecl:
        name = self._ident("a type name")
        self._punct(":")
        from_type = self._ident("a node type name")
        self._punct("->")
        to_type = self._ident("a node type name")
        properties: tuple[PropDecl, ...] = ()
        keys: tuple[KeyDecl, ...] = ()
        if self._is_punct("{"):
            properties, keys = self._body()
        return TypeDecl("edge", name, from_type, to_type, properties, keys)

    def _starts_key_decl(self) -> bool:
        token = self._peek()
        return token.kind == "annotation" and token.value == "key" and self._is_punct("(", 1)

    def _body(self) -> tuple[tuple[PropDecl, ...], tuple[KeyDecl, ...]]:
        self._punct("{")
        properties: list[PropDecl] = []
        keys: list[KeyDecl] = []
        while not self._is_punct("}"):
            token = self._peek()
            if self._starts_key_decl():
                keys.append(self._key_decl())
            elif token.kind == "ident":
                properties.append(self._property())
            elif token.kind == "annotation":
                raise SchemaError(
                    f"annotation '@{token.value}' must follow a property type", token.line, token.column
                )
            else:
                raise self._fail(token, "a property or '}'")
            self._skip_comma()
        self._next()
        return tuple(properties), tuple(keys)

    def _key_decl(self) -> KeyDecl:
        at = _name(self._next())
        self._punct("(")
        members = [self._ident("a property name")]
        while self._is_punct(","):
            self._next()
            if self._is_punct(")"):
                break
            members.append(self._ident("a property name"))
        self._punct(")")
        return KeyDecl(at, tuple(members))

    def _property(self) -> PropDecl:
        name = self._ident("a property name")
        self._punct(":")
        ptype = self._type()
        nullable = False
        if self._is_punct("?"):
            self._next()
            nullable = True
        annotations: list[Name] = []
        while self._peek().kind == "annotation" and not self._starts_key_decl():
            token = self._next()
            if token.value not in ANNOTATIONS:
                raise SchemaError(
                    f"unknown annotation '@{token.value}' (expected @key, @unique or @index)",
                    token.line,
                    token.column,
                )
            annotations.append(_name(token))
        return PropDecl(name, ptype, nullable, tuple(annotations))

    def _scalar(self, token: Token) -> ScalarType:
        if token.kind != "ident":
            raise self._fail(token, "a type")
        if token.value not in SCALAR_ARROW_TYPES:
            raise SchemaError(f"unknown type '{token.value}'", token.line, token.column)
        return ScalarType(token.value)

    def _type(self) -> PropertyType:
        token = self._next()
        if token.kind == "punct" and token.value == "[":
            item_token = self._next()
            if item_token.kind == "punct" and item_token.value == "[":
                raise SchemaError("list items must be scalar types", item_token.line, item_token.column)
            if item_token.kind == "ident" and item_token.value in ("enum", "Vector"):
                raise SchemaError(
                    f"list items must be scalar types, not {item_token.value}", item_token.line, item_token.column
                )
            item = self._scalar(item_token)
            self._punct("]")
            return ListType(item)
        if token.kind == "ident" and token.value == "enum":
            return self._enum()
        if token.kind == "ident" and token.value == "Vector":
            return self._vector()
        return self._scalar(token)

    def _enum(self) -> EnumType:
        self._punct("(")
        values: list[str] = []
        while True:
            member = self._ident("an enum value")
            if member.value in values:
                raise SchemaError(f"duplicate enum value '{member.value}'", member.line, member.column)
            values.append(member.value)
            if not self._is_punct(","):
                break
            self._next()
            if self._is_punct(")"):
                break
        self._punct(")")
        return EnumType(tuple(values))

    def _vector(self) -> VectorType:
        self._punct("(")
        token = self._next()
        if token.kind != "int":
            raise self._fail(token, "a vector dimension")
        dim = int(token.value)
        if not 1 <= dim <= MAX_VECTOR_DIM:
            raise SchemaError(f"vector dimension must be between 1 and {MAX_VECTOR_DIM}", token.line, token.column)
        self._punct(")")
        return VectorType(dim)
