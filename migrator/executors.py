"""Where step 5 of the migration (validate every pinned image) runs: the executor seam.

An executor validates pinned images (:class:`~omnigraph.migrator.images.PinnedImage`) and returns one
:class:`~omnigraph.migrator.validate.ImageReport` per image, keyed by image id in image-id order. Every
executor keeps one contract: an image's report is exactly what
:func:`~omnigraph.migrator.validate.validate_image` gives for that image opened in this process (rows, null
ids, duplicates, digest, fingerprint), so the ledger records written from the reports, the
duplicate inventory and the exit code do not depend on the executor. Progress is
``start("validating ids", rows of every image)``, ``advance(rows)`` as rows are validated, then
``finish()``. An executor writes nothing to the graph or the ledger.

Executors (:data:`EXECUTORS`): ``local`` validates in this process (:class:`LocalExecutor`);
``ray`` validates as tasks on a Ray cluster (:mod:`omnigraph.migrator.ray_executor`, imported only when
chosen: it needs the ``[ray]`` extra). Lifecycle: :func:`open_executor` gives a context manager;
``start()`` acquires what the executor needs (idempotent; ``validate`` starts it when needed) and
the context's exit releases it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.progress import Progress
from omnigraph.engine.storage.store import GraphStore
from omnigraph.migrator.executor_names import EXECUTORS
from omnigraph.migrator.images import VALIDATING, PinnedImage, open_images
from omnigraph.migrator.validate import ImageReport, validate_image, validation_session


class ImageExecutor(Protocol):
    """Validates pinned images (see the module docstring for the contract)."""

    def start(self) -> None: ...

    def validate(self, store: GraphStore, images: list[PinnedImage], progress: Progress) -> dict[str, ImageReport]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Validates the images one after the other in this process, in one DuckDB session."""

    def start(self) -> None:
        return None

    def validate(self, store: GraphStore, images: list[PinnedImage], progress: Progress) -> dict[str, ImageReport]:
        datasets = open_images(store, images)
        progress.start(VALIDATING, sum(dataset.count_rows() for dataset in datasets.values()))
        with validation_session() as session:
            reports = {image_id: validate_image(dataset, progress.advance, session) for image_id, dataset in datasets.items()}
        progress.finish()
        return reports

    def close(self) -> None:
        return None


@contextmanager
def open_executor(name: str, ray_address: str | None = None) -> Iterator[ImageExecutor]:
    """The executor called ``name`` (one of :data:`EXECUTORS`), released on exit.

    ``ray_address`` is the Ray cluster to connect to (``ray`` only; None starts a private local
    Ray instance). Check :func:`omnigraph.migrator.executor_names.executor_unavailable` first: a missing package raises ImportError.
    """
    executor: ImageExecutor
    if name == "local":
        if ray_address is not None:
            raise BadRequest("a Ray address needs the ray executor", {"executor": name})
        executor = LocalExecutor()
    elif name == "ray":
        from omnigraph.migrator.ray_executor import RayExecutor

        executor = RayExecutor(ray_address)
    else:
        raise BadRequest(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}", {"executor": name})
    try:
        yield executor
    finally:
        executor.close()
