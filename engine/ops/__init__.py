"""Operations: one module per user operation, each over an open :class:`~engine.graph.Graph`.

:mod:`~engine.ops.write` is the commit protocol every write goes through (snapshot, arm an
intent, fork, effect, publish): a write's ``prepare`` returns one
:class:`~engine.ops.write_plan.CommitPlan` per attempt and :func:`commit` returns a
:class:`~engine.ops.write_plan.WriteResult` carrying it; :mod:`~engine.ops.write_effects` and
:mod:`~engine.ops.write_publish` are its effect and publish steps, :mod:`~engine.ops.limits` the
per-commit limits. :mod:`~engine.ops.load`, :mod:`~engine.ops.mutate` (``.gq`` mutations, with
:mod:`~engine.ops.mutate_eval`) and :mod:`~engine.ops.merge` (branch merge, with
:mod:`~engine.ops.merge_diff` and :mod:`~engine.ops.merge_check`) are the writes built on it;
:mod:`~engine.ops.branches` creates and deletes graph branches; :mod:`~engine.ops.snapshot` and
:mod:`~engine.ops.export` are reads; :mod:`~engine.ops.id_probe` answers which ids a table
already holds, for load and mutate.

The functions ``load`` and ``mutate`` are imported from their modules
(``from engine.ops.load import load``): exporting them here would shadow the submodules of the
same name.
"""

from engine.ops.branches import branch_documents, create_branch, delete_branch
from engine.ops.export import export_lines, export_tables
from engine.ops.id_probe import present_ids
from engine.ops.limits import MAX_ARROW_BYTES, MAX_ROWS
from engine.ops.load import LoadMode, LoadResult
from engine.ops.merge import merge_branch
from engine.ops.mutate import MutationResult, select_query
from engine.ops.snapshot import snapshot_document
from engine.ops.write import commit
from engine.ops.write_plan import CommitPlan, CommitResult, TableWrite, WriteResult

__all__ = [
    "MAX_ARROW_BYTES",
    "MAX_ROWS",
    "CommitPlan",
    "CommitResult",
    "LoadMode",
    "LoadResult",
    "MutationResult",
    "TableWrite",
    "WriteResult",
    "branch_documents",
    "commit",
    "create_branch",
    "delete_branch",
    "export_lines",
    "export_tables",
    "merge_branch",
    "present_ids",
    "select_query",
    "snapshot_document",
]
