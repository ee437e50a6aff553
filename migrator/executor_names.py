"""The executors' names and the checks of their options that need no executor: light enough for
a command's ``--help`` to import (:mod:`omnigraph.migrator.executors` imports Lance, pyarrow and the
validator)."""

from __future__ import annotations

import importlib

EXECUTORS = ("local", "ray")
RAY_INSTALL = "pip install -e '.[ray]' in a checkout of omnigraph-fence (`make venv` installs it into .venv)"


def executor_unavailable(name: str) -> str | None:
    """Why executor ``name`` cannot run in this installation (a package is missing), or None."""
    if name != "ray":
        return None
    try:
        importlib.import_module("ray")
    except ImportError:
        return f"--executor ray needs Ray, which is not installed: {RAY_INSTALL}"
    return None


def ray_address_problem(address: str) -> str | None:
    """What is wrong with a ``--ray-address`` value, or None: ``auto`` or ``HOST:PORT``."""
    if address == "auto":
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not host or "/" in host or not port.isdigit() or not 0 < int(port) < 65536:
        return f"{address!r} is not a Ray cluster address: give HOST:PORT of the cluster's head, or auto"
    return None
