"""Schema versions: which schema each graph commit was written under, and the changes between them.

A graph's accepted schema is ``_schema.pg``. Every commit's head row names the schema version it
was written under (``schema_id``, :attr:`omnigraph.engine.schema.catalog.Catalog.version_id`: the
sha256 of the source text); null names the graph's first schema (commits made before the first
schema change, and graphs that never had one). The first schema change stores that first schema
and every change after it one :class:`~omnigraph.engine.schema.evolution.SchemaVersion` each, ``_schemas/<schema_id>.json``
(create-if-absent, never rewritten): the source, the version it changed, and the steps of that
change. Versions form one line: changes are applied one at a time
(:mod:`omnigraph.engine.ops.schema_change`).

:class:`SchemaHistory` answers the catalog of any version (cached: a version never changes) and
the :class:`~omnigraph.engine.schema.evolution.SchemaChain` between two versions, which makes an
image written under an older version read as a newer one.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from omnigraph.engine.errors import Internal
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.storage.names import SCHEMA_FILE, SCHEMAS_DIR
from omnigraph.engine.storage.store import GraphStore, canonical_json

# The records' models are imported by what reads them: a graph that never changed its schema
# (and every read of one) loads neither them nor pydantic.
if TYPE_CHECKING:
    from omnigraph.engine.schema.evolution import SchemaChain, SchemaVersion


def version_path(version_id: str) -> str:
    """The root-relative path of the record of schema version ``version_id``."""
    return f"{SCHEMAS_DIR}/{version_id}.json"


def store_version(store: GraphStore, version: SchemaVersion) -> None:
    """Persist ``version`` (create-if-absent; an existing record of that id must be the same version)."""
    from omnigraph.engine.schema.evolution import SchemaVersion

    if store.put_if_absent(version_path(version.schema_id), canonical_json(version)):
        return
    existing = SchemaVersion.model_validate_json(store.read_bytes(version_path(version.schema_id)))
    if (existing.parent_id, existing.source) != (version.parent_id, version.source):
        raise Internal(f"schema version {version.schema_id} is already recorded with another parent")


class SchemaHistory:
    """The schema versions of one graph root, read on demand and cached (thread-safe)."""

    def __init__(self, store: GraphStore, known: Catalog | None = None) -> None:
        """``known``: a schema of this graph already read (the open's accepted one), so it is not read again."""
        self._store = store
        self._catalogs: dict[str, Catalog] = {} if known is None else {known.version_id: known}
        self._versions: dict[str, SchemaVersion] = {}
        self._known = None if known is None else known.version_id
        self._first: str | None = None
        self._lock = threading.Lock()

    def accepted(self) -> Catalog:
        """The accepted schema now (``_schema.pg`` read again)."""
        catalog = Catalog.from_source(self._store.read_bytes(SCHEMA_FILE).decode("utf-8"))
        with self._lock:
            self._catalogs.setdefault(catalog.version_id, catalog)
        return catalog

    def version(self, version_id: str) -> SchemaVersion | None:
        """The record of ``version_id``; None if it has none (the first schema before any change)."""
        with self._lock:
            if version_id in self._versions:
                return self._versions[version_id]
        try:
            raw = self._store.read_bytes(version_path(version_id))
        except FileNotFoundError:
            return None
        from omnigraph.engine.schema.evolution import SchemaVersion

        version = SchemaVersion.model_validate_json(raw)
        with self._lock:
            self._versions[version_id] = version
        return version

    def first_id(self) -> str:
        """The id of the graph's first schema: what a null ``schema_id`` names."""
        if self._first is not None:
            return self._first
        current = self._known or self.accepted().version_id  # every version's line ends at the same first one
        while (version := self.version(current)) is not None and version.parent_id is not None:
            current = version.parent_id
        self._first = current
        return current

    def resolve(self, version_id: str | None) -> str:
        """``version_id``, or the first schema's id for None."""
        return self.first_id() if version_id is None else version_id

    def catalog(self, version_id: str | None) -> Catalog:
        """The catalog of schema version ``version_id`` (None: the first schema)."""
        resolved = self.resolve(version_id)
        with self._lock:
            if resolved in self._catalogs:
                return self._catalogs[resolved]
        version = self.version(resolved)
        if version is None:
            accepted = self.accepted()
            if accepted.version_id != resolved:
                raise Internal(f"schema version {resolved} is not recorded under {SCHEMAS_DIR}/ and is not the accepted schema")
            return accepted
        catalog = Catalog.from_source(version.source)
        with self._lock:
            self._catalogs[resolved] = catalog
        return catalog

    def lineage(self, version_id: str) -> list[str]:
        """``version_id`` and the versions before it, newest first."""
        line = [version_id]
        while (version := self.version(line[-1])) is not None and version.parent_id is not None:
            line.append(version.parent_id)
        return line

    def chain(self, older: str | None, newer: str | None) -> SchemaChain:
        """The table changes from version ``older`` to ``newer`` (empty when equal); ``internal`` if not in line."""
        from omnigraph.engine.schema.evolution import SchemaChain, SchemaPlan, table_changes

        older_id, newer_id = self.resolve(older), self.resolve(newer)
        line = self.lineage(newer_id)
        if older_id not in line:
            raise Internal(f"schema version {older_id} does not precede {newer_id}")
        links = []
        for child_id in reversed(line[: line.index(older_id)]):
            child = self.version(child_id)
            assert child is not None and child.parent_id is not None
            plan = SchemaPlan(from_schema_id=child.parent_id, to_schema_id=child_id, steps=child.steps)
            links.append(table_changes(plan, self.catalog(child.parent_id), self.catalog(child_id)))
        return SchemaChain(tuple(links))
