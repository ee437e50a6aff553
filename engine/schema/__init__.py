"""The ``.pg`` schema language: parse and check a source into a :class:`Catalog`.

``Catalog.from_source(text)`` is the entry point; every refusal is a :class:`SchemaError`
(a ``BadRequest``) carrying the 1-based ``line`` and ``column``.
"""

from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.errors import SchemaError
from omnigraph.engine.schema.tables import PK_METADATA_KEY, Property, TableDef
from omnigraph.engine.schema.types import BlobType, EnumType, ListType, PropertyType, ScalarType, VectorType

__all__ = [
    "PK_METADATA_KEY",
    "BlobType",
    "Catalog",
    "EnumType",
    "ListType",
    "Property",
    "PropertyType",
    "ScalarType",
    "SchemaError",
    "TableDef",
    "VectorType",
]
