"""The manifest: the ``__manifest`` catalog dataset, graph branches and the graph commit history.

:mod:`~omnigraph.engine.manifest.rows` is the row schema of ``__manifest`` and how a branch's rows fold
into a :class:`~omnigraph.engine.manifest.rows.BranchSnapshot` (no I/O);
:mod:`~omnigraph.engine.manifest.manifest` reads and publishes ``__manifest`` (its rows, the format
stamp, graph branches); :mod:`~omnigraph.engine.manifest.commit_graph` is the commit DAG with its merge
bases and the ``commit list`` walk. The package itself defines no names: callers import them from
the module that defines them.
"""
