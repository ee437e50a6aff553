"""The syntax tree of a ``.pg`` source, as :mod:`omnigraph.engine.schema.parser` reads it.

Every node keeps where it was written (1-based line and column) for messages, but positions
take no part in equality: two trees are equal when they say the same thing, which is what the
round trip parse -> :func:`omnigraph.engine.schema.printer.print_schema` -> parse preserves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from omnigraph.engine.schema.types import PropertyType

Number = int | float
"""A numeric literal: an ``int`` when written without a fraction, else a ``float``."""


@dataclass(frozen=True)
class Name:
    """An identifier (or annotation name) and where it was written."""

    value: str
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Range:
    """``low..high``; an omitted bound (or ``*`` as the upper one) is None."""

    low: Number | None
    high: Number | None


@dataclass(frozen=True)
class Arg:
    """One annotation argument: ``kind`` is ``name``, ``string``, ``number`` or ``range``."""

    kind: str
    value: str | Number | Range
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Annotation:
    """``@name`` or ``@name(args)``; ``args`` is None without parentheses."""

    name: Name
    args: tuple[Arg, ...] | None = None


@dataclass(frozen=True)
class PropDecl:
    """``name: type? @annotations``."""

    name: Name
    type: PropertyType
    nullable: bool
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True)
class TypeDecl:
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
