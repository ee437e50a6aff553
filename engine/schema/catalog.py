"""The ``.pg`` schema checker and the :class:`Catalog` of every type of one accepted source.

:func:`check` turns parsed declarations (:mod:`omnigraph.engine.schema.parser`) into checked
:class:`~omnigraph.engine.schema.tables.TableDef` and :class:`InterfaceDef` values;
:meth:`Catalog.from_source` parses and checks a source. Rules (each refusal is a
:class:`~omnigraph.engine.schema.parser.SchemaError` at the offending token):

- type and interface names match ``[A-Z][A-Za-z0-9_]*`` and are unique across nodes, edges and
  interfaces;
- property names match ``[a-z_][A-Za-z0-9_]*``, are unique within their type, and are not
  ``id``, ``src``, ``dst`` or ``_``-prefixed;
- an annotation appears at most once per property and per type header; ``@unique`` is refused
  on list and vector properties; annotations mean what :mod:`omnigraph.engine.schema.annotations`
  says;
- ``node T implements A, B``: each name is a declared interface, named once; the interfaces'
  properties (in ``implements`` order, each in declaration order) come first, then the node's
  own. A property declared again (by another interface or by the node) must have the identical
  type and nullability; its annotations are the union (the same annotation twice must have the
  same arguments). Interfaces hold properties and metadata only;
- ``@key`` (on one property) or ``@key(p, q)`` (in the body): nodes only, at most one per type
  (the later one in source order is refused), members exist, are distinct, non-nullable, and are
  neither lists nor vectors;
- edge endpoints name declared node types (declared anywhere in the source).

Errors are reported in source order of the declarations.

The catalog's equality is semantic: two catalogs are equal when they declare the same types
(with the same properties, keys, endpoints, constraints and metadata) and interfaces, whatever
their comments, whitespace or declaration order. :meth:`Catalog.fingerprint` hashes exactly what
equality compares. The catalog is derived from the accepted source (``_schema.pg`` of a graph),
which is what every program stores and reads.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import msgspec

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.schema.annotations import SchemaWarning, body_annotations, header_annotations, property_annotations
from omnigraph.engine.schema.parser import Annotation, Name, PropDecl, SchemaError, TypeDecl, parse, unsupported
from omnigraph.engine.schema.tables import Metadata, Property, TableDef
from omnigraph.engine.schema.types import UNORDERED_TYPES, BlobType

TYPE_NAME = re.compile(r"[A-Z][A-Za-z0-9_]*\Z")
PROPERTY_NAME = re.compile(r"[a-z_][A-Za-z0-9_]*\Z")
RESERVED_PROPERTY_NAMES = frozenset({"id", "src", "dst"})


class InterfaceDef(msgspec.Struct, frozen=True):
    """A checked interface: the properties it injects, and its kept metadata."""

    name: str
    properties: tuple[Property, ...]
    metadata: tuple[Metadata, ...] = ()
    key: tuple[str, ...] = ()
    """The properties marked ``@key`` (the key of every node that implements it)."""

    def describe(self) -> dict[str, Any]:
        """A JSON-serialisable canonical description: name, key, properties and metadata."""
        return {
            "name": self.name,
            "key": list(self.key),
            "properties": [prop.describe() for prop in self.properties],
            "metadata": [m.describe() for m in self.metadata],
        }


class CheckedSchema(msgspec.Struct, frozen=True):
    """Every table (declaration order), interface (declaration order) and warning of a source."""

    tables: list[TableDef]
    interfaces: list[InterfaceDef]
    warnings: list[SchemaWarning]


def _error(message: str, at: Name) -> SchemaError:
    return SchemaError(message, at.line, at.column)


def check(decls: list[TypeDecl]) -> CheckedSchema:
    """Check ``decls`` (see the module docstring)."""
    node_names = {decl.name.value for decl in decls if decl.kind == "node"}
    interfaces = {decl.name.value: decl for decl in decls if decl.kind == "interface"}
    seen: dict[str, Name] = {}
    warnings: list[SchemaWarning] = []
    tables: list[TableDef] = []
    checked_interfaces: list[InterfaceDef] = []
    for decl in decls:
        _check_type_name(decl.name, seen)
        if decl.kind == "interface":
            checked_interfaces.append(_interface(decl, warnings))
            continue
        if decl.kind == "edge":
            for endpoint in (decl.from_type, decl.to_type):
                assert endpoint is not None
                if endpoint.value in interfaces:
                    raise _error(f"'{endpoint.value}' is an interface; an edge endpoint must be a node type", endpoint)
                if endpoint.value not in node_names:
                    raise _error(f"unknown node type '{endpoint.value}'", endpoint)
        tables.append(_table(decl, _injected(decl, interfaces), warnings))
    return CheckedSchema(tables, checked_interfaces, warnings)


def _check_type_name(name: Name, seen: dict[str, Name]) -> None:
    if not TYPE_NAME.match(name.value):
        raise _error(f"type name '{name.value}' must match [A-Z][A-Za-z0-9_]*", name)
    first = seen.get(name.value)
    if first is not None:
        raise _error(f"duplicate type name '{name.value}' (first declared at {first.line}:{first.column})", name)
    seen[name.value] = name


def _interface(decl: TypeDecl, warnings: list[SchemaWarning]) -> InterfaceDef:
    for annotation in decl.body:
        if annotation.name.value in ("key", "unique", "index", "range", "check", "card"):
            raise unsupported(f"body constraint @{annotation.name.value} in an interface", annotation.name)
    _, metadata = header_annotations("interface", decl.annotations + decl.body, warnings)
    properties = _merged_properties((), decl.properties, f"interface {decl.name.value}")
    key = tuple(p.name.value for p in properties for a in p.annotations if a.name.value == "key")
    return InterfaceDef(decl.name.value, tuple(_property(p, warnings) for p in properties), metadata, key)


def _injected(decl: TypeDecl, interfaces: dict[str, TypeDecl]) -> tuple[PropDecl, ...]:
    """The properties ``decl``'s interfaces inject, merged in ``implements`` order."""
    named: set[str] = set()
    injected: tuple[PropDecl, ...] = ()
    for name in decl.implements:
        interface = interfaces.get(name.value)
        if interface is None:
            raise _error(f"unknown interface '{name.value}'", name)
        if name.value in named:
            raise _error(f"interface '{name.value}' is named twice", name)
        named.add(name.value)
        injected = _merged_properties(injected, interface.properties, f"interface {name.value}")
    return injected


def _merged_properties(first: tuple[PropDecl, ...], more: tuple[PropDecl, ...], where: str) -> tuple[PropDecl, ...]:
    """``first`` then ``more``; a property of ``more`` already in ``first`` is merged into it."""
    merged = {prop.name.value: prop for prop in first}
    own: set[str] = set()
    for prop in more:
        _check_property_name(prop.name)
        if prop.name.value in own:
            raise _error(f"duplicate property '{prop.name.value}'", prop.name)
        own.add(prop.name.value)
        earlier = merged.get(prop.name.value)
        merged[prop.name.value] = prop if earlier is None else _redeclared(earlier, prop, where)
    return tuple(merged.values())


def _redeclared(earlier: PropDecl, again: PropDecl, where: str) -> PropDecl:
    written = f"{again.type}{'?' if again.nullable else ''}"
    expected = f"{earlier.type}{'?' if earlier.nullable else ''}"
    if written != expected:
        raise _error(
            f"property '{again.name.value}' of {where} is {written}, but it is already declared as {expected} "
            f"(at {earlier.name.line}:{earlier.name.column}); a redeclared property must have the identical type",
            again.name,
        )
    annotations: dict[str, Annotation] = {a.name.value: a for a in earlier.annotations}
    for annotation in again.annotations:
        kept = annotations.setdefault(annotation.name.value, annotation)
        if kept.args != annotation.args:
            where_kept = f"{kept.name.line}:{kept.name.column}"
            raise _error(f"annotation '@{annotation.name.value}' differs from the one declared at {where_kept}", annotation.name)
    return PropDecl(earlier.name, earlier.type, earlier.nullable, tuple(annotations.values()))


def _table(decl: TypeDecl, injected: tuple[PropDecl, ...], warnings: list[SchemaWarning]) -> TableDef:
    decls = _merged_properties(injected, decl.properties, f"type {decl.name.value}")
    properties = {prop.name.value: _property(prop, warnings) for prop in decls}
    cardinality, metadata = header_annotations(decl.kind, decl.annotations, warnings)
    rules = body_annotations(decl.kind, decl.body, properties, warnings)
    key = _key(decl, decls, rules.keys, properties)
    composite = []
    for members in rules.unique:
        if len(members) == 1 and members[0] in properties:
            properties[members[0]] = _with(properties[members[0]], unique=True)
        else:
            composite.append(members)
    indexes = []
    for members in rules.indexes:
        if len(members) == 1 and members[0] in properties:
            properties[members[0]] = _with(properties[members[0]], index=True)
        else:
            indexes.append(members)
    return TableDef(
        kind=decl.kind,
        type_name=decl.name.value,
        properties=tuple(properties.values()),
        key=key,
        from_type=decl.from_type.value if decl.from_type else None,
        to_type=decl.to_type.value if decl.to_type else None,
        composite_unique=tuple(composite),
        indexes=tuple(indexes),
        ranges=tuple(rules.ranges),
        checks=tuple(rules.checks),
        cardinality=cardinality,
        implements=tuple(name.value for name in decl.implements),
        metadata=metadata + tuple(rules.metadata),
    )


def _with(prop: Property, *, unique: bool | None = None, index: bool | None = None) -> Property:
    return Property(
        prop.name,
        prop.type,
        prop.nullable,
        unique=prop.unique if unique is None else unique,
        index=prop.index if index is None else index,
        metadata=prop.metadata,
    )


def _check_property_name(name: Name) -> None:
    if name.value in RESERVED_PROPERTY_NAMES or name.value.startswith("_"):
        raise _error(f"property name '{name.value}' is reserved", name)
    if not PROPERTY_NAME.match(name.value):
        raise _error(f"property name '{name.value}' must match [a-z_][A-Za-z0-9_]*", name)


def _property(prop: PropDecl, warnings: list[SchemaWarning]) -> Property:
    flags, metadata = property_annotations(prop.annotations, warnings)
    for flag, refused in (("unique", UNORDERED_TYPES), ("index", BlobType)):
        if flag in flags and isinstance(prop.type, refused):
            at = next(a.name for a in prop.annotations if a.name.value == flag)
            raise _error(f"@{flag} is not allowed on a {prop.type} property", at)
    return Property(
        name=prop.name.value,
        type=prop.type,
        nullable=prop.nullable,
        unique="unique" in flags,
        index="index" in flags,
        metadata=metadata,
    )


def _key(
    decl: TypeDecl, decls: tuple[PropDecl, ...], body_keys: list[tuple[Name, tuple[Name, ...]]], properties: dict[str, Property]
) -> tuple[str, ...] | None:
    """The checked key members of ``decl`` (as written), or None when it has no key."""
    # A property-level @key reports member errors at the annotation itself.
    candidates: list[tuple[Name, tuple[Name, ...]]] = [
        (annotation.name, (Name(prop.name.value, annotation.name.line, annotation.name.column),))
        for prop in decls
        for annotation in prop.annotations
        if annotation.name.value == "key"
    ]
    candidates += body_keys
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
        if isinstance(prop.type, UNORDERED_TYPES):
            raise _error(f"@key property '{member.value}' must not be a {prop.type}", member)
    return tuple(member.value for member in members)


class Catalog:
    """Checked types of a schema, addressed by table key (``node:<Type>`` / ``edge:<Type>``)."""

    def __init__(
        self,
        source: str,
        tables: list[TableDef],
        interfaces: list[InterfaceDef] | None = None,
        warnings: list[SchemaWarning] | None = None,
    ) -> None:
        self._source = source
        self._tables: dict[str, TableDef] = {table.table_key: table for table in sorted(tables, key=lambda t: t.table_key.encode())}
        self._interfaces = {i.name: i for i in sorted(interfaces or [], key=lambda i: i.name.encode())}
        self._warnings = list(warnings or [])

    @classmethod
    def from_source(cls, text: str) -> Catalog:
        """Parse and check ``text``; a refused source raises :class:`SchemaError`."""
        checked = check(parse(text))
        return cls(text, checked.tables, checked.interfaces, checked.warnings)

    @property
    def warnings(self) -> list[SchemaWarning]:
        """What the source was accepted with but should be told (unknown annotations), in source order."""
        return list(self._warnings)

    def interfaces(self) -> list[InterfaceDef]:
        """Every interface, by name (byte order)."""
        return list(self._interfaces.values())

    @property
    def source(self) -> str:
        """The accepted source text, verbatim."""
        return self._source

    def table_keys(self) -> list[str]:
        """Every table key, sorted in byte order."""
        return list(self._tables)

    def tables(self) -> list[TableDef]:
        """Every table, in table-key order."""
        return list(self._tables.values())

    def table(self, table_key: str) -> TableDef:
        """The table with ``table_key``; :class:`BadRequest` if there is none."""
        try:
            return self._tables[table_key]
        except KeyError:
            raise BadRequest(f"unknown table {table_key!r}", {"table_key": table_key}) from None

    def has_node(self, name: str) -> bool:
        """Whether the schema declares a node type ``name``."""
        return f"node:{name}" in self._tables

    def has_edge(self, name: str) -> bool:
        """Whether the schema declares an edge type ``name``."""
        return f"edge:{name}" in self._tables

    def node(self, type_name: str) -> TableDef:
        """The node type ``type_name``; :class:`BadRequest` "unknown node type X" otherwise."""
        table = self._tables.get(f"node:{type_name}")
        if table is None:
            raise BadRequest(f"unknown node type {type_name}", {"type_name": type_name})
        return table

    def edge(self, type_name: str) -> TableDef:
        """The edge type ``type_name``; :class:`BadRequest` "unknown edge type X" otherwise."""
        table = self._tables.get(f"edge:{type_name}")
        if table is None:
            raise BadRequest(f"unknown edge type {type_name}", {"type_name": type_name})
        return table

    @property
    def version_id(self) -> str:
        """The identity of this schema version: the sha256 hex of the exact source text (comments and layout count)."""
        return hashlib.sha256(self.source.encode("utf-8")).hexdigest()

    def fingerprint(self) -> str:
        """sha256 hex of the canonical JSON description of the types (see module docstring)."""
        canonical = json.dumps(self.describe(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def describe(self) -> dict[str, Any]:
        """The JSON-serialisable description of the catalog (what equality compares).

        ``tables`` in table-key order and ``interfaces`` by name.
        """
        return {
            "tables": [table.describe() for table in self._tables.values()],
            "interfaces": [interface.describe() for interface in self._interfaces.values()],
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Catalog):
            return NotImplemented
        return self._tables == other._tables and self._interfaces == other._interfaces

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def __repr__(self) -> str:
        return f"Catalog({', '.join(self._tables)})"
