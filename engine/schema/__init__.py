"""The ``.pg`` schema language: parse and check a source into a :class:`Catalog`.

``Catalog.from_source(text)`` is the entry point; every refusal is a :class:`SchemaError`
(a ``BadRequest``) carrying the 1-based ``line`` and ``column``.
"""
