"""The catalog: every node and edge type of one accepted schema source.

Equality is semantic: two catalogs are equal when they declare the same types (with the same
properties, keys, endpoints, constraints and metadata) and interfaces, whatever their comments,
whitespace or declaration order. :meth:`Catalog.fingerprint` hashes exactly what equality
compares. The catalog is derived from the accepted source (``_schema.pg`` of a graph), which is
what every program stores and reads.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.schema.annotations import SchemaWarning
from omnigraph.engine.schema.checker import InterfaceDef, check
from omnigraph.engine.schema.parser import parse
from omnigraph.engine.schema.tables import TableDef


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
