"""External Blob objects: the size and the bytes of an object named by a ``file://`` or
``s3://`` URI (:data:`omnigraph.engine.schema.blob_values.EXTERNAL_SCHEMES`).

S3 objects are reached with the same settings as graph roots (:func:`omnigraph.engine.storage.store.s3_settings_from_env`:
endpoint, region and keys from the environment). A missing object is
:class:`ExternalObjectMissing`; callers word it for their input (line, property, id).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from omnigraph.engine.storage.store import s3_settings_from_env

if TYPE_CHECKING:
    import fsspec


class ExternalObjectMissing(Exception):
    """The object a Blob URI names does not exist (or is not a file)."""

    def __init__(self, uri: str) -> None:
        super().__init__(f"external object {uri!r} does not exist")
        self.uri = uri


def _located(uri: str) -> tuple[fsspec.AbstractFileSystem, str]:
    import fsspec  # only a load with external Blob values reaches here

    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        fs_kwargs, _ = s3_settings_from_env()
        return fsspec.filesystem("s3", **fs_kwargs), f"{parsed.netloc}/{parsed.path.lstrip('/')}"
    return fsspec.filesystem("file"), unquote(parsed.path)


def object_size(uri: str) -> int:
    """The size in bytes of the object ``uri`` names (one metadata request, no payload read)."""
    fs, path = _located(uri)
    try:
        info = fs.info(path)
    except FileNotFoundError:
        raise ExternalObjectMissing(uri) from None
    if info.get("type") != "file":
        raise ExternalObjectMissing(uri)
    return int(info["size"])


def read_object(uri: str) -> bytes:
    """The whole object ``uri`` names (callers have bounded its size with :func:`object_size`)."""
    fs, path = _located(uri)
    try:
        with fs.open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise ExternalObjectMissing(uri) from None
