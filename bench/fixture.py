"""Build the benchmark's format-4 graph: 3 branches x 4 node tables x N rows, 12 distinct images.

The graph is written through the real format-4 write path: ``init_graph`` with the legacy
profile, then one graph commit per branch through ``omnigraph.engine.ops.write.commit`` whose prepare step
returns a ``CommitPlan`` with a ``TableWrite(..., "overwrite", rows)`` per table. The legacy
router's overwrite replaces the table (no PK metadata, BTREE on ``id``) and the commit publishes
the ``__manifest`` rows and head, exactly as ``omnigraph-v4 load --mode overwrite`` does, minus
the JSONL parsing (which would dominate the build time at 1M rows per table).

* ``main``: each table overwritten with N rows;
* ``b1`` and ``b2``: created from ``main`` with ``create_branch``, then each of their 4 tables
  overwritten with N other rows, so each branch owns its own image (a Lance table branch forked
  on the first write) and the graph has 3 x 4 = 12 distinct images of N rows.

Ids look like real keyed node ids: the ``@key`` value, e.g. ``b1-account-000001234``.
``fixture.json`` next to the graph lists the 12 pinned images (path, table branch, version,
rows), read from the manifest after the build; the baseline reader uses it.
"""

from __future__ import annotations

import json
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from layout import BRANCHES, FIXTURE_FILE, FIXTURE_VERSION, GRAPH_DIR

from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.graph import Graph, init_graph
from omnigraph.engine.manifest.rows import MAIN, BranchSnapshot
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.write import CommitPlan, TableWrite, commit
from omnigraph.engine.storage.store import open_store

SCHEMA = """\
// Benchmark schema: four keyed node types, ids derived from the @key.
node Account {
    name: String @key
    n: I64
}

node Device {
    name: String @key
    n: I64
}

node Order {
    name: String @key
    n: I64
}

node Session {
    name: String @key
    n: I64
}
"""

ACTOR = "bench"


def _ids(prefix: str, count: int) -> pa.Array:
    """``<prefix>-000000000`` ... as a utf8 array, built without a Python loop per row."""
    numbers = pc.cast(pa.array(np.arange(count, dtype=np.int64)), pa.utf8())
    padded = pc.utf8_lpad(numbers, width=9, padding="0")
    return pc.binary_join_element_wise(pa.scalar(prefix), padded, "-")


def _rows(graph: Graph, table_key: str, branch: str, count: int) -> pa.Table:
    table = graph.catalog.table(table_key)
    schema = table.arrow_schema(with_pk=graph.profile.router.with_pk)
    prefix = f"{branch}-{table.type_name.lower()}"
    ids = _ids(prefix, count)
    rng = np.random.default_rng(zlib.crc32(f"{branch}/{table_key}".encode()))
    values = {"id": ids, "name": ids, "n": pa.array(rng.integers(0, 1 << 40, size=count, dtype=np.int64))}
    return pa.Table.from_arrays([values[f.name].cast(f.type) for f in schema], schema=schema)


def _overwrite_all(graph: Graph, branch: str, count: int) -> None:
    def prepare(snapshot: BranchSnapshot, _previous: CommitPlan[None] | None) -> CommitPlan[None]:
        writes = tuple(TableWrite(key, "overwrite", _rows(graph, key, branch, count)) for key in sorted(snapshot.tables))
        return CommitPlan(writes, (snapshot.head.commit_id,), f"bench fixture: {count} rows per table", None)

    if commit(graph, branch, prepare, actor=ACTOR).published is None:
        raise RuntimeError(f"the fixture commit on {branch} wrote nothing")


def pinned_images(graph: Graph) -> list[dict[str, Any]]:
    """Every (branch, table) pin of the graph, main first then branches by name, then table key."""
    images = []
    for name in graph.manifest.branches():
        snapshot = graph.manifest.snapshot(name)
        for table_key, entry in sorted(snapshot.tables.items()):
            images.append(
                {
                    "graph_branch": name,
                    "table_key": table_key,
                    "table_path": entry.table_path,
                    "table_branch": entry.table_branch,
                    "table_version": entry.table_version,
                    "rows": entry.row_count,
                }
            )
    return images


def build_fixture(directory: Path, rows: int) -> dict[str, Any]:
    """Build the graph under ``directory/graph`` and write ``directory/fixture.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    root = directory / GRAPH_DIR
    started = time.perf_counter()
    graph = init_graph(open_store(str(root)), SCHEMA, LEGACY_PROFILE, actor=ACTOR)
    _overwrite_all(graph, MAIN, rows)
    for branch in BRANCHES[1:]:
        create_branch(graph, branch, MAIN)
        _overwrite_all(graph, branch, rows)
    images = pinned_images(graph)
    distinct = {(i["table_path"], i["table_branch"], i["table_version"]) for i in images}
    if len(images) != 4 * len(BRANCHES) or len(distinct) != len(images) or any(i["rows"] != rows for i in images):
        raise RuntimeError(f"unexpected fixture layout: {json.dumps(images, indent=1)}")
    document = {
        "fixture_version": FIXTURE_VERSION,
        "rows_per_table": rows,
        "graph": GRAPH_DIR,
        "build_seconds": round(time.perf_counter() - started, 3),
        "images": images,
    }
    (directory / FIXTURE_FILE).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return document


def main(argv: list[str] | None = None) -> int:
    """``python bench/fixture.py --rows N --out DIR``: build one fixture (run as its own process)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, required=True, help="rows per table")
    parser.add_argument("--out", type=Path, required=True, help="fixture directory (the graph goes in OUT/graph)")
    args = parser.parse_args(argv)
    document = build_fixture(args.out, args.rows)
    print(json.dumps({"rows_per_table": args.rows, "build_seconds": document["build_seconds"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
