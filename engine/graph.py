"""Opening and creating graph roots: the stamp rules, interrupted-init refusal, recovery.

:func:`open_graph` reads the stamp from ``__manifest`` main before anything else and applies the
profile's rules (:func:`omnigraph.engine.access.permission.write_permission`): the format-5 engine
writes only stamp ``5`` and reads ``4``/``migrating``/``5``; the format-4 writer reads and writes
only ``4``; and no program writes while a migration claim is held (the barrier is the stamp and
the claim). A root without ``__manifest`` is refused: ``not_found`` when it is empty,
``bad_request`` (a half-made graph: an interrupted init) otherwise. A read-write open at stamp ``5`` refuses
(``format_refused``) a graph a format-4 writer published to after the stamp
(:mod:`omnigraph.engine.access.writer_audit`), then resolves interrupted commits
(:mod:`omnigraph.engine.reconcile.recovery`) and adopts out-of-band table commits that change no row
(:mod:`omnigraph.engine.reconcile.drift`) before returning. A read-only open loads none of those
modules.

:func:`init_graph` writes the schema file, every table, then ``__manifest`` with the stamp, last,
so an interrupted init leaves a root that :func:`open_graph` refuses as half-made.

Both first fix how the process's allocator returns freed memory
(:func:`omnigraph.engine.allocator.return_freed_memory`, once per process).

Failpoints: ``open.after_stamp`` (the stamp was checked, nothing else yet) and
``init.before_manifest`` (every table exists, ``__manifest`` does not).
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from omnigraph.engine.access.permission import current_permission, write_permission
from omnigraph.engine.allocator import return_freed_memory
from omnigraph.engine.door.routing import EngineProfile
from omnigraph.engine.errors import BadRequest, NotFound
from omnigraph.engine.failpoints import failpoint
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import BranchSnapshot, HeadEntry, TableEntry, now_ms
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.ids import new_ulid
from omnigraph.engine.storage.names import FORMAT_5, SCHEMA_FILE
from omnigraph.engine.storage.store import GraphStore

# What only a read-write open runs (the writer audit, recovery, drift adoption) is imported by
# it: a read-only open loads neither those modules nor their pydantic models.
if TYPE_CHECKING:
    from omnigraph.engine.manifest.schema_history import SchemaHistory
    from omnigraph.engine.reconcile import drift
    from omnigraph.engine.reconcile.recovery import RecoveryRecord


@dataclass
class Graph:
    """An open graph root.

    ``catalog`` is the accepted schema as this process last read it (writes validate against it);
    ``schemas`` answers the schema of any commit (:meth:`catalog_for`), which is what reads use.
    """

    store: GraphStore
    manifest: Manifest
    catalog: Catalog
    stamp: str
    profile: EngineProfile
    writable: bool
    recovered: list[RecoveryRecord] = field(default_factory=list)
    adopted: list[drift.TableDriftReport] = field(default_factory=list)
    _schemas: SchemaHistory | None = field(default=None, init=False, repr=False)

    @property
    def schemas(self) -> SchemaHistory:
        """The graph's schema versions (:mod:`omnigraph.engine.manifest.schema_history`)."""
        if self._schemas is None:
            from omnigraph.engine.manifest.schema_history import SchemaHistory

            self._schemas = SchemaHistory(self.store, self.catalog)
        return self._schemas

    def catalog_for(self, snapshot: BranchSnapshot) -> Catalog:
        """The schema ``snapshot``'s head commit was written under."""
        return self.schemas.catalog(snapshot.head.schema_id)


def default_actor() -> str:
    """Who is writing: ``OMNIGRAPH_ACTOR`` if set, else the login name (``unknown`` if none)."""
    if os.environ.get("OMNIGRAPH_ACTOR"):
        return os.environ["OMNIGRAPH_ACTOR"]
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def table_dir(table_key: str) -> str:
    """The root-relative directory prefix of a table's dataset: ``nodes/<type>`` or ``edges/<type>``."""
    kind, type_name = table_key.split(":", 1)
    return f"{'nodes' if kind == 'node' else 'edges'}/{type_name}"


def _refuse_missing_manifest(store: GraphStore, profile: EngineProfile) -> None:
    if store.is_empty_root():
        raise NotFound(
            f"no graph at {store.uri}; create one with `{profile.program} init --schema FILE.pg {store.uri}`",
            {"uri": store.uri},
        )
    raise BadRequest(
        f"{store.uri} holds a half-made graph: an `init` was interrupted before __manifest was "
        "written, so nothing here is served. Nothing in it is a committed graph; remove the root "
        f"and run init again.",
        {"uri": store.uri, "entries": store.list("")},
    )


def open_graph(store: GraphStore, profile: EngineProfile, *, write: bool, claim_token: str | None = None) -> Graph:
    """Open a graph root, enforcing the write barrier.

    A read-write open resolves recovery, then adopts out-of-band table commits that change no row
    (:mod:`omnigraph.engine.reconcile.drift`).

    The barrier is the stamp and the migration claim, the same rule a server applies before each
    write (:func:`omnigraph.engine.access.permission.current_permission`): a read-write open is
    refused at a stamp the profile does not write (``format_refused``) and, at one it does, while a
    migration claim is held (``claim_held``), unless the claim carries ``claim_token`` (the caller
    acts under it).
    """
    return_freed_memory()
    manifest = Manifest(store)
    if not manifest.exists():
        _refuse_missing_manifest(store, profile)
    permission = current_permission(manifest, profile, claim_token) if write else write_permission(profile, *manifest.read_stamp())
    refusal = permission.open_refusal(store.uri, write=write)
    if refusal is not None:
        raise refusal
    stamp_value = permission.stamp
    stamp = str(stamp_value)
    catalog = Catalog.from_source(store.read_bytes(SCHEMA_FILE).decode("utf-8"))
    graph = Graph(store, manifest, catalog, stamp, profile, write)
    failpoint("open.after_stamp")
    if not write:
        return graph
    # What only a read-write open runs is imported by it: a read-only open (every read command,
    # ``tests/guards/test_startup_imports.py``) loads neither the reconciliation nor its models.
    from omnigraph.engine.access import writer_audit
    from omnigraph.engine.reconcile import drift, recovery

    if stamp == FORMAT_5:
        writer_audit.refuse_foreign_heads(store, manifest)
    graph.recovered = recovery.resolve_intents(store, manifest)
    graph.adopted = drift.settle_all(store, manifest, actor=default_actor(), require_fencing=profile.router.with_pk)
    return graph


def init_graph(store: GraphStore, schema_source: str, profile: EngineProfile, actor: str | None = None, *, strict: bool = False) -> Graph:
    """Create a graph root: schema file, every table, then ``__manifest`` with the stamp.

    The manifest (rows and stamp in one Lance commit) is written last, so an interrupted init
    leaves a root that :func:`open_graph` refuses as half-made. A root that is not empty is
    refused before anything is written, and so is, with ``strict``, a schema with a warning
    (``bad_request`` listing each with line:column).
    """
    return_freed_memory()
    catalog = Catalog.from_source(schema_source)
    if strict and catalog.warnings:
        listed = "; ".join(str(warning) for warning in catalog.warnings)
        raise BadRequest(
            f"init --strict refuses a schema with {len(catalog.warnings)} warning(s): {listed}; fix them, or init without --strict",
            {"warnings": [{"message": w.message, "line": w.line, "column": w.column} for w in catalog.warnings]},
        )
    manifest = Manifest(store)
    if manifest.exists():
        raise BadRequest(f"{store.uri} already holds a graph; refusing to init over it", {"uri": store.uri})
    if store.exists(SCHEMA_FILE):
        raise BadRequest(
            f"{store.uri} holds a half-made graph from an interrupted init (no __manifest); remove the root and run init again",
            {"uri": store.uri, "entries": store.list("")},
        )
    if not store.is_empty_root():
        raise BadRequest(
            f"{store.uri} is not empty; init needs an empty or absent root",
            {"uri": store.uri, "entries": store.list("")},
        )
    if not store.put_if_absent(SCHEMA_FILE, catalog.source.encode("utf-8")):
        raise BadRequest(f"another init of {store.uri} is in progress", {"uri": store.uri})
    entries = []
    for table_key in catalog.table_keys():
        path = f"{table_dir(table_key)}-{new_ulid().lower()}"
        schema = catalog.table(table_key).arrow_schema(with_pk=profile.router.with_pk)
        version = profile.router.create_table(store, path, schema)
        entries.append(TableEntry(table_key, path, None, version, 0))
    failpoint("init.before_manifest")
    head = HeadEntry(
        new_ulid(),
        (),
        actor or default_actor(),
        "init",
        now_ms(),
        writer_program=profile.program,
        writer_format=profile.init_stamp,
    )
    manifest.create(entries, head, profile.init_stamp)
    return Graph(store, manifest, catalog, profile.init_stamp, profile, True)
