"""Read-only integrity check of a whole graph, every branch (``omnigraph check``).

:func:`check_graph` never writes and never raises on what it finds: every problem becomes a
:class:`~omnigraph.engine.maintenance.findings.Finding` in the
:class:`~omnigraph.engine.maintenance.findings.CheckReport` (:mod:`omnigraph.engine.maintenance.findings`).
A finding's ``kind`` is stable (scripts match on it); findings that a command resolves carry that
command in their message and, where it is one command, in ``details["next"]``. It raises only
when there is no graph to check (``not_found``) or the storage cannot be read at all. What it
checks:

* the format stamp is a known value, not ``migrating``, and consistent with the primary keys:
  at ``5`` every pinned image has PK exactly ``[id]``; at any stamp a PK other than ``[]`` or
  ``[id]`` is wrong (PKs installed by an aborted migration stay at stamp ``4``, by design);
* every branch's manifest folds, names the tables of the schema its head was written under, and
  every table row resolves to an existing ``(table branch, version)`` whose row count matches the
  row recorded in the manifest and whose columns are the ones that schema declares
  (``table_schema_mismatch``);
* every branch is at the accepted schema (``schema_behind``) and no schema change is left in
  progress (``schema_change_pending``); ``omnigraph recover`` resolves both;
* no table branch HEAD is ahead of every pin of it and no Lance branch of a table is pinned by
  no graph branch, unless a pending write intent names that table (an interrupted commit);
* no branch create or delete was interrupted holding its lease (``omnigraph recover`` completes it);
* no write intent is left in ``__recovery/`` (each one is a finding naming ``omnigraph recover``);
* at stamp ``5``, no branch head was published by a format-4 writer after the stamp
  (``unfenced_commit``, naming ``omnigraph-migrate refence``: every format-5 write refuses it);
* what the caller's ``claim_findings`` reports about the migration claim (the CLI passes the
  migrator's: a claim held, by a live process or a dead one, or broken, each naming the command
  that resolves it), because no writer writes while a claim is held;
* ids are non-null and unique in every pinned image (each physical image is scanned once, with
  the caller's bounded-memory scanner, see
  :data:`~omnigraph.engine.maintenance.findings.IdScanner`);
* every edge's ``src`` and ``dst`` exist in the endpoint node images its branch pins. The node
  ids of one endpoint image are held in memory while its edges are streamed;
* a copy (``omnigraph-migrate copy``) whose source root is gone: its branches read the files that
  predate their forks from there, so what cannot be read for that reason is one
  ``source_missing`` finding naming the source and the places that read it (not an ``internal``
  error, nor a damaged manifest).

The id scan and the claim findings are passed in by the caller (the CLI passes the migrator's
partitioned validator and claim advice), because the engine does not depend on the migrator.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import lance
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.access.writer_audit import foreign_head
from omnigraph.engine.door.table_store import KEY_COLUMN
from omnigraph.engine.errors import NotFound, OmnigraphError
from omnigraph.engine.maintenance.findings import CheckReport, ClaimFindings, Finding, IdScanner, ImageKey
from omnigraph.engine.maintenance.fixes import FIXES
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import BranchSnapshot
from omnigraph.engine.manifest.schema_history import SchemaHistory
from omnigraph.engine.reconcile import branch_lease
from omnigraph.engine.reconcile.recovery import WriteIntent
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.storage.lance_io import latest_version, list_branches, open_dataset, open_pinned, primary_key
from omnigraph.engine.storage.names import FORMAT_5, FORMAT_MIGRATING, KNOWN_STAMPS, RECOVERY_DIR, SCHEMA_CHANGE_PATH, SCHEMA_FILE
from omnigraph.engine.storage.store import GraphStore

LISTED_PER_FINDING = 100
EDGE_BATCH_ROWS = 32_768
_NOT_FOUND = re.compile(r"Not found: (\S+?)(?:,|\s|$)")
_DATASET_DIR = re.compile(r"/(?:__manifest|nodes|edges)(?:/|$)")


def missing_source(store: GraphStore, error: BaseException) -> str | None:
    """The root outside ``store`` whose file ``error`` says is missing, or None.

    A copy's Lance branches read the data files that predate their forks from the root they were
    copied from (``omnigraph-migrate copy``); when that root is gone or moved, Lance names the
    missing file, and this is the root it belongs to.
    """
    match = _NOT_FOUND.search(str(error))
    if match is None:
        return None
    missing = match.group(1).lstrip("/")
    if missing.startswith(store.root.lstrip("/") + "/"):
        return None
    root = _DATASET_DIR.split(missing, maxsplit=1)[0]
    return f"s3://{root}" if not store.is_local else f"/{root}"


def _image_name(key: ImageKey) -> str:
    path, table_branch, version = key
    return f"{path} {table_branch or 'main'}@v{version}"


class _Checker:
    """One check run: collects findings; every public step tolerates what earlier ones found."""

    def __init__(self, store: GraphStore, manifest: Manifest, scan_ids: IdScanner):
        self.store = store
        self.manifest = manifest
        self.scan_ids = scan_ids
        self.findings: list[Finding] = []
        self.images: dict[ImageKey, lance.LanceDataset] = {}
        self.pinned_by: dict[ImageKey, list[str]] = {}
        self.intent_tables: set[tuple[str, str | None]] = set()
        self.intent_paths: set[str] = set()
        self.schemas = SchemaHistory(store)
        self.missing_sources: dict[str, set[str]] = {}
        self.unreadable_branches: set[str] = set()

    def source_gone(self, error: BaseException, where: str) -> bool:
        """Note ``where`` as unreadable because the root it was copied from is gone, if that is ``error``'s cause."""
        source = missing_source(self.store, error)
        if source is None:
            return False
        self.missing_sources.setdefault(source, set()).add(where)
        return True

    def report_missing_sources(self) -> None:
        for source, places in sorted(self.missing_sources.items()):
            listed = sorted(places)
            self.add(
                "source_missing",
                f"{source}, the root this graph was copied from, cannot be read, and {len(listed)} place(s) of the copy "
                f"read files there ({', '.join(listed[:5])}{', ...' if len(listed) > 5 else ''})",
                details={"source": source, "affected": listed[:LISTED_PER_FINDING], "affected_count": len(listed)},
            )

    def add(self, kind: str, message: str, **fields: Any) -> None:
        """A finding of ``kind``: ``message`` then what resolves it (:data:`FIXES`), its command in ``details["next"]``."""
        fix = FIXES[kind]
        details = dict(fields.pop("details", {}))
        command = fix.next_command(self.store.uri)
        if command is not None:
            details["next"] = command
        self.findings.append(Finding(kind=kind, message=f"{message}; {fix.words(self.store.uri)}", details=details, **fields))

    # -- stamp and intents ---------------------------------------------------------------------

    def check_stamp(self, claim_findings: ClaimFindings | None) -> str | None:
        """The stamp; a finding if it is unknown, or ``migrating``.

        A ``migrating`` stamp is worded by ``claim_findings`` when given, which names the exact next command.
        """
        stamp, migration_id = self.manifest.read_stamp()
        if stamp is None or stamp not in KNOWN_STAMPS:
            self.add("stamp_invalid", f"the format stamp is {stamp!r}, not one of {list(KNOWN_STAMPS)}", details={"stamp": stamp})
        if claim_findings is not None:
            self.findings.extend(claim_findings(self.store, stamp))
        elif stamp == FORMAT_MIGRATING:
            self.add(
                "migration_in_progress",
                f"stamp is 'migrating': migration {migration_id} holds the barrier",
                details={"migration_id": migration_id},
            )
        return stamp

    def check_unfenced_commits(self, stamp: str | None, snapshots: dict[str, BranchSnapshot]) -> None:
        if stamp != FORMAT_5:
            return
        fenced = self.manifest.read_fenced_heads()
        for snapshot in snapshots.values():
            commit = foreign_head(snapshot, fenced)
            if commit is None:
                continue
            self.add("unfenced_commit", commit.describe(), branch=commit.branch, details=commit.to_json())

    def check_intents(self, stamp: str | None) -> None:
        for name in self.store.list(RECOVERY_DIR):
            if not name.endswith(".json"):
                continue
            rel = f"{RECOVERY_DIR}/{name}"
            try:
                intent = WriteIntent.model_validate_json(self.store.read_bytes(rel))
            except FileNotFoundError:
                continue  # disarmed by its writer while we listed
            except ValueError as error:
                self.add(
                    "intent_unreadable",
                    f"{rel} is not a valid write intent ({type(error).__name__})",
                    table_path=None,
                    details={"path": rel},
                )
                continue
            for table in intent.tables:
                self.intent_tables.add((table.table_path, table.branch_before))
                self.intent_tables.add((table.table_path, table.target_branch))
                self.intent_paths.add(table.table_path)
            self.add(
                "pending_intent",
                f"write {intent.operation_id} on {intent.graph_branch} was interrupted and is pending recovery",
                branch=intent.graph_branch,
                details={"operation_id": intent.operation_id, "tables": sorted(t.table_key for t in intent.tables)},
            )

    def check_branch_leases(self) -> None:
        for record in branch_lease.lapsed(self.store):
            if record.operation not in ("create", "delete"):
                continue  # a lapsed write or recovery leaves intents (reported above) or nothing to finish
            self.add(
                "interrupted_branch_operation",
                f"a branch {record.operation} of {record.branch!r} by pid {record.pid} on {record.host} was interrupted",
                branch=record.branch,
                details={"operation": record.operation, "pid": record.pid, "host": record.host},
            )

    # -- manifests and images -------------------------------------------------------------------

    def snapshots(self) -> dict[str, BranchSnapshot]:
        result: dict[str, BranchSnapshot] = {}
        for name in self.manifest.branches():
            try:
                result[name] = self.manifest.snapshot(name)
            except (OSError, ValueError, OmnigraphError) as error:
                self.unreadable_branches.add(name)
                if not self.source_gone(error, f"the manifest of branch {name}"):
                    self.add("manifest_unreadable", f"the manifest of branch {name} cannot be read: {error}", branch=name)
        return result

    def check_tables(self, snapshot: BranchSnapshot, catalog: Catalog | None, stamp: str | None) -> None:
        branch = snapshot.branch
        if catalog is not None:
            expected, present = set(catalog.table_keys()), set(snapshot.tables)
            for key in sorted(expected - present):
                self.add("table_missing", f"branch {branch} has no manifest row for {key}", branch=branch, table_key=key)
            for key in sorted(present - expected):
                self.add(
                    "table_unexpected",
                    f"branch {branch} has a manifest row for {key}, which the schema does not declare",
                    branch=branch,
                    table_key=key,
                )
        for key, entry in snapshot.tables.items():
            image: ImageKey = (entry.table_path, entry.table_branch, entry.table_version)
            where = {"branch": branch, "table_key": key, "table_path": entry.table_path}
            dataset = self.images.get(image)
            if dataset is None:
                try:
                    dataset = open_pinned(self.store, entry.image)
                except (OSError, ValueError) as error:
                    if self.source_gone(error, _image_name(image)):
                        continue
                    self.add(
                        "table_version_missing",
                        f"{key} pins {_image_name(image)}, which cannot be opened: {error}",
                        details={"table_branch": entry.table_branch, "version": entry.table_version},
                        **where,
                    )
                    continue
                self.images[image] = dataset
            self.pinned_by.setdefault(image, []).append(branch)
            rows = dataset.count_rows()
            if rows != entry.row_count:
                self.add(
                    "row_count_mismatch",
                    f"{key} pins {_image_name(image)} with {rows} rows; the manifest says {entry.row_count}",
                    details={"manifest_rows": entry.row_count, "image_rows": rows},
                    **where,
                )
            if catalog is not None and key in catalog.table_keys():
                declared = set(catalog.table(key).arrow_schema(with_pk=False).names)
                if set(dataset.schema.names) != declared:
                    self.add(
                        "table_schema_mismatch",
                        f"{key} at {_image_name(image)} has columns {sorted(dataset.schema.names)}; the schema of branch {branch}'s "
                        f"head declares {sorted(declared)}",
                        details={"columns": sorted(dataset.schema.names), "declared": sorted(declared)},
                        **where,
                    )
            pk = primary_key(dataset.schema)
            if pk not in ([], [KEY_COLUMN]):
                self.add("pk_wrong", f"{key} at {_image_name(image)} has primary key {pk}, not ['id']", details={"pk": pk}, **where)
            elif stamp == FORMAT_5 and pk != [KEY_COLUMN]:
                self.add("pk_missing", f"the stamp is 5 but {key} at {_image_name(image)} has no primary key", details={"pk": pk}, **where)

    def check_schema_change(self) -> None:
        """A schema change in progress or interrupted: ``schema_change_pending`` naming ``omnigraph recover``."""
        if self.store.exists(SCHEMA_CHANGE_PATH):
            self.add("schema_change_pending", f"a schema change is recorded as in progress ({SCHEMA_CHANGE_PATH})")

    def branch_catalog(self, snapshot: BranchSnapshot, accepted: Catalog | None) -> Catalog | None:
        """The schema of ``snapshot``'s head (a finding if it cannot be read); ``schema_behind`` if it is not the accepted one."""
        try:
            catalog = self.schemas.catalog(snapshot.head.schema_id)
        except (OSError, ValueError, OmnigraphError) as error:
            self.add("schema_unreadable", f"the schema of branch {snapshot.branch}'s head cannot be read: {error}", branch=snapshot.branch)
            return None
        if accepted is not None and catalog.source != accepted.source:
            self.add("schema_behind", f"branch {snapshot.branch} is at an older schema than the accepted one", branch=snapshot.branch)
        return catalog

    def check_heads(self) -> None:
        pinned: dict[tuple[str, str | None], int] = {}
        for path, table_branch, version in self.images:
            pinned[(path, table_branch)] = max(pinned.get((path, table_branch), 0), version)
        for (path, table_branch), version in sorted(pinned.items(), key=lambda item: (item[0][0], item[0][1] or "")):
            if (path, table_branch) in self.intent_tables:
                continue
            head = latest_version(self.store, path, table_branch)
            if head > version:
                self.add(
                    "table_head_ahead",
                    f"{path} on table branch {table_branch or 'main'} is at v{head}, ahead of every pin (v{version}), "
                    "and no write intent explains it",
                    table_path=path,
                    details={"table_branch": table_branch, "head": head, "pinned": version},
                )
        for path in sorted({p for p, _ in pinned}):
            if path in self.intent_paths:
                continue
            for name in list_branches(open_dataset(self.store, path)):
                if (path, name) not in pinned and name not in self.unreadable_branches:
                    self.add(
                        "unpinned_table_branch",
                        f"{path} has a Lance branch {name!r} that no graph branch pins",
                        table_path=path,
                        details={"table_branch": name},
                    )

    def check_ids(self) -> None:
        for image, dataset in sorted(self.images.items(), key=lambda item: (item[0][0], item[0][1] or "", item[0][2])):
            try:
                report = self.scan_ids(dataset)
            except Exception as error:  # the scanner's own reader (DuckDB over Lance) wraps Lance's errors
                if self.source_gone(error, _image_name(image)):
                    continue
                raise
            where = {"table_path": image[0]}
            branches = sorted(self.pinned_by[image])
            if report.null_ids:
                self.add(
                    "null_ids",
                    f"{_image_name(image)} has {report.null_ids} null id(s)",
                    details={"image": _image_name(image), "branches": branches, "null_ids": report.null_ids},
                    **where,
                )
            if report.duplicates:
                listed = [{"id": ident, "count": count} for ident, count in report.duplicates[:LISTED_PER_FINDING]]
                self.add(
                    "duplicate_ids",
                    f"{_image_name(image)} has {len(report.duplicates)} duplicated id(s)",
                    details={"image": _image_name(image), "branches": branches, "duplicated_ids": len(report.duplicates), "listed": listed},
                    **where,
                )

    # -- edges ---------------------------------------------------------------------------------

    def check_endpoints(self, snapshots: dict[str, BranchSnapshot], catalog: Catalog) -> None:
        node_ids: dict[ImageKey, pa.Array] = {}
        checked: set[tuple[ImageKey, ImageKey, ImageKey]] = set()
        for branch, snapshot in snapshots.items():
            for table in catalog.tables():
                if table.kind != "edge" or table.table_key not in snapshot.tables:
                    continue
                edge_image = self._pinned_image(snapshot, table.table_key)
                source_image = self._pinned_image(snapshot, f"node:{table.from_type}")
                target_image = self._pinned_image(snapshot, f"node:{table.to_type}")
                if edge_image is None or source_image is None or target_image is None:
                    continue
                combination = (edge_image, source_image, target_image)
                if combination in checked:
                    continue
                checked.add(combination)
                for image in (source_image, target_image):
                    if image not in node_ids:
                        node_ids[image] = self.images[image].to_table(columns=[KEY_COLUMN]).column(0).combine_chunks()
                missing = list(self._dangling(edge_image, node_ids[source_image], node_ids[target_image]))
                if missing:
                    self.add(
                        "dangling_edge",
                        f"{table.table_key} at {_image_name(edge_image)} has {len(missing)} endpoint(s) missing from "
                        f"the node images branch {branch} pins",
                        branch=branch,
                        table_key=table.table_key,
                        table_path=edge_image[0],
                        details={"missing": len(missing), "listed": missing[:LISTED_PER_FINDING]},
                    )

    def _pinned_image(self, snapshot: BranchSnapshot, table_key: str) -> ImageKey | None:
        entry = snapshot.tables.get(table_key)
        if entry is None:
            return None
        image = (entry.table_path, entry.table_branch, entry.table_version)
        return image if image in self.images else None

    def _dangling(self, edge_image: ImageKey, sources: pa.Array, targets: pa.Array) -> Iterator[dict[str, str]]:
        dataset = self.images[edge_image]
        for batch in dataset.to_batches(columns=[KEY_COLUMN, "src", "dst"], batch_size=EDGE_BATCH_ROWS):
            for end, column, known in (("src", batch.column(1), sources), ("dst", batch.column(2), targets)):
                absent = pc.invert(pc.fill_null(pc.is_in(column, value_set=known), False))
                edge_ids, node_ids = pc.filter(batch.column(0), absent).to_pylist(), pc.filter(column, absent).to_pylist()
                for edge_id, node_id in zip(edge_ids, node_ids, strict=True):
                    yield {"edge_id": edge_id, "end": end, "node_id": node_id}


def _read_catalog(checker: _Checker) -> Catalog | None:
    try:
        return Catalog.from_source(checker.store.read_bytes(SCHEMA_FILE).decode("utf-8"))
    except FileNotFoundError:
        checker.add("schema_unreadable", f"{SCHEMA_FILE} is missing")
    except (UnicodeDecodeError, OmnigraphError) as error:
        checker.add("schema_unreadable", f"{SCHEMA_FILE} is not an accepted schema: {error}")
    return None


def check_graph(store: GraphStore, scan_ids: IdScanner, claim_findings: ClaimFindings | None = None) -> CheckReport:
    """Check the graph at ``store`` (see the module docstring); never writes.

    ``claim_findings`` reports the migration claim, and a ``migrating`` stamp, with the command that
    resolves each (``migration_in_progress`` behind the barrier, ``claim_held`` at any other stamp).
    """
    manifest = Manifest(store)
    if not manifest.exists():
        raise NotFound(f"no graph at {store.uri} (no __manifest)", {"uri": store.uri})
    checker = _Checker(store, manifest, scan_ids)
    stamp = checker.check_stamp(claim_findings)
    checker.check_intents(stamp)
    checker.check_branch_leases()
    catalog = _read_catalog(checker)
    snapshots = checker.snapshots()
    checker.check_unfenced_commits(stamp, snapshots)
    checker.check_schema_change()
    for snapshot in snapshots.values():
        checker.check_tables(snapshot, checker.branch_catalog(snapshot, catalog), stamp)
    checker.check_heads()
    checker.check_ids()
    if catalog is not None and not checker.missing_sources:  # endpoints read the same images the scan could not
        checker.check_endpoints(snapshots, catalog)
    checker.report_missing_sources()
    return CheckReport(
        graph=store.uri,
        stamp=stamp,
        branches=list(snapshots),
        images_checked=len(checker.images),
        findings=sorted(checker.findings, key=Finding.sort_key),
    )
