"""Pinned images, as every executor sees them: what one is, and opening them at their versions.

:mod:`omnigraph.migrator.executors` (the executor seam and the local executor) and
:mod:`omnigraph.migrator.ray_executor` (the ``ray`` executor) both use these; neither imports the other at
import time (:mod:`omnigraph.migrator.executors` imports the Ray executor only when it is chosen).
"""

from __future__ import annotations

from dataclasses import dataclass

import lance

from omnigraph.engine.storage.lance_io import ImageRef, open_pinned
from omnigraph.engine.storage.store import GraphStore

VALIDATING = "validating ids"


@dataclass(frozen=True)
class PinnedImage:
    """One physical table image a plan pins: a Lance table branch (None = main) at a version."""

    image_id: str
    table_path: str
    table_branch: str | None
    table_version: int

    @property
    def image(self) -> ImageRef:
        """The image as a storage reference."""
        return ImageRef(self.table_path, self.table_branch, self.table_version)


def open_images(store: GraphStore, images: list[PinnedImage]) -> dict[str, lance.LanceDataset]:
    """Every image checked out at its pinned version, by image id, in the order given."""
    return {image.image_id: open_pinned(store, image.image) for image in images}
