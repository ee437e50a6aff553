"""Build the many-units benchmark graph: format 4, ``--branches`` graph branches x 4 small node tables.

The graph is written through the real format-4 write path (``init_graph`` with the legacy
profile, then ``omnigraph.engine.ops.load`` of a few rows per table). ``main`` holds ``--rows`` rows in
each of the 4 tables; branches ``b01`` ... are created from ``main``; every fourth branch then
appends one row to one table (so it owns that table's image, forked on its first write), and
the rest inherit every table. With the default 32 branches that is 128 units, 8 of them owned.

Run as its own process: ``python bench/units_fixture.py --uri URI [--branches 32] [--rows 10]``;
for an ``s3://`` URI the environment must name the endpoint and credentials (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ...). Prints ``{"units": ..., "build_seconds": ...}``.
"""

from __future__ import annotations

import argparse
import json
import time

from fixture import SCHEMA  # the four keyed node types of the migration benchmark

from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.graph import init_graph
from omnigraph.engine.manifest.rows import MAIN
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.load import load
from omnigraph.engine.storage.store import open_store

TYPES = ("Account", "Device", "Order", "Session")
ACTOR = "bench"


def branch_names(count: int) -> list[str]:
    """``main`` then ``b01`` ... ``b<count-1>``."""
    return [MAIN] + [f"b{i:02d}" for i in range(1, count)]


def _jsonl(rows: list[tuple[str, str, int]]) -> bytes:
    return "".join(json.dumps({"type": t, "data": {"name": name, "n": n}}) + "\n" for t, name, n in rows).encode()


def build(uri: str, branches: int, rows: int) -> dict[str, float | int]:
    """Build the graph at ``uri`` (module docstring); its unit count and build time."""
    started = time.perf_counter()
    graph = init_graph(open_store(uri), SCHEMA, LEGACY_PROFILE, actor=ACTOR)
    seed = [(t, f"main-{t.lower()}-{i:04d}", i) for t in TYPES for i in range(rows)]
    load(graph, _jsonl(seed), mode="append", branch=MAIN, actor=ACTOR)
    for index, name in enumerate(branch_names(branches)[1:], start=1):
        create_branch(graph, name, MAIN)
        if index % 4 == 0:
            kind = TYPES[(index // 4) % len(TYPES)]
            own = [(kind, f"{name}-{kind.lower()}-0000", index)]
            load(graph, _jsonl(own), mode="append", branch=name, actor=ACTOR)
    return {"units": branches * len(TYPES), "build_seconds": round(time.perf_counter() - started, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", required=True)
    parser.add_argument("--branches", type=int, default=32)
    parser.add_argument("--rows", type=int, default=10)
    args = parser.parse_args(argv)
    print(json.dumps(build(args.uri, args.branches, args.rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
