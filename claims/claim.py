"""Create-if-absent claims on a graph store: acquire, inspect, release, break.

A claim is one object at a caller-chosen path relative to the graph root (the migrator uses
``__migration/claim.json``), holding a :class:`~omnigraph.claims.document.ClaimDocument` in canonical JSON.
It is created with :meth:`omnigraph.engine.storage.store.GraphStore.put_if_absent` (``link(2)`` locally,
``If-None-Match: *`` on S3), so of any number of concurrent acquirers exactly one wins.

There is no time-based takeover anywhere, on purpose: no lease, no expiry, no "stale after N
minutes". A holder that looks dead may only be paused (a GC pause, SIGSTOP, a VM live migration,
a network partition) and can resume after any timeout and keep writing as if it still held the
claim. Only an operator who has proven the holder dead (its process is gone on its host) may
remove the claim, with :func:`break_` and the holder's exact token; the break leaves an audit
record next to the claim.

Refusals: a claim held by someone else raises :class:`omnigraph.engine.errors.ClaimHeld`; a release or
break with a token that is not the stored one (or of a claim that is absent) raises
:class:`omnigraph.engine.errors.PreconditionFailed` with ``details`` ``{"path", "expected_token",
"actual_token", "holder"}`` and changes nothing; a stored object that does not parse raises
:class:`omnigraph.claims.errors.ClaimCorrupt` and is never treated as absent.

Residual window: the store has no conditional delete, so release and break re-read the claim
and delete it only if it still carries the token. The claim can change hands between that read
and the delete only if its holder released it concurrently (impossible for a dead holder, and a
live holder releasing its own claim twice is a caller bug).
"""

from __future__ import annotations

import os
import socket
from typing import Any

from pydantic import ValidationError

from omnigraph.claims.document import BreakRecord, ClaimDocument
from omnigraph.claims.errors import ClaimCorrupt, claim_held, validation_problem
from omnigraph.claims.fields import new_token, utc_timestamp
from omnigraph.engine import __version__
from omnigraph.engine.errors import BadRequest, PreconditionFailed
from omnigraph.engine.storage.process import process_start_marker
from omnigraph.engine.storage.store import GraphStore, canonical_json

# How many times acquire retries when the claim vanished between its failed create and its read
# (the holder released it in between); each retry is another atomic create-if-absent.
_ACQUIRE_ATTEMPTS = 5


def acquire(store: GraphStore, path: str, *, operation: str, migration_id: str, owner: str, online: bool = False) -> ClaimDocument:
    """Create the claim at ``path`` for this process and return it, or raise ``ClaimHeld``.

    ``ClaimHeld.details`` is ``{"holder": <holder document as a dict>, "path": path}``. The token
    of the returned document is the only way to release the claim.
    """
    _require_text(operation=operation, migration_id=migration_id, owner=owner)
    document = ClaimDocument(
        operation=operation,
        migration_id=migration_id,
        token=new_token(),
        owner=owner,
        host=socket.gethostname(),
        pid=os.getpid(),
        created_at=utc_timestamp(),
        tool_version=__version__,
        process_start=process_start_marker(os.getpid()),
        online=online,
    )
    # ``online`` is written only when true, so a claim of an offline migration reads as before.
    data = canonical_json(document.model_dump(mode="json", exclude=None if online else {"online"}))
    for _ in range(_ACQUIRE_ATTEMPTS):
        if store.put_if_absent(path, data):
            return document
        holder = inspect(store, path)
        if holder is not None:
            raise claim_held(
                f"{path} is held by owner {holder.owner!r} on host {holder.host}, pid {holder.pid} "
                f"(operation {holder.operation!r}, migration {holder.migration_id}, since "
                f"{holder.created_at}, token {holder.token}). Inspect the claim first. If that process "
                "is alive, let it finish or resume/abort it with its token. Only once it is proven "
                "dead (its process is gone on that host) break the claim with its token; there is no "
                "time-based takeover.",
                holder,
                path=path,
            )
    raise claim_held(
        f"{path} kept changing hands: it was held at each of {_ACQUIRE_ATTEMPTS} attempts and "
        "released before it could be read. Another process is acquiring and releasing it; "
        "inspect the claim and retry once that has stopped.",
        None,
        path=path,
    )


def inspect(store: GraphStore, path: str) -> ClaimDocument | None:
    """The claim at ``path``, or None if there is none; ``ClaimCorrupt`` if it does not parse."""
    try:
        data = store.read_bytes(path)
    except FileNotFoundError:
        return None
    try:
        return ClaimDocument.model_validate_json(data)
    except ValidationError as error:
        raise ClaimCorrupt(path, validation_problem(error)) from error


def release(store: GraphStore, path: str, token: str) -> None:
    """Delete the claim at ``path`` if its stored token is ``token``; else ``PreconditionFailed``."""
    _held_with(store, path, token, action="release")
    _delete_if_token(store, path, token)


def break_(store: GraphStore, path: str, token: str, reason: str, breaker: str) -> BreakRecord:
    """Remove a claim whose holder an operator has proven dead, leaving an audit record.

    ``token`` must be the holder's exact token (see :func:`inspect`); otherwise, or if there is
    no claim, ``PreconditionFailed`` is raised and nothing changes. The
    :class:`~omnigraph.claims.document.BreakRecord` is created (create-if-absent) at
    :func:`break_record_path` before the claim is removed; if a previous break of the same claim
    wrote it and stopped before removing the claim, that record is reused and returned.
    """
    _require_text(reason=reason, breaker=breaker)
    holder = _held_with(store, path, token, action="break")
    record = BreakRecord(
        claim=holder,
        breaker=breaker,
        host=socket.gethostname(),
        pid=os.getpid(),
        reason=reason,
        broken_at=utc_timestamp(),
    )
    record_path = break_record_path(path, token)
    if not store.put_if_absent(record_path, canonical_json(record)):
        record = _read_break_record(store, record_path)
        if record.claim != holder:
            raise ClaimCorrupt(record_path, "it names a different claim", what="break record for this claim")
    _delete_if_token(store, path, token)
    return record


def break_record_path(path: str, token: str) -> str:
    """Where :func:`break_` records the break of the claim at ``path`` holding ``token``."""
    return f"{path}.broken/{token}.json"


def read_break(store: GraphStore, path: str, token: str) -> BreakRecord | None:
    """The record of a break of the claim at ``path`` that held ``token``, or None if never broken."""
    record_path = break_record_path(path, token)
    try:
        store.read_bytes(record_path)
    except FileNotFoundError:
        return None
    return _read_break_record(store, record_path)


def _held_with(store: GraphStore, path: str, token: str, *, action: str) -> ClaimDocument:
    """The claim at ``path`` if it carries ``token``; ``PreconditionFailed`` otherwise."""
    holder = inspect(store, path)
    if holder is not None and holder.token == token:
        return holder
    details: dict[str, Any] = {
        "path": path,
        "expected_token": token,
        "actual_token": holder.token if holder else None,
        "holder": holder.model_dump(mode="json") if holder else None,
    }
    if holder is None:
        raise PreconditionFailed(f"refusing to {action} {path}: there is no claim there", details)
    raise PreconditionFailed(
        f"refusing to {action} {path}: the token given is not the holder's token "
        f"(held by owner {holder.owner!r} on host {holder.host}, pid {holder.pid}); nothing was changed",
        details,
    )


def _delete_if_token(store: GraphStore, path: str, token: str) -> None:
    """Delete the claim at ``path`` if it (still) carries ``token``."""
    current = inspect(store, path)
    if current is not None and current.token == token:
        store.delete(path)


def _read_break_record(store: GraphStore, record_path: str) -> BreakRecord:
    try:
        return BreakRecord.model_validate_json(store.read_bytes(record_path))
    except ValidationError as error:
        raise ClaimCorrupt(record_path, validation_problem(error), what="break record") from error


def _require_text(**values: str) -> None:
    for name, value in sorted(values.items()):
        if not value or not value.strip():
            raise BadRequest(f"{name} must be a non-empty string", {"field": name})
