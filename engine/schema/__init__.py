"""The ``.pg`` schema language: parse and check a source into a catalog of node and edge types.

``Catalog.from_source(text)`` (:class:`~omnigraph.engine.schema.catalog.Catalog`) is the entry
point; every refusal is a :class:`~omnigraph.engine.schema.parser.SchemaError` (a
``BadRequest``) carrying the 1-based ``line`` and ``column``.

The modules: :mod:`~omnigraph.engine.schema.parser` (the ``.pg`` dialect of the shared scanner,
the syntax tree, the parser, the canonical printer and the error),
:mod:`~omnigraph.engine.schema.types` (property types, their Arrow storage types and the JSON
spelling of a Blob), :mod:`~omnigraph.engine.schema.annotations` (what each annotation means
where it is written), :mod:`~omnigraph.engine.schema.tables` (the checked model: a table per
type, its properties, constraints and metadata), :mod:`~omnigraph.engine.schema.values` (typed
values: JSON coercion, export and the ``@range``/``@check`` checks),
:mod:`~omnigraph.engine.schema.ids` (node ids: canonical key strings and ULIDs) and
:mod:`~omnigraph.engine.schema.catalog` (the checker and the catalog). This package exports no
names: callers import each name from the module that defines it.
"""
