"""Canonical ``.pg`` text of a syntax tree: ``parse(print_schema(decls)) == decls``.

One declaration per block, in the given order; header annotations on the header line, one
property per line with its annotations, then the body-level annotations one per line. Strings
are written with the lexer's escapes, integers in decimal, floats in their shortest round-trip
positional form (never an exponent, always a fraction), open range
bounds as nothing (``1..``). The output is deterministic and holds no comments.
"""

from __future__ import annotations

import numpy as np

from omnigraph.engine.schema.parser import starts_body_member
from omnigraph.engine.schema.syntax import Annotation, Arg, Number, PropDecl, Range, TypeDecl

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}


def quote(text: str) -> str:
    """``text`` as a string literal of the language."""
    return '"' + "".join(_ESCAPES.get(char, char) for char in text) + '"'


def _number(value: Number) -> str:
    if isinstance(value, int):
        return str(value)
    return str(np.format_float_positional(value, unique=True, trim="0"))


def _arg(arg: Arg) -> str:
    if arg.kind == "string":
        assert isinstance(arg.value, str)
        return quote(arg.value)
    if arg.kind == "range":
        assert isinstance(arg.value, Range)
        low = "" if arg.value.low is None else _number(arg.value.low)
        high = "" if arg.value.high is None else _number(arg.value.high)
        return f"{low}..{high}"
    if arg.kind == "number":
        assert isinstance(arg.value, (int, float))
        return _number(arg.value)
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
