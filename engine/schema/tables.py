"""The checked schema model: :class:`TableDef` (one physical table each), its properties and constraints.

A node table ``node:<Type>`` is ``id`` then the properties in declaration order; an edge table
``edge:<Type>`` is ``id``, ``src``, ``dst`` then the properties. ``id``/``src``/``dst`` are
non-null Utf8.

Constraints and metadata of a type: what a write must satisfy, and what is only kept.

- :class:`Cardinality`: ``@card(min..max)`` on an edge type ``E: A -> B``: every ``A`` node is
  the source of at least ``min`` and at most ``max`` (None = unbounded) ``E`` edges. Default
  ``0..`` (no constraint).
- :class:`RangeRule`: ``@range(p, low..high)``: a non-null numeric value lies in ``[low, high]``
  (an omitted bound is open).
- :class:`CheckRule`: ``@check(p, "regex")``: a non-null String value matches the Python regular
  expression as a whole (:func:`re.fullmatch`).
- :class:`Metadata`: any other annotation (``@description``, ``@instruction``, ``@embed``,
  ``@rename_from`` and unknown ones), kept with its arguments as JSON values; it changes no
  write.

Composite ``@unique(p, q)`` and ``@index(p, q)`` are tuples of member names on
:class:`TableDef`. Nulls are exempt from every value rule.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

import msgspec
import pyarrow as pa

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.schema.parser import quote
from omnigraph.engine.schema.types import PropertyType
from omnigraph.engine.storage.names import PK_METADATA_KEY

Bound = int | float


def _bound(value: Bound | None) -> str:
    return "" if value is None else str(value)


class Cardinality(msgspec.Struct, frozen=True):
    """Bounds on the number of edges of one edge type per source node."""

    min: int = 0
    max: int | None = None

    @property
    def constrains(self) -> bool:
        """Whether any count is refused (``0..`` refuses none)."""
        return self.min > 0 or self.max is not None

    def allows(self, count: int) -> bool:
        """Whether a source node may be the source of ``count`` edges."""
        return count >= self.min and (self.max is None or count <= self.max)

    def describe(self) -> str:
        """``min..max``, with ``*`` for an unbounded maximum."""
        return f"{self.min}..{'*' if self.max is None else self.max}"


class RangeRule(msgspec.Struct, frozen=True):
    """``@range(property, low..high)``."""

    property: str
    low: Bound | None
    high: Bound | None

    def allows(self, value: Bound) -> bool:
        """Whether the non-null ``value`` lies within the bounds (both inclusive)."""
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def describe(self) -> str:
        """The rule as the language writes it: ``@range(p, low..high)``."""
        return f"@range({self.property}, {_bound(self.low)}..{_bound(self.high)})"


class CheckRule(msgspec.Struct, frozen=True, dict=True):
    """``@check(property, pattern)``; ``pattern`` compiled once, on first use."""

    property: str
    pattern: str

    @cached_property
    def _compiled(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    def allows(self, value: str) -> bool:
        """Whether the non-null ``value`` matches the pattern as a whole."""
        return self._compiled.fullmatch(value) is not None

    def describe(self) -> str:
        """The rule as the language writes it: ``@check(p, "pattern")``."""
        return f"@check({self.property}, {quote(self.pattern)})"


class Metadata(msgspec.Struct, frozen=True):
    """A kept annotation: its name, its arguments as JSON values and whether the language knows it.

    ``args`` is None without parentheses; a range is ``{"low": ..., "high": ...}``.
    """

    name: str
    args: tuple[Any, ...] | None = None
    known: bool = True

    def describe(self) -> dict[str, Any]:
        """A JSON-serialisable description: ``{name, args, known}``."""
        return {"name": self.name, "args": None if self.args is None else list(self.args), "known": self.known}


class Property(msgspec.Struct, frozen=True):
    """A declared property with its type, nullability, ``unique``/``index`` flags and metadata.

    ``nullable`` comes from ``?``; ``unique``/``index`` from annotations (``@unique`` on the
    property or a one-member body ``@unique(p)``); ``metadata`` holds the kept annotations
    (:class:`Metadata`), in source order.
    """

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


class TableDef(msgspec.Struct, frozen=True, dict=True):
    """One node or edge type and its physical table.

    ``key`` holds the ``@key`` property names as written (None when the type is unkeyed; always
    None for edges); ``from_type``/``to_type`` are the endpoint node types of an edge (None for
    nodes). ``properties`` include those a node's interfaces (``implements``) inject.
    Constraints (see the module docstring): ``composite_unique`` holds the member tuples
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

    @cached_property
    def _by_name(self) -> dict[str, Property]:
        return {prop.name: prop for prop in self.properties}

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
        """Whether the type declares (or injects) a property ``name``."""
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
