"""The manifest: the ``__manifest`` catalog dataset, graph branches and the graph commit history.

:mod:`~omnigraph.engine.manifest.rows` is the row schema of ``__manifest`` and how a branch's rows fold into
a :class:`BranchSnapshot`, :mod:`~omnigraph.engine.manifest.manifest` reads and publishes ``__manifest``
(its rows, the format stamp, graph branches), :mod:`~omnigraph.engine.manifest.commit_graph` is the
commit DAG with its merge bases and :mod:`~omnigraph.engine.manifest.commit_graph` the ``commit list`` walk.
"""
