"""Maintenance: routine Lance upkeep owned by the engine, and the read-only integrity check.

:mod:`~omnigraph.engine.maintenance.optimize` compacts, indexes and cleans up old versions of the tables a
branch owns, publishing each change as a graph commit; :mod:`~omnigraph.engine.maintenance.check` reads a
whole graph (any stamp, every branch), writes nothing and reports every inconsistency as the
findings of :mod:`~omnigraph.engine.maintenance.check`;
:mod:`~omnigraph.engine.progress` is the progress protocol of long work (optimize here, and the
migrator's steps) with its silent implementation.

The function ``optimize`` is imported from its module
(``from omnigraph.engine.maintenance.optimize import optimize``): exporting it here would shadow the
submodule of the same name.

The names below are imported from their modules on first access (a module-level
``__getattr__``): the progress protocol and the findings do not load the check.
"""
