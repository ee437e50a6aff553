"""The ``.pg`` schema language's syntax: tokens, syntax tree, parser, printer and error.

Every refusal of a ``.pg`` source is a :class:`SchemaError`, a ``BadRequest`` that always carries
a 1-based source position. :data:`PG` is the language's dialect of the scanner both languages
share (:mod:`omnigraph.engine.lexer`); :func:`tokenize` reads a source with it.

:func:`parse` reads tokens into declarations. Grammar (commas between members are optional;
whitespace and newlines separate)::

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
are checked by :mod:`omnigraph.engine.schema.catalog`). Syntax that other graph schema languages
use and this one does not is refused as ``unsupported schema feature: <name>`` at its position.

Every node of the syntax tree keeps where it was written (1-based line and column) for
messages, but positions take no part in equality: two trees are equal when they say the same
thing, which is what the round trip parse -> :func:`print_schema` -> parse preserves.

:func:`print_schema` writes the canonical ``.pg`` text of a syntax tree:
``parse(print_schema(decls)) == decls``. One declaration per block, in the given order; header
annotations on the header line, one property per line with its annotations, then the body-level
annotations one per line. Strings are written with the lexer's escapes, integers in decimal,
floats in their shortest round-trip positional form (never an exponent, always a fraction),
open range bounds as nothing (``1..``). The output is deterministic and holds no comments.
"""

from __future__ import annotations

import re

import msgspec
import numpy as np

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.lexer import Dialect, Refusal, Token
from omnigraph.engine.lexer import tokenize as scan
from omnigraph.engine.schema.types import SCALAR_ARROW_TYPES, BlobType, EnumType, ListType, PropertyType, ScalarType, VectorType


class SchemaError(BadRequest):
    """A refused ``.pg`` source.

    The message reads ``schema error at LINE:COLUMN: ...`` and ``details`` holds
    ``{"line": LINE, "column": COLUMN}``; both are 1-based, columns count characters.
    """

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"schema error at {line}:{column}: {message}", {"line": line, "column": column})
        self.line = line
        self.column = column


_PG_TOKENS = re.compile(
    r"(?P<annotation>@[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<punct>->|\.\.|[{}()\[\]:,?*=])"
    r"|(?P<number>-?[0-9]+(?:\.[0-9]+)?)"
)
"""The ``.pg`` tokens besides strings: ``annotation`` (``@`` then a name; its value is the name),
``ident``, ``punct`` (``{ } ( ) [ ] : , ? * =``, ``->``, ``..``) and ``number`` (an optional
``-``, digits and an optional fraction, so ``1..5`` is ``1``, ``..``, ``5``; its value is the
text as written)."""
_PG_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}


def _read_pg_string(source: str, start: int, line: int, column: int) -> tuple[str, int]:
    r"""The decoded ``.pg`` string whose opening quote is at ``start``, and the index after its closing quote.

    Escapes are ``\"``, ``\\``, ``\n`` and ``\t``; any other escape, a raw line break or a missing
    closing quote is refused.
    """
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
            if escaped not in _PG_ESCAPES:
                raise SchemaError(
                    f"unsupported escape '\\{escaped}' in a string (use \\\", \\\\, \\n or \\t)",
                    line,
                    column + (pos - start),
                )
            chars.append(_PG_ESCAPES[escaped])
            pos += 2
            continue
        chars.append(char)
        pos += 1
    raise SchemaError("unterminated string", line, column)


def _pg_value(kind: str, text: str, line: int, column: int) -> tuple[str, str]:
    return kind, text[1:] if kind == "annotation" else text


def _refuse_pg(refusal: Refusal, text: str, line: int, column: int) -> SchemaError:
    if refusal == "unterminated_comment":
        return SchemaError("unterminated block comment", line, column)
    return SchemaError(f"unexpected character {text!r}", line, column)


PG = Dialect(_PG_TOKENS, _read_pg_string, _pg_value, _refuse_pg)
"""The ``.pg`` schema language's tokens (:mod:`omnigraph.engine.lexer`)."""


def tokenize(source: str) -> list[Token]:
    """All tokens of a ``.pg`` ``source``, ending with ``eof``.

    Raises:
        SchemaError: a character outside the language, an unterminated block comment or string,
            or a bad escape, at its position.
    """
    return scan(source, PG)


Number = int | float
"""A numeric literal: an ``int`` when written without a fraction, else a ``float``."""


class Name(msgspec.Struct, frozen=True):
    """An identifier (or annotation name) and where it was written; equal names are equal wherever written."""

    value: str
    line: int = 0
    column: int = 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Name) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


class Range(msgspec.Struct, frozen=True):
    """``low..high``; an omitted bound (or ``*`` as the upper one) is None."""

    low: Number | None
    high: Number | None


class Arg(msgspec.Struct, frozen=True):
    """One annotation argument: ``kind`` is ``name``, ``string``, ``number`` or ``range``."""

    kind: str
    value: str | Number | Range
    line: int = 0
    column: int = 0

    def __eq__(self, other: object) -> bool:
        """Equal arguments are equal wherever written."""
        return isinstance(other, Arg) and (other.kind, other.value) == (self.kind, self.value)

    def __hash__(self) -> int:
        return hash((self.kind, self.value))


class Annotation(msgspec.Struct, frozen=True):
    """``@name`` or ``@name(args)``; ``args`` is None without parentheses."""

    name: Name
    args: tuple[Arg, ...] | None = None


class PropDecl(msgspec.Struct, frozen=True):
    """``name: type? @annotations``."""

    name: Name
    type: PropertyType
    nullable: bool
    annotations: tuple[Annotation, ...] = ()


class TypeDecl(msgspec.Struct, frozen=True):
    """A ``node``, ``edge`` or ``interface`` declaration.

    ``from_type``/``to_type`` are set for edges only, ``implements`` for nodes only;
    ``annotations`` are the ones written after the header, ``body`` the body-level annotations
    (``@key(...)``, ``@unique(...)``, ``@range(...)``, ...) in source order.
    """

    kind: str
    name: Name
    from_type: Name | None = None
    to_type: Name | None = None
    implements: tuple[Name, ...] = ()
    annotations: tuple[Annotation, ...] = ()
    properties: tuple[PropDecl, ...] = ()
    body: tuple[Annotation, ...] = ()


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


def _parse_number(token: Token) -> Number:
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
            return _parse_number(token)
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


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}


def quote(text: str) -> str:
    """``text`` as a string literal of the language."""
    return '"' + "".join(_ESCAPES.get(char, char) for char in text) + '"'


def _number_text(value: Number) -> str:
    if isinstance(value, int):
        return str(value)
    return str(np.format_float_positional(value, unique=True, trim="0"))


def _arg(arg: Arg) -> str:
    if arg.kind == "string":
        assert isinstance(arg.value, str)
        return quote(arg.value)
    if arg.kind == "range":
        assert isinstance(arg.value, Range)
        low = "" if arg.value.low is None else _number_text(arg.value.low)
        high = "" if arg.value.high is None else _number_text(arg.value.high)
        return f"{low}..{high}"
    if arg.kind == "number":
        assert isinstance(arg.value, (int, float))
        return _number_text(arg.value)
    return str(arg.value)


def print_annotation(annotation: Annotation) -> str:
    """``@name`` or ``@name(arg, ...)``."""
    if annotation.args is None:
        return f"@{annotation.name.value}"
    return f"@{annotation.name.value}({', '.join(_arg(arg) for arg in annotation.args)})"


def _annotations(annotations: tuple[Annotation, ...]) -> str:
    return "".join(f" {print_annotation(a)}" for a in annotations)


def _property(prop: PropDecl) -> str:
    return f"    {prop.name.value}: {prop.type.describe()}{'?' if prop.nullable else ''}{_annotations(prop.annotations)}"


def _header(decl: TypeDecl) -> str:
    if decl.kind == "edge":
        assert decl.from_type is not None and decl.to_type is not None
        header = f"edge {decl.name.value}: {decl.from_type.value} -> {decl.to_type.value}"
    else:
        header = f"{decl.kind} {decl.name.value}"
        if decl.implements:
            header += " implements " + ", ".join(name.value for name in decl.implements)
    return header + _annotations(decl.annotations)


def print_decl(decl: TypeDecl) -> str:
    """One declaration; an edge with neither properties nor body annotations has no body."""
    header = _header(decl)
    if decl.kind == "edge" and not decl.properties and not decl.body:
        return header
    lines = [_property(prop) for prop in decl.properties]
    if lines and decl.body and not starts_body_member(decl.body[0]):
        lines[-1] += ","  # or the parser would read the annotation as the last property's
    lines += [f"    {print_annotation(a)}" for a in decl.body]
    if not lines:
        return header + " {}"
    return header + " {\n" + "\n".join(lines) + "\n}"


def print_schema(decls: list[TypeDecl]) -> str:
    """The whole source: declarations separated by blank lines, ending with a newline."""
    return "".join(print_decl(decl) + "\n\n" for decl in decls).removesuffix("\n")
