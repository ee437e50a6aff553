"""The options of a migration run that are checked before anything runs, light enough for ``--help``.

Which executor validates the pinned images (:data:`EXECUTORS`; Ray only when its package is
installed, :func:`executor_unavailable`) and at which cluster address (:func:`ray_address_problem`),
and how many units or image reads are in flight at once (at most :data:`MAX_PARALLEL`; by default
:data:`DEFAULT_PARALLEL_LOCAL` on local disk and :data:`DEFAULT_PARALLEL_OBJECT_STORE` on an
object store), and how a duration such as the cutover's outage bound is written
(:func:`duration_seconds`). Importing this module loads no Lance, Arrow or DuckDB code.
"""

from __future__ import annotations

import importlib

from omnigraph.engine.errors import BadRequest

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


MAX_PARALLEL = 64
"""The most units in flight that ``--parallel`` accepts."""


DEFAULT_PARALLEL_LOCAL = 1
"""Work in flight on local disk when not chosen: there it costs CPU, not waiting."""


DEFAULT_PARALLEL_OBJECT_STORE = 16
"""Work in flight on an object store when not chosen: there it mostly waits on requests."""


_DURATION_UNITS = (("ms", 0.001), ("s", 1.0), ("m", 60.0))


def duration_seconds(text: str) -> float:
    """Seconds of a duration written ``5s``, ``500ms``, ``2m`` or as a plain number of seconds.

    Raises:
        BadRequest: not a duration, or a negative or infinite one.
    """
    number, factor = text.strip().lower(), 1.0
    for suffix, unit in _DURATION_UNITS:
        if number.endswith(suffix):
            number, factor = number.removesuffix(suffix), unit
            break
    try:
        seconds = float(number) * factor
    except ValueError:
        raise BadRequest(f"{text!r} is not a duration (for example 5s, 500ms, 2m)", {"duration": text}) from None
    if not 0 <= seconds < float("inf"):
        raise BadRequest(f"{text!r} is not a duration of zero or more seconds", {"duration": text})
    return seconds
