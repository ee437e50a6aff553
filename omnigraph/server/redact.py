"""Errors as a client may see them: without the server's graph root.

An engine error names the graph's root on purpose (the CLI prints commands that run as printed,
``omnigraph recover /srv/graphs/social``); over HTTP the root is the server's business, so every
error document the server answers has each spelling of its root (the URI it serves, its absolute
and resolved paths, an S3 URI's ``bucket/prefix``) replaced by ``GRAPH``: the message still says
what the object is (``GRAPH/nodes/Person.lance``), not where the server keeps it.
"""

from __future__ import annotations

import os
from typing import Any

PLACEHOLDER = "GRAPH"


def spellings(uri: str) -> list[str]:
    """Every way an error may spell the root ``uri``, longest first."""
    found = {uri.rstrip("/")}
    scheme, separator, rest = uri.partition("://")
    if separator and scheme != "file":
        found.add(rest.rstrip("/"))  # object stores often print bucket/prefix without the scheme
    else:
        local = rest if separator else uri
        for path in (os.path.abspath(local), os.path.realpath(local)):
            found |= {path, f"file://{path}"}
    return sorted((s for s in found if s and s != "/"), key=len, reverse=True)


class Redactor:
    """Replaces every spelling of one graph root in a JSON document's strings."""

    def __init__(self, uri: str) -> None:
        self.spellings = spellings(uri)

    def text(self, value: str) -> str:
        """``value`` with every spelling of the root replaced by :data:`PLACEHOLDER`."""
        for spelling in self.spellings:
            value = value.replace(spelling, PLACEHOLDER)
        return value

    def document(self, value: Any) -> Any:
        """``value`` (a JSON document) with :meth:`text` applied to every string in it, keys included."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.document(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.document(v) for v in value]
        return value
