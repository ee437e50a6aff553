"""What each annotation of the ``.pg`` language means where it is written.

- On a property: ``@key``, ``@unique``, ``@index`` (no arguments); anything else is metadata.
- After a type's header: ``@card(min..max)`` (edges only); anything else is metadata.
- In a body: ``@key(p, ...)`` (nodes only), ``@unique(p, ...)`` and ``@index(p, ...)`` (edges may
  name ``src``/``dst``), ``@range(p, low..high)``, ``@check(p, "regex")``; anything else is
  type-level metadata.

Metadata is kept (:class:`omnigraph.engine.schema.tables.Metadata`): the known names
(:data:`KNOWN_METADATA`) have their arguments checked; any other name is kept as written and
reported by a :class:`SchemaWarning` that names the nearest known annotation when one is close
(``@uniq``: did you mean ``@unique``?). Every refusal is a :class:`SchemaError` at the offending
annotation or argument.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

import msgspec

from omnigraph.engine.schema.parser import Annotation, Arg, Name, Range, SchemaError
from omnigraph.engine.schema.tables import Cardinality, CheckRule, Metadata, Property, RangeRule
from omnigraph.engine.schema.types import FLOAT_SCALARS, INTEGER_RANGES, UNORDERED_TYPES, BlobType, ScalarType

KNOWN_METADATA = ("description", "instruction", "embed", "rename_from", "default")
"""Metadata annotations the language knows: one string argument (``@embed`` also takes a name;
``@default`` takes one literal: a string, a number, ``true`` or ``false``)."""
CONSTRAINTS = ("key", "unique", "index", "range", "check", "card")
NUMERIC_SCALARS = frozenset(INTEGER_RANGES) | FLOAT_SCALARS
EDGE_SYSTEM_MEMBERS = ("src", "dst")


class SchemaWarning(msgspec.Struct, frozen=True):
    """Something accepted that the author should know about (an unknown annotation)."""

    message: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"schema warning at {self.line}:{self.column}: {self.message}"


@dataclass
class BodyRules:
    """The constraints of one type's body annotations, as checked so far."""

    keys: list[tuple[Name, tuple[Name, ...]]]
    unique: list[tuple[str, ...]]
    indexes: list[tuple[str, ...]]
    ranges: list[RangeRule]
    checks: list[CheckRule]
    metadata: list[Metadata]


def _error(message: str, at: Name | Arg) -> SchemaError:
    return SchemaError(message, at.line, at.column)


def _json_arg(arg: Arg) -> Any:
    if isinstance(arg.value, Range):
        return {"low": arg.value.low, "high": arg.value.high}
    return arg.value


def _nearest(name: str) -> str:
    """``; did you mean '@unique'?`` for the known annotation nearest to ``name``, or nothing when none is near."""
    near = difflib.get_close_matches(name, sorted(set(KNOWN_METADATA) | set(CONSTRAINTS)), n=1, cutoff=0.6)
    return f"; did you mean '@{near[0]}'?" if near else ""


def metadata(annotation: Annotation, warnings: list[SchemaWarning]) -> Metadata:
    """The kept form of a non-constraint annotation; an unknown name adds a warning."""
    name = annotation.name
    args = None if annotation.args is None else tuple(_json_arg(arg) for arg in annotation.args)
    if name.value not in KNOWN_METADATA:
        warnings.append(
            SchemaWarning(
                f"unknown annotation '@{name.value}' is kept as metadata and not enforced{_nearest(name.value)}", name.line, name.column
            )
        )
        return Metadata(name.value, args, known=False)
    kinds = {"embed": ("string", "name"), "default": ("string", "number", "name")}.get(name.value, ("string",))
    given = annotation.args or ()
    literal = name.value != "default" or not given or given[0].kind != "name" or given[0].value in ("true", "false")
    if len(given) != 1 or given[0].kind not in kinds or not literal:
        at: Name | Arg = given[0] if given else name
        wanted = {"embed": "a string or a property name", "default": "a string, a number, true or false"}.get(name.value, "a string")
        raise _error(f'@{name.value} takes one argument, {wanted}: @{name.value}("...")', at)
    if name.value == "default" and given[0].kind == "name":
        return Metadata(name.value, (given[0].value == "true",))
    return Metadata(name.value, args)


def _distinct(annotations: tuple[Annotation, ...]) -> set[str]:
    """The names of ``annotations``; the second of two with one name is refused."""
    seen: set[str] = set()
    for annotation in annotations:
        if annotation.name.value in seen:
            raise _error(f"duplicate annotation '@{annotation.name.value}'", annotation.name)
        seen.add(annotation.name.value)
    return seen


def property_annotations(annotations: tuple[Annotation, ...], warnings: list[SchemaWarning]) -> tuple[set[str], tuple[Metadata, ...]]:
    """The flags (``key``/``unique``/``index``) and kept metadata of one property's annotations."""
    seen = _distinct(annotations)
    kept: list[Metadata] = []
    for annotation in annotations:
        name = annotation.name
        if name.value in ("key", "unique", "index"):
            continue
        if name.value == "card":
            raise _error("@card belongs after an edge type's header: edge E: A -> B @card(0..1)", name)
        kept.append(metadata(annotation, warnings))
    return {flag for flag in seen if flag in ("key", "unique", "index")}, tuple(kept)


def header_annotations(
    kind: str, annotations: tuple[Annotation, ...], warnings: list[SchemaWarning]
) -> tuple[Cardinality, tuple[Metadata, ...]]:
    """The cardinality and kept metadata written after a type's header."""
    cardinality = Cardinality()
    _distinct(annotations)
    kept: list[Metadata] = []
    for annotation in annotations:
        name = annotation.name
        if name.value == "card":
            if kind != "edge":
                raise _error("@card is only allowed on edge types", name)
            cardinality = _cardinality(annotation)
        elif name.value in CONSTRAINTS:
            raise _error(f"@{name.value} belongs on a property or in the body of the type", name)
        else:
            kept.append(metadata(annotation, warnings))
    return cardinality, tuple(kept)


def _cardinality(annotation: Annotation) -> Cardinality:
    args = annotation.args or ()
    if len(args) != 1 or args[0].kind != "range":
        raise _error("@card takes one range: @card(min..max) or @card(min..)", args[0] if args else annotation.name)
    bounds = args[0].value
    assert isinstance(bounds, Range)
    for bound in (bounds.low, bounds.high):
        if bound is not None and (not isinstance(bound, int) or bound < 0):
            raise _error("@card bounds are whole numbers of at least 0", args[0])
    if bounds.low is None:
        raise _error("@card needs a minimum: @card(0..max)", args[0])
    if bounds.high is not None and bounds.high < bounds.low:
        raise _error(f"@card minimum {bounds.low} is above its maximum {bounds.high}", args[0])
    return Cardinality(int(bounds.low), None if bounds.high is None else int(bounds.high))


def _member_names(annotation: Annotation, least: int) -> tuple[Name, ...]:
    args = annotation.args or ()
    if len(args) < least or any(arg.kind != "name" for arg in args):
        at: Name | Arg = next((arg for arg in args if arg.kind != "name"), annotation.name)
        raise _error(f"@{annotation.name.value} takes property names: @{annotation.name.value}(p, q)", at)
    return tuple(Name(str(arg.value), arg.line, arg.column) for arg in args)


def _members(annotation: Annotation, kind: str, properties: dict[str, Property], allow_collections: bool) -> tuple[str, ...]:
    """The checked members of a body ``@unique``/``@index``.

    Members are declared properties (an edge may name ``src``/``dst``), distinct, never a Blob,
    and (for ``@unique``) neither lists nor vectors.
    """
    seen: list[str] = []
    for member in _member_names(annotation, 1):
        system = kind == "edge" and member.value in EDGE_SYSTEM_MEMBERS
        prop = properties.get(member.value)
        if prop is None and not system:
            raise _error(f"@{annotation.name.value} names unknown property '{member.value}'", member)
        if member.value in seen:
            raise _error(f"@{annotation.name.value} names '{member.value}' twice", member)
        refused = BlobType if allow_collections else UNORDERED_TYPES
        if prop is not None and isinstance(prop.type, refused):
            raise _error(f"@{annotation.name.value} is not allowed on a {prop.type} property", member)
        seen.append(member.value)
    return tuple(seen)


def _value_rule_property(annotation: Annotation, properties: dict[str, Property]) -> tuple[Property, Arg]:
    args = annotation.args or ()
    example = "@range(p, 0..100)" if annotation.name.value == "range" else '@check(p, "[a-z]+")'
    if len(args) != 2 or args[0].kind != "name":
        second = "range" if annotation.name.value == "range" else "string"
        raise _error(f"@{annotation.name.value} takes a property name and a {second}: {example}", args[0] if args else annotation.name)
    prop = properties.get(str(args[0].value))
    if prop is None:
        raise _error(f"@{annotation.name.value} names unknown property '{args[0].value}'", args[0])
    return prop, args[1]


def _range(annotation: Annotation, properties: dict[str, Property]) -> RangeRule:
    prop, arg = _value_rule_property(annotation, properties)
    if not (isinstance(prop.type, ScalarType) and prop.type.name in NUMERIC_SCALARS):
        raise _error(f"@range needs a numeric property; '{prop.name}' is {prop.type}", annotation.name)
    if arg.kind != "range":
        raise _error("@range takes a range as its second argument: low..high, low.. or ..high", arg)
    bounds = arg.value
    assert isinstance(bounds, Range)
    if bounds.low is None and bounds.high is None:
        raise _error("@range needs at least one bound", arg)
    if bounds.low is not None and bounds.high is not None and bounds.low > bounds.high:
        raise _error(f"@range low bound {bounds.low} is above its high bound {bounds.high}", arg)
    return RangeRule(prop.name, bounds.low, bounds.high)


def _check(annotation: Annotation, properties: dict[str, Property]) -> CheckRule:
    prop, arg = _value_rule_property(annotation, properties)
    if prop.type != ScalarType("String"):
        raise _error(f"@check needs a String property; '{prop.name}' is {prop.type}", annotation.name)
    if arg.kind != "string":
        raise _error('@check takes a regular expression string as its second argument: @check(p, "[a-z]+")', arg)
    pattern = str(arg.value)
    try:
        re.compile(pattern)
    except re.error as error:
        raise _error(f"@check pattern is not a valid regular expression: {error}", arg) from None
    return CheckRule(prop.name, pattern)


def body_annotations(kind: str, body: tuple[Annotation, ...], properties: dict[str, Property], warnings: list[SchemaWarning]) -> BodyRules:
    """The constraints and kept metadata of a type's body-level annotations."""
    rules = BodyRules([], [], [], [], [], [])
    for annotation in body:
        name = annotation.name.value
        if name == "key":
            rules.keys.append((annotation.name, _member_names(annotation, 1)))
        elif name in ("unique", "index"):
            members = _members(annotation, kind, properties, allow_collections=name == "index")
            target = rules.unique if name == "unique" else rules.indexes
            if any(set(members) == set(other) for other in target):
                raise _error(f"duplicate @{name}({', '.join(members)})", annotation.name)
            target.append(members)
        elif name == "range":
            rules.ranges.append(_range(annotation, properties))
        elif name == "check":
            rules.checks.append(_check(annotation, properties))
        elif name == "card":
            raise _error("@card belongs after an edge type's header: edge E: A -> B @card(0..1)", annotation.name)
        else:
            rules.metadata.append(metadata(annotation, warnings))
    return rules
