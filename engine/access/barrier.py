"""The write barrier as a long-running writer sees it: the stamp, re-read before every write.

A server opened once keeps running across a migration, so it cannot rely on the stamp it saw at
start (and a graph open, :func:`omnigraph.engine.graph.open_graph`, makes the same check once).
:func:`current_permission` re-reads ``omnigraph:format`` on ``__manifest`` main and the holder of
the migration claim (read as plain JSON: the claim document belongs to ``claims/``,
which the engine does not import) and hands both to
:func:`~omnigraph.engine.access.permission.write_permission`; :func:`require_writable_stamp` refuses with
``format_barrier`` (503) unless the verdict is writable, naming the stamp, the migration id and
the claim's holder.
"""

from __future__ import annotations

import json
from typing import Any

from omnigraph.engine.access.permission import WritePermission, write_permission
from omnigraph.engine.door.routing import EngineProfile
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.names import CLAIM_PATH

_HOLDER_FIELDS = ("owner", "host", "pid", "migration_id", "created_at")


def claim_holder(manifest: Manifest, own_token: str | None = None) -> dict[str, Any] | None:
    """Who holds the migration claim (owner, host, pid, migration id, since), or None.

    None also when the claim carries ``own_token``: the caller acts under that claim (a duplicate
    repair behind the barrier), so it does not bar the caller. A claim that does not parse bars
    everyone (``{"unreadable": path}``)."""
    try:
        document = json.loads(manifest.store.read_bytes(CLAIM_PATH))
    except FileNotFoundError:
        return None
    except ValueError:
        return {"unreadable": CLAIM_PATH}
    if not isinstance(document, dict):
        return {"unreadable": CLAIM_PATH}
    if own_token is not None and document.get("token") == own_token:
        return None
    return {name: document.get(name) for name in _HOLDER_FIELDS}


def current_permission(manifest: Manifest, profile: EngineProfile, own_token: str | None = None) -> WritePermission:
    """May ``profile`` write now: the stamp and the migration claim, read afresh (a claim carrying
    ``own_token`` is the caller's own and does not bar it)."""
    stamp, migration_id = manifest.read_stamp()
    return write_permission(profile, stamp, migration_id, claim_holder(manifest, own_token))


def require_writable_stamp(manifest: Manifest, profile: EngineProfile) -> str:
    """The current stamp if ``profile`` may write now; else ``format_barrier`` (503)."""
    permission = current_permission(manifest, profile)
    refusal = permission.barrier_refusal(manifest.store.uri)
    if refusal is not None:
        raise refusal
    return str(permission.stamp)
