"""The ``ray`` executor: pinned images validated as Ray tasks, one task per image.

Importing this module imports Ray (the ``[ray]`` extra); :mod:`omnigraph.migrator.executors` imports it only
when ``--executor ray`` is chosen. Every node of the cluster must have the same omnigraph-fence
release installed (the workers import this module), and must reach the graph: an ``s3://`` root
is read with the Lance storage options of the migrating process, which travel with each task
(credentials included: the cluster is trusted like the migration host); a local root must be at
the same path on every node.

A task gets plain values only (:class:`ImageTask`: dataset URI, storage options, table branch and
version, never a :class:`~omnigraph.engine.storage.store.GraphStore` or a Lance dataset), opens the image itself
and runs :func:`~omnigraph.migrator.executors.validate_image` on it, with DuckDB using the CPUs Ray assigned
to the task (one) under the usual memory limit. So a report is the local report of that image.
The worker also returns the versions the digest depends on
(:func:`~omnigraph.migrator.executors.digest_release`); a worker with other versions is refused
(:class:`~omnigraph.migrator.errors.ExecutorFailed`) rather than trusted to compute equal digests.

One task per image, not per fragment: a duplicate id can sit in two fragments of one image, so
exact fragment tasks would need a shuffle of every id hash across the cluster; images are the
unit of parallelism, which a graph of many branches and tables has plenty of.

Connecting (:meth:`RayExecutor.start`): no address starts a private local Ray instance
(``ray.init(address="local")``: never someone else's cluster, whatever ``RAY_ADDRESS`` says),
which :meth:`RayExecutor.close` shuts down; an address (``HOST:PORT``, or ``auto`` for the cluster
this machine joined) connects to that cluster, and ``close`` disconnects (the cluster keeps
running). A ``HOST:PORT`` that accepts no connection is refused at once rather than retried. A
process already connected to Ray keeps its connection.
Worker output is not forwarded (stdout carries only the command's result).

Failures: an error that validating raised in a task is raised here as it was (the same error and
exit code as locally); a cluster that cannot be reached or a task whose worker was lost raises
:class:`~omnigraph.migrator.errors.ExecutorFailed`. The remaining tasks are cancelled.
"""

from __future__ import annotations

import logging
import socket
import warnings
from dataclasses import dataclass

import ray
import ray.exceptions

from omnigraph.engine.progress import Progress
from omnigraph.engine.storage.lance_io import open_dataset_at
from omnigraph.engine.storage.store import GraphStore
from omnigraph.migrator.errors import ExecutorFailed
from omnigraph.migrator.executors import ImageReport, digest_release, validate_image, validation_session
from omnigraph.migrator.layout import VALIDATING, PinnedImage, open_images


@dataclass(frozen=True)
class ImageTask:
    """What a task needs to open one image: plain, picklable values."""

    image_id: str
    dataset_uri: str
    storage_options: dict[str, str] | None
    table_branch: str | None
    table_version: int


@dataclass(frozen=True)
class TaskResult:
    """A task's report and the versions of the worker that computed it."""

    report: ImageReport
    release: dict[str, str]


def validate_task(task: ImageTask) -> TaskResult:
    """Open ``task``'s image and validate it (runs on a Ray worker)."""
    dataset = open_dataset_at(task.dataset_uri, task.storage_options, task.table_branch, task.table_version)
    # Ray's RuntimeContext.get_assigned_resources has no annotations (an untyped call in Ray).
    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1.0)  # type: ignore[no-untyped-call]
    with validation_session(threads=max(1, int(cpus))) as session:
        report = validate_image(dataset, None, session)
    return TaskResult(report, digest_release())


_remote_validate = ray.remote(num_cpus=1)(validate_task)
CONNECT_SECONDS = 10.0


class RayExecutor:
    """Validates images as Ray tasks on the cluster at ``address`` (None: a private local one)."""

    def __init__(self, address: str | None) -> None:
        self.address = address
        self._started = False
        self._owns_connection = False

    def start(self) -> None:
        """Connect to the cluster (or start the private local instance); idempotent."""
        if self._started:
            return
        if not ray.is_initialized():
            if self.address not in (None, "auto"):
                _refuse_unreachable(self.address)
            try:
                with warnings.catch_warnings():
                    # Ray starts its processes with a pre-exec hook, which sets off Lance's fork
                    # warning; those children run a new program at once and never use Lance.
                    warnings.filterwarnings("ignore", message="lance is not fork-safe", category=UserWarning)
                    if self.address is None:
                        ray.init(address="local", include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
                    else:
                        ray.init(address=self.address, log_to_driver=False, logging_level=logging.WARNING)
            except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as error:
                raise ExecutorFailed(
                    f"cannot use {self.address or 'a local Ray instance'} to validate images: {type(error).__name__}: {error}",
                    {"executor": "ray", "address": self.address},
                ) from error
            self._owns_connection = True
        self._started = True

    def validate(self, store: GraphStore, images: list[PinnedImage], progress: Progress) -> dict[str, ImageReport]:
        """One task per image, reports in image order; progress advances as each task finishes."""
        if not images:
            progress.start(VALIDATING, 0)
            progress.finish()
            return {}
        self.start()
        rows = {image_id: dataset.count_rows() for image_id, dataset in open_images(store, images).items()}
        progress.start(VALIDATING, sum(rows.values()))
        tasks = {
            _remote_validate.remote(
                ImageTask(
                    image.image_id, store.dataset_uri(image.table_path), store.storage_options, image.table_branch, image.table_version
                )
            ): image.image_id
            for image in images
        }
        expected = digest_release()
        reports: dict[str, ImageReport] = {}
        pending = list(tasks)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    image_id = tasks[ref]
                    result = _result(ref, image_id)
                    if result.release != expected:
                        raise ExecutorFailed(
                            f"a Ray worker validating {image_id} runs {result.release}, this process runs {expected}; "
                            "install the same omnigraph-fence release on every node (digests depend on these versions)",
                            {"executor": "ray", "image_id": image_id, "worker": result.release, "driver": expected},
                        )
                    reports[image_id] = result.report
                    progress.advance(rows[image_id])
        finally:
            for ref in pending:
                ray.cancel(ref)
        progress.finish()
        return {image.image_id: reports[image.image_id] for image in images}

    def close(self) -> None:
        """Shut down the local instance this executor started, or disconnect from the cluster."""
        if self._owns_connection:
            ray.shutdown()
            self._owns_connection = False
        self._started = False


def _refuse_unreachable(address: str) -> None:
    """Refuse an address where nothing accepts a connection within :data:`CONNECT_SECONDS`.

    Ray itself would retry such an address without end.
    """
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS):
            pass
    except OSError as error:
        raise ExecutorFailed(
            f"no Ray cluster answers at {address} ({error}); start one (`ray start --head`) or fix --ray-address",
            {"executor": "ray", "address": address},
        ) from error


def _result(ref: ray.ObjectRef[TaskResult], image_id: str) -> TaskResult:
    """The finished task's result; its own error re-raised as it was, Ray's as ExecutorFailed."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as failure:
        cause = getattr(failure, "cause", None)
        if isinstance(cause, Exception):
            raise cause from None
        raise ExecutorFailed(
            f"the Ray task validating {image_id} failed: {failure}", {"executor": "ray", "image_id": image_id}
        ) from failure
    except ray.exceptions.RayError as failure:
        raise ExecutorFailed(
            f"the Ray task validating {image_id} was lost: {type(failure).__name__}: {failure}",
            {"executor": "ray", "image_id": image_id},
        ) from failure
