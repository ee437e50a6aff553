"""The typed results of :class:`omnigraph.Graph`: frozen dataclasses, one per answer.

Each result has the field names of the document the ``omnigraph`` CLI prints with ``--json`` for
the same operation (and the HTTP server answers), and ``to_dict()`` gives that document back
exactly, so a script can move between the CLI, HTTP and Python without renaming anything.
Sequences are tuples and mappings are read-only, so a result can be shared between threads. The
classes are the engine's own (:mod:`omnigraph.engine.results`): one definition per answer.
"""

from __future__ import annotations

from omnigraph.engine.results import (
    Branch,
    ChunkedMutationResult,
    Commit,
    CreatedBranch,
    DeletedBranch,
    InitResult,
    LoadResult,
    MergeResult,
    MutationResult,
    QueryPlan,
    QueryResult,
    Readiness,
    Result,
    Snapshot,
    SnapshotTable,
)

__all__ = [
    "Branch",
    "ChunkedMutationResult",
    "Commit",
    "CreatedBranch",
    "DeletedBranch",
    "InitResult",
    "LoadResult",
    "MergeResult",
    "MutationResult",
    "QueryPlan",
    "QueryResult",
    "Readiness",
    "Result",
    "Snapshot",
    "SnapshotTable",
]
