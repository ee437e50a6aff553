"""``omnigraph blob get``: stream one Blob cell's bytes to stdout (or to FILE), read-only.

Usage: ``omnigraph blob get --type T --id ID --property P [--branch B] [--output FILE] GRAPH``.

The bytes go out as they are read (:meth:`omnigraph.Graph.open_blob`), never whole in memory;
the size and the destination are said on stderr. A refused cell (unknown type, property or
id, a null cell, a non-Blob property) is the typed error of the read, and writes nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import BinaryIO

import click

from omnigraph.cli.support import open_for_command, reports_errors, say

MAIN = "main"


@click.group("blob")
def blob_group() -> None:
    """Stream the bytes of one Blob property cell (`blob get`)."""


@blob_group.command("get")
@click.option("--type", "type_name", required=True, help="The node or edge type.")
@click.option("--id", "row_id", required=True, help="The row's id.")
@click.option("--property", "prop", required=True, help="The Blob property.")
@click.option("--branch", default=MAIN, show_default=True)
@click.option("--output", type=click.Path(dir_okay=False, writable=True), help="Write the bytes to FILE, not stdout.")
@click.argument("uri", metavar="GRAPH")
@reports_errors
def blob_get(type_name: str, row_id: str, prop: str, branch: str, output: str | None, uri: str) -> None:
    """Stream one Blob cell of GRAPH to stdout (or --output FILE)."""
    with open_for_command(uri, read_only=True) as opened, opened.open_blob(type_name, row_id, prop, branch=branch) as reader:
        if output is None:
            _copy(reader.chunks(), sys.stdout.buffer)
        else:
            with open(output, "wb") as target:
                _copy(reader.chunks(), target)
        say(f"{type_name} {row_id!r}.{prop} on {branch}: {reader.size} bytes to {output or 'stdout'}")


def _copy(chunks: Iterator[bytes], target: BinaryIO) -> None:
    for chunk in chunks:
        target.write(chunk)
    target.flush()
