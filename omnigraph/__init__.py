"""omnigraph: the fenced graph engine as a Python library.

::

    from pathlib import Path

    import omnigraph

    with omnigraph.init("social", Path("social.pg")) as graph:
        graph.load("social.jsonl", mode="append")
        print(graph.snapshot("main").tables[0].rows)

:func:`init` creates a graph root, :func:`open` opens one; both return a :class:`Graph`
(:mod:`omnigraph.graph`), which loads, mutates, branches, merges, snapshots, exports, queries and
checks, and returns the frozen results of :mod:`omnigraph.results` (the field names of the CLI's
``--json`` documents). Errors are the :class:`OmnigraphError` family of :mod:`omnigraph.errors`
(``omnigraph.KeyConflict`` is the same class). Migrations from format 4: :mod:`omnigraph.migrate`.
The tutorial is ``docs/python-api.md``.

A graph root is a directory or ``s3://bucket/prefix``. S3 settings come from the environment
(``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ...), as for the console scripts,
or from ``storage_options`` (``aws_endpoint``, ``aws_region``, ``aws_access_key_id``,
``aws_secret_access_key``, ``aws_session_token``, ``allow_http``), which take precedence.

``open`` is public but left out of ``__all__``, so that ``from omnigraph import *`` does not
shadow the builtin ``open``.

Importing this package loads no Lance, Arrow or DuckDB code: the graph machinery is imported by
the first :func:`open` or :func:`init` (or the first use of a name that needs it).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from omnigraph import errors
from omnigraph.engine import __version__
from omnigraph.errors import (
    BadRequest,
    ClaimHeld,
    Conflict,
    FormatBarrier,
    FormatRefused,
    KeyConflict,
    MergeConflict,
    NotFound,
    OmnigraphError,
    PreconditionFailed,
    ReadOnlyGraph,
    ReadSetConflict,
    RecoveryRequired,
    ResourceLimit,
    ValidationFailed,
)

if TYPE_CHECKING:
    from omnigraph.engine.maintenance.findings import CheckReport
    from omnigraph.engine.ops.blobs import BlobReader
    from omnigraph.engine.query.limits import QueryCancel
    from omnigraph.engine.reconcile.recovery import RecoveryRecord
    from omnigraph.graph import Graph

WRITES_FORMAT = "5"
"""The format stamp the engine writes."""

ENGINE = "omnigraph"
"""The program profile of the format-5 engine (the default of :func:`open` and :func:`init`)."""
FORMAT_4_WRITER = "omnigraph-v4"
"""The program profile of the previous release's format-4 writer, emulated (no key-conflict
fencing) so that rehearsals and tests have real format-4 graphs to migrate; not for applications."""

_LAZY = {
    "Graph": "omnigraph.graph",
    "BlobReader": "omnigraph.engine.ops.blobs",
    "CheckReport": "omnigraph.engine.maintenance.findings",
    "Recovery": "omnigraph.engine.reconcile.recovery",
    "Branch": "omnigraph.results",
    "ChunkedMutationResult": "omnigraph.results",
    "Commit": "omnigraph.results",
    "CreatedBranch": "omnigraph.results",
    "DeletedBranch": "omnigraph.results",
    "InitResult": "omnigraph.results",
    "LoadResult": "omnigraph.results",
    "MergeResult": "omnigraph.results",
    "MutationResult": "omnigraph.results",
    "QueryCancel": "omnigraph.engine.query.limits",
    "QueryPlan": "omnigraph.results",
    "QueryResult": "omnigraph.results",
    "Readiness": "omnigraph.results",
    "Snapshot": "omnigraph.results",
    "SnapshotTable": "omnigraph.results",
}
_RENAMED = {"Recovery": "RecoveryRecord"}
_SUBMODULES = ("graph", "inputs", "lint", "maintenance", "migrate", "results", "sources")

__all__ = [
    "ENGINE",
    "FORMAT_4_WRITER",
    "WRITES_FORMAT",
    "BadRequest",
    "BlobReader",
    "Branch",
    "CheckReport",
    "ChunkedMutationResult",
    "ClaimHeld",
    "Commit",
    "Conflict",
    "CreatedBranch",
    "DeletedBranch",
    "FormatBarrier",
    "FormatRefused",
    "Graph",
    "InitResult",
    "KeyConflict",
    "LoadResult",
    "MergeConflict",
    "MergeResult",
    "MutationResult",
    "NotFound",
    "OmnigraphError",
    "PreconditionFailed",
    "QueryCancel",
    "QueryPlan",
    "QueryResult",
    "ReadOnlyGraph",
    "ReadSetConflict",
    "Readiness",
    "Recovery",
    "RecoveryRequired",
    "ResourceLimit",
    "Snapshot",
    "SnapshotTable",
    "ValidationFailed",
    "__version__",
    "check",
    "default_actor",
    "errors",
    "init",
    "maintenance",
    "migrate",
]


def open(
    uri: str | os.PathLike[str],
    *,
    read_only: bool = False,
    actor: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    program: str = ENGINE,
    lazy: bool = False,
    on_recovery: Callable[[Sequence[RecoveryRecord]], None] | None = None,
    stamp_checks: Literal["every_call", "at_open"] = "every_call",
) -> Graph:
    """Open the graph at ``uri`` (a directory, ``file://`` URL or ``s3://bucket/prefix``).

    Read-write (the default), the open applies the write rules now: it is refused at a stamp the
    program does not write and while a migration claim is held, then resolves the interrupted
    commits of writers that are gone (:attr:`Graph.recovered`, and ``on_recovery`` is told) and
    adopts out-of-band table commits that change no row. ``read_only=True`` opens at any stamp
    the program reads and refuses every write with :class:`ReadOnlyGraph`. ``lazy=True`` opens
    nothing yet: the first read or write opens what it needs (a server that starts while a
    migration holds the barrier serves reads, and writes once it is over).

    Args:
        uri: the graph root.
        read_only: refuse every write; resolve nothing.
        actor: who commits record (default ``OMNIGRAPH_ACTOR``, else the login name).
        storage_options: S3 settings that take precedence over the environment.
        program: :data:`ENGINE`, or :data:`FORMAT_4_WRITER` for the format-4 writer's emulation.
        lazy: defer every open to the first use.
        on_recovery: called with what each read-write open resolved, when it resolved anything.
        stamp_checks: ``"every_call"`` re-reads the stamp (and, before a write, the claim) on each
            call; ``"at_open"`` only when a handle is opened (a command that opens, acts once
            and exits).

    Raises:
        NotFound: no graph at ``uri`` (or no such bucket).
        BadRequest: a half-made graph (an interrupted init), a bad URI, an unknown storage option.
        FormatRefused: the stamp does not let the program open the graph that way.
        ClaimHeld: read-write while a migration claim is held.
    """
    from omnigraph.graph import connect

    return connect(
        os.fspath(uri),
        read_only=read_only,
        actor=actor,
        storage_options=storage_options,
        program=program,
        lazy=lazy,
        on_recovery=on_recovery,
        stamp_checks=stamp_checks,
    )


def init(
    uri: str | os.PathLike[str],
    schema: str | Path,
    *,
    actor: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    program: str = ENGINE,
    strict: bool = False,
) -> Graph:
    """Create a graph at ``uri`` (an empty or absent root) and return it open read-write.

    ``schema`` is the ``.pg`` schema source text, or a :class:`~pathlib.Path` of a file holding it.
    Every table is created, then ``__manifest`` with the stamp, last: an interrupted init leaves a
    root that :func:`open` refuses as half-made.

    Args:
        uri: the graph root to create.
        schema: the schema source (``str``) or its file (``Path``).
        actor: who the ``init`` commit records (default ``OMNIGRAPH_ACTOR``, else the login name).
        storage_options: S3 settings that take precedence over the environment.
        program: :data:`ENGINE`, or :data:`FORMAT_4_WRITER` to create a format-4 graph.
        strict: refuse a schema with a warning (an unknown annotation such as ``@uniq``) instead
            of keeping it (:attr:`Graph.schema_warnings`).

    Raises:
        BadRequest: the root is not empty or already holds a graph, the schema does not parse
            (line:column) or has a warning under ``strict``, the file cannot be read or is not UTF-8.
        NotFound: no such bucket.
    """
    from omnigraph.graph import create

    return create(os.fspath(uri), _schema_source(schema), actor=actor, storage_options=storage_options, program=program, strict=strict)


def check(uri: str | os.PathLike[str], *, storage_options: Mapping[str, str] | None = None) -> CheckReport:
    """The read-only integrity check of the graph at ``uri``, as ``omnigraph check`` runs it.

    It checks every branch at any stamp (a graph no program may open included), pins, heads,
    intents, the stamp and the claim, duplicate or null ids, edge endpoints. A report with
    findings is returned, not raised (``report.ok`` is False; each finding names the command that
    resolves it).

    Raises:
        NotFound: there is no graph at ``uri``.
    """
    from omnigraph.engine.storage.store import open_store
    from omnigraph.maintenance import integrity_check

    return integrity_check(open_store(os.fspath(uri), storage_options))


def default_actor() -> str:
    """Who commits record when no actor is given: ``OMNIGRAPH_ACTOR`` if set, else the login name.

    The login name is ``unknown`` if there is none.
    """
    from omnigraph.engine.graph import default_actor as engine_default_actor

    return engine_default_actor()


def _schema_source(schema: str | Path) -> str:
    if not isinstance(schema, Path):
        return schema
    try:
        return schema.read_text(encoding="utf-8")
    except OSError as error:
        raise BadRequest(f"cannot read schema file {str(schema)!r}: {error.strerror}", {"path": str(schema)}) from error
    except UnicodeDecodeError as error:
        raise BadRequest(f"schema file {str(schema)!r} is not UTF-8: {error.reason} at byte {error.start}", {"path": str(schema)}) from None


def __getattr__(name: str) -> Any:
    """A name of :data:`_LAZY` or a submodule of :data:`_SUBMODULES`, imported on first access (PEP 562).

    It is then kept in the package, so that ``import omnigraph`` loads no graph machinery.
    """
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), _RENAMED.get(name, name))
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The package's names, the lazy ones included."""
    return sorted({*globals(), *_LAZY, *_SUBMODULES})
