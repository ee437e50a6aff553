"""Maintenance: routine Lance upkeep owned by the engine, and the read-only integrity check.

:mod:`~omnigraph.engine.maintenance.optimize` compacts, indexes and cleans up old versions of the tables a
branch owns, publishing each change as a graph commit; :mod:`~omnigraph.engine.maintenance.check` reads a
whole graph (any stamp, every branch), writes nothing and reports every inconsistency as the
findings of :mod:`~omnigraph.engine.maintenance.findings` (a :class:`~omnigraph.engine.maintenance.findings.Finding`
per problem in a :class:`~omnigraph.engine.maintenance.findings.CheckReport`), each saying what resolves
it (:mod:`~omnigraph.engine.maintenance.fixes`). Long work reports through
the progress protocol of :mod:`omnigraph.engine.progress`.

The package itself defines no names: callers import them from the module that defines them
(``from omnigraph.engine.maintenance.optimize import optimize``), so that the findings do not load
the check.
"""
