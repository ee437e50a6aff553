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

The names below are imported from their modules on first access (a module-level
``__getattr__``): the progress protocol and the findings do not load the check.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {"CheckReport": "findings", "ClaimFindings": "findings", "Finding": "findings", "check_graph": "check"}
"""Each exported name and the module of this package that defines it."""

__all__ = ["CheckReport", "ClaimFindings", "Finding", "check_graph"]


def __getattr__(name: str) -> Any:
    """The names of :data:`_LAZY`, imported from their modules on first access."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
