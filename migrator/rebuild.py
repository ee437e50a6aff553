"""``rebuild``: copy a graph's current data into a NEW format-5 graph by export and load.

The alternative to the in-place migration, as the upstream project does it. Order:

1. check that the destination holds nothing, then open the source read-only (format 4 or 5; a
   graph behind a migration barrier is refused);
2. export every branch (``export_lines``: tables in key order, rows by id) into a temporary
   JSONL file, branches in creation order (``main`` first, then each branch after its parent,
   ties by name);
3. ``init`` the destination at format 5 with the source's schema (every table created with the
   primary key ``[id]`` before any data);
4. create every non-main branch from its source parent, in the same order, while all tables are
   still empty (so no branch inherits another branch's rows);
5. load each branch's export with ``--mode overwrite`` (one fenced commit per branch), main first;
6. build the key indexes (BTREE on ``id``, and on ``src``/``dst`` of edges) of every branch's
   tables (:func:`omnigraph.engine.maintenance.optimize.index_keys`): an overwrite drops the
   indexes the empty tables were created with.

The source is only read. Each branch is exported from its snapshot at step 2; writers to the
source must be stopped for the copy to be a consistent point in time across branches. A failure
after step 3 leaves an incomplete destination, which the error names; it holds only what this
rebuild wrote. What a rebuild does not carry over (history, versions, fork points, indexes, the
migration ledger, indexes other than the key indexes) is listed in docs/operations.md.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import BadRequest, FormatRefused, OmnigraphError
from omnigraph.engine.graph import Graph, init_graph, open_graph
from omnigraph.engine.maintenance.optimize import index_keys
from omnigraph.engine.manifest.rows import MAIN, GraphBranch
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.export import export_lines
from omnigraph.engine.ops.load import load
from omnigraph.engine.progress import SilentProgress
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5
from omnigraph.engine.storage.store import GraphStore


@dataclass(frozen=True)
class RebuiltBranch:
    """One branch copied: its parent and the rows loaded per table key."""

    name: str
    parent: str | None
    rows: Mapping[str, int]


@dataclass(frozen=True)
class RebuildOutcome:
    """A finished rebuild: the source, the new graph and every branch copied, in creation order."""

    source: str
    destination: str
    branches: list[RebuiltBranch]

    def to_json(self) -> dict[str, Any]:
        """The JSON document of the rebuild: source, destination, stamp 5 and every branch copied."""
        return {
            "source": self.source,
            "destination": self.destination,
            "stamp": FORMAT_5,
            "branches": [{"name": b.name, "parent": b.parent, "rows": b.rows} for b in self.branches],
        }


def branch_order(branches: dict[str, GraphBranch]) -> list[GraphBranch]:
    """``main`` first, then every branch after its parent; ties by name."""
    ordered: list[GraphBranch] = []
    placed: set[str] = set()
    pending = sorted(branches.values(), key=lambda b: b.name)
    while pending:
        ready = [b for b in pending if b.name == MAIN or b.parent_branch in placed or b.parent_branch not in branches]
        if not ready:
            raise BadRequest("the branch parents form a cycle", {"branches": [b.name for b in pending]})
        for branch in ready:
            ordered.append(branch)
            placed.add(branch.name)
        pending = [b for b in pending if b.name not in placed]
    return ordered


def _open_source(store: GraphStore) -> Graph:
    source = open_graph(store, FENCED_PROFILE, write=False)
    if source.stamp not in (FORMAT_4, FORMAT_5):
        raise FormatRefused(
            f"{store.uri} has format stamp {source.stamp!r}: a migration holds the barrier. Finish or abort it "
            f"first (`omnigraph-migrate status {store.uri}`), then rebuild.",
            {"stamp": source.stamp},
        )
    return source


def rebuild_graph(
    source_store: GraphStore, destination: GraphStore, actor: str, progress: Callable[[str], None] | None = None
) -> RebuildOutcome:
    """Copy every branch of the graph at ``source_store`` into a new format-5 graph at ``destination``."""
    destination_uri = destination.uri
    if not destination.is_empty_root():
        raise BadRequest(
            f"{destination_uri} is not empty; rebuild writes only into a new, empty location", {"destination": destination_uri}
        )
    source = _open_source(source_store)
    order = branch_order(source.manifest.branches())
    with tempfile.TemporaryDirectory(prefix="omnigraph-rebuild-") as scratch:
        exports: dict[str, Path] = {}
        for index, branch in enumerate(order):
            if progress is not None:
                progress(f"exporting branch {branch.name}")
            path = Path(scratch) / f"{index:06d}.jsonl"
            with open(path, "w", encoding="utf-8") as sink:
                for line in export_lines(source, branch.name):
                    sink.write(line + "\n")
            exports[branch.name] = path
        target = init_graph(destination, source.catalog.source, FENCED_PROFILE, actor=actor)
        try:
            for branch in order:
                if branch.name != MAIN:
                    parent = branch.parent_branch if branch.parent_branch in exports else MAIN
                    create_branch(target, branch.name, parent)
            rebuilt: list[RebuiltBranch] = []
            for branch in order:
                if progress is not None:
                    progress(f"loading branch {branch.name}")
                rows: Mapping[str, int] = {}
                if exports[branch.name].stat().st_size:
                    with exports[branch.name].open("rb") as data:  # read in blocks, never whole
                        rows = load(target, data, mode="overwrite", branch=branch.name, actor=actor).rows
                rebuilt.append(RebuiltBranch(branch.name, branch.parent_branch, rows))
            if progress is not None:
                progress("building the key indexes")
            index_keys(target, actor=actor, progress=SilentProgress())
        except OmnigraphError as error:
            error.message += (
                f" (the rebuild stopped; {destination_uri} is incomplete and holds only what this rebuild "
                "wrote: delete it before rebuilding again)"
            )
            error.details["incomplete_destination"] = destination_uri
            raise
    return RebuildOutcome(source_store.uri, destination_uri, rebuilt)
