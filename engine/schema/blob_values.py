"""The JSON spelling of a Blob cell, the same on input (load, ``.gq`` values) and on export.

A Blob value is a string:

* ``"base64:<standard base64>"``: managed bytes, stored in the table's blob column
  (``"base64:"`` alone is the empty blob);
* ``"file:///abs/path"`` or ``"s3://bucket/key"``: an external object. What is stored depends on
  the write (``docs/schema.md``): a keyed insert/upsert or a load append/merge copies the
  object's bytes into the table; a load overwrite keeps the URI as a reference.

Anything else (another type, another URI scheme, malformed base64) is refused. Coercion reads
nothing: whether an external object exists, and its size, is settled by the write.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any
from urllib.parse import urlparse

from lance.blob import Blob

BASE64_PREFIX = "base64:"
EXTERNAL_SCHEMES = ("file", "s3")
"""URI schemes an external Blob object may be named by."""
_SPELLING = f'a Blob ("{BASE64_PREFIX}..." or a file:// or s3:// URI)'


class BlobSpellingError(ValueError):
    """A JSON value that is not a Blob spelling; the message says why."""


def parse_blob(value: Any) -> Blob:
    """The Lance :class:`Blob` a JSON value spells: bytes for ``base64:``, a whole-object
    reference (no range) for a URI. Raises :class:`BlobSpellingError`."""
    if not isinstance(value, str):
        shown = repr(value)
        raise BlobSpellingError(f"expected {_SPELLING}, got {shown if len(shown) <= 60 else shown[:57] + '...'}")
    if value.startswith(BASE64_PREFIX):
        try:
            return Blob.from_bytes(base64.b64decode(value[len(BASE64_PREFIX) :], validate=True))
        except (binascii.Error, ValueError):
            raise BlobSpellingError(f"the text after {BASE64_PREFIX!r} is not valid base64") from None
    parsed = urlparse(value)
    if parsed.scheme not in EXTERNAL_SCHEMES or not parsed.path.strip("/") or (parsed.scheme == "s3" and not parsed.netloc):
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise BlobSpellingError(f"expected {_SPELLING}, got {shown!r}")
    return Blob.from_uri(value)


def spell_bytes(data: bytes) -> str:
    """The JSON spelling of managed bytes."""
    return BASE64_PREFIX + base64.b64encode(data).decode("ascii")
