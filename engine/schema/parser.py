"""Syntax of the ``.pg`` schema language: tokens to declarations (:mod:`omnigraph.engine.schema.syntax`).

Grammar (commas between members are optional; whitespace and newlines separate)::

    schema     := decl*
    decl       := "interface" NAME annotation* body
                | "node" NAME ("implements" NAME ("," NAME)*)? annotation* body
                | "edge" NAME ":" NAME "->" NAME annotation* body?
    body       := "{" (member ","?)* "}"
    member     := property | annotation                       (a body-level constraint)
    property   := NAME ":" type "?"? annotation*
    annotation := "@" NAME ("(" (arg ("," arg)* ","?)? ")")?
    arg        := NAME | STRING | NUMBER | NUMBER? ".." (NUMBER | "*")?
    type       := SCALAR | "[" SCALAR "]" | "enum" "(" NAME ("," NAME)* ","? ")" | "Vector" "(" INT ")" | "Blob"

After a property, ``@range(...)`` and ``@check(...)``, and ``@key``/``@unique``/``@index``
immediately followed by ``(``, start a body-level member; every other annotation belongs to
the property before it. Only syntax is checked here (names, annotations and their arguments
are checked by :mod:`omnigraph.engine.schema.checker`). Syntax that other graph schema languages use
and this one does not is refused as ``unsupported schema feature: <name>`` at its position.
"""

from __future__ import annotations

from omnigraph.engine.schema.errors import SchemaError
from omnigraph.engine.schema.lexer import Token, tokenize
from omnigraph.engine.schema.syntax import Annotation, Arg, Name, Number, PropDecl, Range, TypeDecl
from omnigraph.engine.schema.types import (
    SCALAR_ARROW_TYPES,
    BlobType,
    EnumType,
    ListType,
    PropertyType,
    ScalarType,
    VectorType,
)

MAX_VECTOR_DIM = 2**31 - 1
BODY_ONLY = frozenset({"range", "check"})
"""Annotations that are body-level members wherever they are written."""
BODY_WITH_ARGS = frozenset({"key", "unique", "index"})
"""Annotations that are body-level members when written with parentheses."""
UNSUPPORTED_DECLS = {"enum": "enum declaration", "type": "type declaration", "import": "import"}
"""Top-level words of other graph schema languages, refused by feature name."""


def parse(source: str) -> list[TypeDecl]:
    """The declarations of ``source`` in order; a syntax error raises :class:`SchemaError`."""
    return _Parser(tokenize(source)).schema()


def unsupported(feature: str, token: Token | Name) -> SchemaError:
    """The refusal of syntax the language recognises but does not support."""
    return SchemaError(f"unsupported schema feature: {feature}", token.line, token.column)


def starts_body_member(annotation: Annotation) -> bool:
    """Whether ``annotation``, written after a property, is a body-level member of its own."""
    name = annotation.name.value
    return name in BODY_ONLY or (name in BODY_WITH_ARGS and annotation.args is not None)


def _name(token: Token) -> Name:
    return Name(token.value, token.line, token.column)


def _describe(token: Token) -> str:
    if token.kind == "eof":
        return "end of input"
    if token.kind == "annotation":
        return f"'@{token.value}'"
    if token.kind == "string":
        return "a string"
    return f"'{token.value}'"


def _number(token: Token) -> Number:
    return float(token.value) if "." in token.value else int(token.value)


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
            word = token.value if token.kind == "ident" else None
            if word == "node":
                decls.append(self._node())
            elif word == "edge":
                decls.append(self._edge())
            elif word == "interface":
                name = self._ident("an interface name")
                annotations = self._annotations(in_body=False)
                properties, body = self._body()
                decls.append(TypeDecl("interface", name, annotations=annotations, properties=properties, body=body))
            elif word in UNSUPPORTED_DECLS:
                raise unsupported(UNSUPPORTED_DECLS[word], token)
            else:
                raise self._fail(token, "'node', 'edge' or 'interface'")
        return decls

    def _node(self) -> TypeDecl:
        name = self._ident("a type name")
        if self._is_punct(":"):
            raise unsupported("type inheritance (':'); declare an interface and use 'implements'", self._peek())
        implements: list[Name] = []
        if self._peek().kind == "ident" and self._peek().value == "implements":
            self._next()
            implements.append(self._ident("an interface name"))
            while self._is_punct(","):
                self._next()
                implements.append(self._ident("an interface name"))
        annotations = self._annotations(in_body=False)
        properties, body = self._body()
        return TypeDecl("node", name, implements=tuple(implements), annotations=annotations, properties=properties, body=body)

    def _edge(self) -> TypeDecl:
        name = self._ident("a type name")
        self._punct(":")
        from_type = self._ident("a node type name")
        self._punct("->")
        to_type = self._ident("a node type name")
        annotations = self._annotations(in_body=False)
        properties: tuple[PropDecl, ...] = ()
        body: tuple[Annotation, ...] = ()
        if self._is_punct("{"):
            properties, body = self._body()
        return TypeDecl("edge", name, from_type, to_type, annotations=annotations, properties=properties, body=body)

    def _starts_body_member(self) -> bool:
        token = self._peek()
        if token.kind != "annotation":
            return False
        return token.value in BODY_ONLY or (token.value in BODY_WITH_ARGS and self._is_punct("(", 1))

    def _body(self) -> tuple[tuple[PropDecl, ...], tuple[Annotation, ...]]:
        self._punct("{")
        properties: list[PropDecl] = []
        body: list[Annotation] = []
        while not self._is_punct("}"):
            token = self._peek()
            if token.kind == "annotation":
                body.append(self._annotation())
            elif token.kind == "ident":
                properties.append(self._property())
            else:
                raise self._fail(token, "a property, a body annotation or '}'")
            self._skip_comma()
        self._next()
        return tuple(properties), tuple(body)

    def _annotations(self, in_body: bool) -> tuple[Annotation, ...]:
        """Annotations up to the next token that is not one (in a body: up to a body member)."""
        annotations: list[Annotation] = []
        while self._peek().kind == "annotation" and not (in_body and self._starts_body_member()):
            annotations.append(self._annotation())
        return tuple(annotations)

    def _annotation(self) -> Annotation:
        name = _name(self._next())
        if not self._is_punct("("):
            return Annotation(name)
        self._next()
        args: list[Arg] = []
        while not self._is_punct(")"):
            args.append(self._arg())
            if not self._is_punct(","):
                break
            self._next()
        self._punct(")")
        return Annotation(name, tuple(args))

    def _bound(self) -> Number | None:
        token = self._peek()
        if token.kind == "number":
            self._next()
            return _number(token)
        return None

    def _arg(self) -> Arg:
        token = self._peek()
        if token.kind == "ident":
            self._next()
            return Arg("name", token.value, token.line, token.column)
        if token.kind == "string":
            self._next()
            return Arg("string", token.value, token.line, token.column)
        low = self._bound()
        if not self._is_punct(".."):
            if low is None:
                raise self._fail(token, "an annotation argument (a name, a string, a number or a range)")
            return Arg("number", low, token.line, token.column)
        self._next()
        high = self._bound()
        if high is None and self._is_punct("*"):
            self._next()
        return Arg("range", Range(low, high), token.line, token.column)

    def _property(self) -> PropDecl:
        name = self._ident("a property name")
        self._punct(":")
        ptype = self._type()
        nullable = False
        if self._is_punct("?"):
            self._next()
            nullable = True
        annotations = self._annotations(in_body=True)
        if self._is_punct("="):
            raise unsupported("default value", self._peek())
        return PropDecl(name, ptype, nullable, annotations)

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
            if item_token.kind == "ident" and item_token.value in ("enum", "Vector", "Blob"):
                raise SchemaError(f"list items must be scalar types, not {item_token.value}", item_token.line, item_token.column)
            item = self._scalar(item_token)
            if self._is_punct("?"):
                raise unsupported("nullable list items ('[T?]'); list items are always nullable", self._peek())
            self._punct("]")
            return ListType(item)
        if token.kind == "ident" and token.value == "enum":
            return self._enum()
        if token.kind == "ident" and token.value == "Vector":
            return self._vector()
        if token.kind == "ident" and token.value == "Blob":
            return BlobType()
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
        if token.kind != "number" or not token.value.isdigit():
            raise self._fail(token, "a vector dimension")
        dim = int(token.value)
        if not 1 <= dim <= MAX_VECTOR_DIM:
            raise SchemaError(f"vector dimension must be between 1 and {MAX_VECTOR_DIM}", token.line, token.column)
        self._punct(")")
        return VectorType(dim)
