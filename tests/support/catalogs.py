"""Schemas that several suites parse records against."""

from __future__ import annotations

from omnigraph.engine.schema.catalog import Catalog

EVERY_TYPE = Catalog.from_source(
    """
    node All {
        s: String @key
        b: Bool?  i32: I32?  i64: I64?  u32: U32?  u64: U64?  f32: F32?  f64: F64?
        d: Date?  t: DateTime?  e: enum(red, green)?  v: Vector(3)?
        ls: [String]?  lb: [Bool]?  li: [I64]?  lf: [F32]?  ld: [Date]?  lt: [DateTime]?
    }
    node Other { n: I32  @key(n) }
    edge Link: All -> Other { weight: F64?  day: Date?  code: String? @unique }
    """
)
"""Every property type, a composite-free ``@key(n)`` and a ``@unique`` edge property."""
