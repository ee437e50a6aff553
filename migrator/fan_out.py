"""Independent reads (or units) in flight at once, in a bounded pool of threads, results in order.

On an object store every read of a migration is a few requests that mostly wait; a graph with
many branches reads each branch's manifest and tables several times (preflight, plan, verify,
stamp). :func:`fan_out` runs such per-branch or per-table work ``workers`` at a time and returns
the results in the order of the inputs, so what is printed and persisted does not depend on
timing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from omnigraph.engine.manifest.manifest import Manifest
    from omnigraph.engine.manifest.rows import BranchSnapshot
    from omnigraph.engine.storage.store import GraphStore

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_PARALLEL_LOCAL = 1
"""Work in flight on local disk when not chosen: there it costs CPU, not waiting."""
DEFAULT_PARALLEL_OBJECT_STORE = 16
"""Work in flight on an object store when not chosen: there it mostly waits on requests."""
MAX_PARALLEL = 64
"""The most units in flight that ``--parallel`` accepts."""


def default_parallel(store: GraphStore) -> int:
    """How many units (or reads) are in flight on ``store`` when ``--parallel`` is not given."""
    return DEFAULT_PARALLEL_LOCAL if store.is_local else DEFAULT_PARALLEL_OBJECT_STORE


def fan_out(work: Callable[[T], R], items: Sequence[T], workers: int) -> list[R]:
    """``work(item)`` for every item, up to ``workers`` at once, results in the order of ``items``.

    Every item runs (none is cancelled); if any raised, the exception of the first such item in
    the order of ``items`` is raised once all have finished. ``workers`` <= 1, or a single item,
    runs them one after another in this thread.
    """
    if workers <= 1 or len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="fan-out") as pool:
        futures = [pool.submit(work, item) for item in items]
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
    return [future.result() for future in futures]


def read_snapshots(manifest: Manifest, branches: Sequence[str]) -> list[BranchSnapshot]:
    """The latest snapshot of each of ``branches``, in their order, read
    :func:`default_parallel` at a time; a branch that does not exist is ``not_found``."""
    return fan_out(manifest.snapshot, branches, default_parallel(manifest.store))
