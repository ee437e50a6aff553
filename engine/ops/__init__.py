"""Operations: one module per user operation, each over an open :class:`~omnigraph.engine.graph.Graph`.

:mod:`~omnigraph.engine.ops.write` is the commit protocol every write goes through (snapshot, arm an
intent, fork, effect, publish): a write's ``prepare`` returns one
:class:`~omnigraph.engine.ops.write.CommitPlan` per attempt and :func:`commit` returns a
:class:`~omnigraph.engine.ops.write.WriteResult` carrying it; :mod:`~omnigraph.engine.ops.write` and
:mod:`~omnigraph.engine.ops.write` are its effect and publish steps, :mod:`~omnigraph.engine.ops.write` the
per-commit limits. :mod:`~omnigraph.engine.ops.load`, :mod:`~omnigraph.engine.ops.mutate` (``.gq`` mutations, with
:mod:`~omnigraph.engine.ops.mutate_eval`) and :mod:`~omnigraph.engine.ops.merge` (branch merge, with
:mod:`~omnigraph.engine.ops.merge_diff` and :mod:`~omnigraph.engine.ops.merge`) are the writes built on it;
:mod:`~omnigraph.engine.ops.branches` creates and deletes graph branches; :mod:`~omnigraph.engine.ops.snapshot` and
:mod:`~omnigraph.engine.ops.export` are reads; :mod:`~omnigraph.engine.ops.constraints` answers which ids a table
already holds, for load and mutate.

The functions ``load`` and ``mutate`` are imported from their modules
(``from omnigraph.engine.ops.load import load``): exporting them here would shadow the submodules of the
same name.

The names below are imported from their modules on first access (a module-level
``__getattr__``), so that importing one operation's module (``omnigraph.engine.ops.snapshot``, say) runs
none of the others: a read does not load the write protocol, the merge or ``.gq`` mutations.
"""
