"""[omnigraph.engine.schema.catalog]
The checked schema model: :class:`Property` and :class:`TableDef` (one physical table each).

A node table ``node:<Type>`` is ``id`` then the properties in declaration order; an edge table
``edge:<Type>`` is ``id``, ``src``, ``dst`` then the properties. ``id``/``src``/``dst`` are
non-null Utf8.


[omnigraph.engine.schema.catalog]
The catalog: every node and edge type of one accepted schema source.

Equality is semantic: two catalogs are equal when they declare the same types (with the same
properties, keys, endpoints, constraints and metadata) and interfaces, whatever their comments,
whitespace or declaration order. :meth:`Catalog.fingerprint` hashes exactly what equality
compares. The catalog is derived from the accepted source (``_schema.pg`` of a graph), which is
what every program stores and reads.

"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.schema.annotations import SchemaWarning
from omnigraph.engine.schema.checker import InterfaceDef, check
from omnigraph.engine.schema.constraints import Cardinality, CheckRule, Metadata, RangeRule
from omnigraph.engine.schema.parser import parse
from omnigraph.engine.schema.types import PropertyType
from omnigraph.engine.storage.names import PK_METADATA_KEY


@dataclass(frozen=True)
class Property:
    """A declared property: ``nullable`` from ``?``; ``unique``/``index`` from annotations
    (``@unique`` on the property or a one-member body ``@unique(p)``); ``metadata`` the kept
    annotations (:class:`omnigraph.engine.schema.constraints.Metadata`), in source order."""

    name: str
    type: PropertyType
    nullable: bool
    unique: bool = False
    index: bool = False
    metadata: tuple[Metadata, ...] = ()

    def arrow_field(self) -> pa.Field:
        """The Arrow field of this property's column (no metadata)."""
        return pa.field(self.name, self.type.arrow_type(), nullable=self.nullable)

    def describe(self) -> dict[str, Any]:
        """A JSON-serialisable canonical description (for fingerprints)."""
        return {
            "name": self.name,
            "type": self.type.describe(),
            "nullable": self.nullable,
            "unique": self.unique,
            "index": self.index,
            "metadata": [m.describe() for m in self.metadata],
        }


@dataclass(frozen=True)
class TableDef:
    """One node or edge type and its physical table.

    ``key`` holds the ``@key`` property names as written (None when the type is unkeyed; always
    None for edges); ``from_type``/``to_type`` are the endpoint node types of an edge (None for
    nodes). ``properties`` include those a node's interfaces (``implements``) inject.
    Constraints (:mod:`omnigraph.engine.schema.constraints`): ``composite_unique`` holds the member tuples
    of body ``@unique(p, q)`` with two or more members or naming ``src``/``dst`` (one-member
    forms set :attr:`Property.unique`), ``indexes`` the body ``@index(...)`` hints, ``ranges``
    and ``checks`` the value rules, ``cardinality`` an edge's ``@card``; ``metadata`` the kept
    type-level annotations.
    """

    kind: str
    type_name: str
    properties: tuple[Property, ...]
    key: tuple[str, ...] | None = None
    from_type: str | None = None
    to_type: str | None = None
    composite_unique: tuple[tuple[str, ...], ...] = ()
    indexes: tuple[tuple[str, ...], ...] = ()
    ranges: tuple[RangeRule, ...] = ()
    checks: tuple[CheckRule, ...] = ()
    cardinality: Cardinality = Cardinality()
    implements: tuple[str, ...] = ()
    metadata: tuple[Metadata, ...] = ()
    _by_name: dict[str, Property] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {prop.name: prop for prop in self.properties})

    @property
    def table_key(self) -> str:
        """``node:<Type>`` or ``edge:<Type>``."""
        return f"{self.kind}:{self.type_name}"

    @property
    def unique(self) -> tuple[str, ...]:
        """Names of the ``@unique`` properties, in declaration order."""
        return tuple(prop.name for prop in self.properties if prop.unique)

    @property
    def has_value_rules(self) -> bool:
        """Whether rows must be checked against ``@range`` or ``@check`` rules."""
        return bool(self.ranges or self.checks)

    @property
    def system_columns(self) -> tuple[str, ...]:
        """``("id",)`` for nodes, ``("id", "src", "dst")`` for edges."""
        return ("id",) if self.kind == "node" else ("id", "src", "dst")

    def has_property(self, name: str) -> bool:
        return name in self._by_name

    def arrow_schema(self, with_pk: bool) -> pa.Schema:
        """The physical Arrow schema; ``with_pk`` marks ``id`` (only) as the Lance primary key.

        Without ``with_pk`` no field carries metadata; the schema itself never does.
        """
        metadata = {PK_METADATA_KEY: "true"} if with_pk else None
        fields = [pa.field("id", pa.utf8(), nullable=False, metadata=metadata)]
        fields += [pa.field(name, pa.utf8(), nullable=False) for name in self.system_columns[1:]]
        fields += [prop.arrow_field() for prop in self.properties]
        return pa.schema(fields)

    def describe(self) -> dict[str, Any]:
        """A JSON-serialisable canonical description (for fingerprints)."""
        return {
            "table_key": self.table_key,
            "from_type": self.from_type,
            "to_type": self.to_type,
            "key": list(self.key) if self.key is not None else None,
            "properties": [prop.describe() for prop in self.properties],
            "implements": list(self.implements),
            "unique": [list(members) for members in self.composite_unique],
            "indexes": [list(members) for members in self.indexes],
            "ranges": [{"property": r.property, "low": r.low, "high": r.high} for r in self.ranges],
            "checks": [{"property": c.property, "pattern": c.pattern} for c in self.checks],
            "cardinality": {"min": self.cardinality.min, "max": self.cardinality.max},
            "metadata": [m.describe() for m in self.metadata],
        }

    # Defined last: inside the class body this name shadows the ``property`` decorator.
    def property(self, name: str) -> Property:
        """The declared property ``name``; :class:`BadRequest` if the type has none."""
        try:
            return self._by_name[name]
        except KeyError:
            raise BadRequest(
                f"{self.kind} type {self.type_name} has no property {name!r}",
                {"type_name": self.type_name, "property": name},
            ) from None


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
        return f"node:{name}" in self._tables

    def has_edge(self, name: str) -> bool:
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

    def fingerprint(self) -> str:
        """sha256 hex of the canonical JSON description of the types (see module docstring)."""
        canonical = json.dumps(self.describe(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def describe(self) -> dict[str, Any]:
        """The JSON-serialisable description of the catalog: ``tables`` in table-key order and
        ``interfaces`` by name (what equality compares)."""
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
