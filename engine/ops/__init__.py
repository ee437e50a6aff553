"""Operations: one module per user operation, each over an open :class:`~omnigraph.engine.graph.Graph`.

:mod:`~omnigraph.engine.ops.write` is the commit protocol every write goes through (prepare, arm
an intent, effects, publish, disarm) with its per-commit limits: a write's ``prepare`` returns
one :class:`~omnigraph.engine.ops.write.CommitPlan` per attempt and
:func:`~omnigraph.engine.ops.write.commit` returns a
:class:`~omnigraph.engine.ops.write.WriteResult` carrying it. The writes built on it are
:mod:`~omnigraph.engine.ops.load` (a JSONL file, as one commit or one per chunk),
:mod:`~omnigraph.engine.ops.mutate` (``.gq`` mutations, as one commit or a chain of chunked
commits; the evaluation of one query is :mod:`~omnigraph.engine.ops.mutate_eval`) and
:mod:`~omnigraph.engine.ops.merge` (branch merge and the checks of a merged result, over the
three-way comparison of :mod:`~omnigraph.engine.ops.merge_diff`).
:mod:`~omnigraph.engine.ops.constraints` checks the schema's row constraints on a write's result
and answers which ids a table already holds, for load and mutate;
:mod:`~omnigraph.engine.ops.blobs` stages the Blob cells of a keyed write and streams one stored
cell (``blob get``). :mod:`~omnigraph.engine.ops.branches` creates, lists and deletes graph
branches; :mod:`~omnigraph.engine.ops.snapshot` (``snapshot`` and ``schema show``) and
:mod:`~omnigraph.engine.ops.export` are reads.

This package exports no names: callers import each name from the module that defines it
(``from omnigraph.engine.ops.load import load``), so importing one operation's module
(``omnigraph.engine.ops.snapshot``, say) runs none of the others: a read does not load the write
protocol, the merge or ``.gq`` mutations.
"""
