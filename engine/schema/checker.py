"""Semantics of the ``.pg`` schema language: declarations to checked :class:`TableDef` values.

Rules (each refusal is a :class:`SchemaError` at the offending token):

- type names match ``[A-Z][A-Za-z0-9_]*`` and are unique across nodes and edges;
- property names match ``[a-z_][A-Za-z0-9_]*``, are unique within their type, and are not
  ``id``, ``src``, ``dst`` or ``_``-prefixed;
- an annotation appears at most once per property; ``@unique`` is refused on list and vector
  properties;
- ``@key`` (on one property) or ``@key(p, q)`` (in the body): nodes only, at most one per type
  (the later one in source order is refused), members exist, are distinct, non-nullable, and are
  neither lists nor vectors;
- edge endpoints name declared node types (declared anywhere in the source).

Errors are reported in source order of the declarations.
"""

from __future__ import annotations

import re

from engine.schema.errors import SchemaError
from engine.schema.parser import Name, PropDecl, TypeDecl
from engine.schema.tables import Property, TableDef
from engine.schema.types import ListType, VectorType

TYPE_NAME = re.compile(r"[A-Z][A-Za-z0-9_]*\Z")
PROPERTY_NAME = re.compile(r"[a-z_][A-Za-z0-9_]*\Z")
RESERVED_PROPERTY_NAMES = frozenset({"id", "src", "dst"})


def _error(message: str, at: Name) -> SchemaError:
    return SchemaError(message, at.line, at.column)


def check(decls: list[TypeDecl]) -> list[TableDef]:
    """One :class:`TableDef` per declaration, in declaration order."""
    node_names = {decl.name.value for decl in decls if decl.kind == "node"}
    seen: dict[str, Name] = {}
    tables: list[TableDef] = []
    for decl in decls:
        _check_type_name(decl.name, seen)
        if decl.kind == "edge":
            for endpoint in (decl.from_type, decl.to_type):
                assert endpoint is not None
                if endpoint.value not in node_names:
                    raise _error(f"unknown node type '{endpoint.value}'", endpoint)
        tables.append(_table(decl))
    return tables


def _check_type_name(name: Name, seen: dict[str, Name]) -> None:
    if not TYPE_NAME.match(name.value):
        raise _error(f"type name '{name.value}' must match [A-Z][A-Za-z0-9_]*", name)
    first = seen.get(name.value)
    if first is not None:
        raise _error(f"duplicate type name '{name.value}' (first declared at {first.line}:{first.column})", name)
    seen[name.value] = name


def _table(decl: TypeDecl) -> TableDef:
    properties: dict[str, Property] = {}
    for prop in decl.properties:
        _check_property_name(prop.name, properties)
        properties[prop.name.value] = _property(prop)
    key = _key(decl, properties)
    return TableDef(
        kind=decl.kind,
        type_name=decl.name.value,
        properties=tuple(properties.values()),
        key=key,
        from_type=decl.from_type.value if decl.from_type else None,
        to_type=decl.to_type.value if decl.to_type else None,
    )


def _check_property_name(name: Name, declared: dict[str, Property]) -> None:
    if name.value in RESERVED_PROPERTY_NAMES or name.value.startswith("_"):
        raise _error(f"property name '{name.value}' is reserved", name)
    if not PROPERTY_NAME.match(name.value):
        raise _error(f"property name '{name.value}' must match [a-z_][A-Za-z0-9_]*", name)
    if name.value in declared:
        raise _error(f"duplicate property '{name.value}'", name)


def _property(prop: PropDecl) -> Property:
    names: set[str] = set()
    for annotation in prop.annotations:
        if annotation.value in names:
            raise _error(f"duplicate annotation '@{annotation.value}'", annotation)
        names.add(annotation.value)
        if annotation.value == "unique" and isinstance(prop.type, (ListType, VectorType)):
            raise _error(f"@unique is not allowed on a {prop.type} property", annotation)
    return Property(
        name=prop.name.value,
        type=prop.type,
        nullable=prop.nullable,
        unique="unique" in names,
        index="index" in names,
    )


def _key(decl: TypeDecl, properties: dict[str, Property]) -> tuple[str, ...] | None:
    """The checked key members of ``decl`` (as written), or None when it has no key."""
    # A property-level @key reports member errors at the annotation itself.
    candidates: list[tuple[Name, tuple[Name, ...]]] = [
        (annotation, (Name(prop.name.value, annotation.line, annotation.column),))
        for prop in decl.properties
        for annotation in prop.annotations
        if annotation.value == "key"
    ]
    candidates += [(key_decl.at, key_decl.members) for key_decl in decl.keys]
    if not candidates:
        return None
    candidates.sort(key=lambda item: (item[0].line, item[0].column))
    at, members = candidates[0]
    if decl.kind == "edge":
        raise _error("@key is only allowed on node types", at)
    if len(candidates) > 1:
        second = candidates[1][0]
        raise _error(f"type '{decl.name.value}' already has a @key (at {at.line}:{at.column})", second)
    return _key_members(members, properties)


def _key_members(members: tuple[Name, ...], properties: dict[str, Property]) -> tuple[str, ...]:
    seen: set[str] = set()
    for member in members:
        prop = properties.get(member.value)
        if prop is None:
            raise _error(f"@key names unknown property '{member.value}'", member)
        if member.value in seen:
            raise _error(f"@key names property '{member.value}' twice", member)
        seen.add(member.value)
        if prop.nullable:
            raise _error(f"@key property '{member.value}' must not be nullable", member)
        if isinstance(prop.type, (ListType, VectorType)):
            raise _error(f"@key property '{member.value}' must not be a {prop.type}", member)
    return tuple(member.value for member in members)
