"""A pinned table image, and opening one.

A graph branch pins each of its tables at one immutable *image*: a dataset path, a Lance table
branch of that dataset (``None`` = the dataset's main branch) and a version of that branch.
Every fixed-version open in the project goes through :func:`open_pinned` with an
:class:`ImageRef`; :func:`omnigraph.engine.storage.lance_io.open_dataset` with no version is for the latest
version of a branch (a HEAD, which is not an image: it can move).
"""

from __future__ import annotations

from dataclasses import dataclass

import lance

from omnigraph.engine.storage.lance_io import open_dataset
from omnigraph.engine.storage.store import GraphStore


@dataclass(frozen=True, order=True)
class ImageRef:
    """One immutable table image: ``path`` checked out on Lance branch ``branch`` at ``version``."""

    path: str
    branch: str | None
    version: int

    def at(self, version: int) -> ImageRef:
        """The image of the same table branch at another version."""
        return ImageRef(self.path, self.branch, version)

    def on(self, branch: str | None) -> ImageRef:
        """The image at the same version number on another Lance branch of the same dataset.

        Lance numbers a fork's versions from its fork point, so a fork created from this image
        starts at this image's version: ``image.on(fork)`` is the fork's first image.
        """
        return ImageRef(self.path, branch, self.version)


def open_pinned(store: GraphStore, image: ImageRef) -> lance.LanceDataset:
    """The dataset checked out at exactly ``image``; Lance's errors pass through unchanged."""
    return open_dataset(store, image.path, image.branch, image.version)
