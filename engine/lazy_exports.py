"""Package faces whose names are imported on first use (a module-level ``__getattr__``, PEP 562).

A package's ``__init__`` lists the names it exports with the module each is defined in, and its
submodules; importing the package imports none of them. The first access of a name imports its
module and stores the value in the package, so every later access is a plain attribute read.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(
    package: str,
    names: Mapping[str, str],
    submodules: Iterable[str] = (),
    renamed: Mapping[str, str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each of ``names`` (exported name -> absolute
    module name) is that module's attribute of the same name, or of ``renamed[name]``; each of
    ``submodules`` is ``package.<name>``. Any other name is ``AttributeError``."""
    modules = tuple(submodules)
    aliases = dict(renamed or {})

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's own name
        if name in names:
            value = getattr(importlib.import_module(names[name]), aliases.get(name, name))
        elif name in modules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807 - the module hook's own name
        return sorted(set(vars(sys.modules[package])) | set(names) | set(modules))

    return __getattr__, __dir__
