"""Maintenance: routine Lance upkeep owned by the engine, and the read-only integrity check.

:mod:`~engine.maintenance.optimize` compacts, indexes and cleans up old versions of the tables a
branch owns, publishing each change as a graph commit; :mod:`~engine.maintenance.check` reads a
whole graph (any stamp, every branch), writes nothing and reports every inconsistency as the
findings of :mod:`~engine.maintenance.findings`;
:mod:`~engine.maintenance.progress` is the progress protocol of long work (optimize here, and the
migrator's steps) with its silent implementation.

The function ``optimize`` is imported from its module
(``from engine.maintenance.optimize import optimize``): exporting it here would shadow the
submodule of the same name.
"""

from engine.maintenance.check import check_graph
from engine.maintenance.findings import CheckReport, ClaimFindings, Finding

__all__ = ["CheckReport", "ClaimFindings", "Finding", "check_graph"]
