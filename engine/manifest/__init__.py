"""The manifest: the ``__manifest`` catalog dataset, graph branches and the graph commit history.

:mod:`~omnigraph.engine.manifest.rows` is the row schema of ``__manifest`` and how a branch's rows fold into
a :class:`BranchSnapshot`, :mod:`~omnigraph.engine.manifest.manifest` reads and publishes ``__manifest``
(its rows, the format stamp, graph branches), :mod:`~omnigraph.engine.manifest.commit_graph` is the
commit DAG with its merge bases and :mod:`~omnigraph.engine.manifest.commits` the ``commit list`` walk.
"""

from omnigraph.engine.manifest.commit_graph import load_commit_graph
from omnigraph.engine.manifest.commits import commit_history
from omnigraph.engine.manifest.manifest import FORMAT_KEY, Manifest
from omnigraph.engine.manifest.rows import (
    MAIN,
    BranchSnapshot,
    GraphBranch,
    HeadEntry,
    TableEntry,
    lance_branch_name,
    now_ms,
    with_version,
)

__all__ = [
    "FORMAT_KEY",
    "MAIN",
    "BranchSnapshot",
    "GraphBranch",
    "HeadEntry",
    "Manifest",
    "TableEntry",
    "commit_history",
    "lance_branch_name",
    "load_commit_graph",
    "now_ms",
    "with_version",
]
