"""The checked schema model: :class:`Property` and :class:`TableDef` (one physical table each).

A node table ``node:<Type>`` is ``id`` then the properties in declaration order; an edge table
``edge:<Type>`` is ``id``, ``src``, ``dst`` then the properties. ``id``/``src``/``dst`` are
non-null Utf8.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.schema.constraints import Cardinality, CheckRule, Metadata, RangeRule
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
