"""File layout shared by the benchmark driver and its subprocesses (no heavy imports here).

The driver must stay small: a child's ``ru_maxrss`` on Linux is at least the high-water RSS of
the process that spawned it (exec records the old address space's peak), so the driver never
imports Lance, pyarrow or the engine.
"""

from __future__ import annotations

FIXTURE_FILE = "fixture.json"  # written last: a fixture directory without it is incomplete
FIXTURE_VERSION = 1  # bump when the fixture's layout or data changes: older fixtures are rebuilt
GRAPH_DIR = "graph"
BRANCHES = ("main", "b1", "b2")
