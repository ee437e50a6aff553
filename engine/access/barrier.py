"""The write barrier as a long-running writer sees it: the stamp, re-read before every write.

A server opened once keeps running across a migration, so it cannot rely on the stamp it saw at
start. :func:`require_writable_stamp` re-reads ``omnigraph:format`` on ``__manifest`` main and
refuses with ``format_barrier`` (503) unless the stamp is one the program writes, naming the
stamp, the migration id and the holder of the migration claim (read as plain JSON: the claim
document belongs to ``claims/``, which the engine does not import).
"""

from __future__ import annotations

import json
from typing import Any

from engine.door import EngineProfile
from engine.errors import FormatBarrier
from engine.manifest import Manifest
from engine.storage import CLAIM_PATH, FORMAT_MIGRATING

_HOLDER_FIELDS = ("owner", "host", "pid", "migration_id", "created_at")


def claim_holder(manifest: Manifest) -> dict[str, Any] | None:
    """Who holds the migration claim (owner, host, pid, migration id, since), or None."""
    try:
        document = json.loads(manifest.store.read_bytes(CLAIM_PATH))
    except FileNotFoundError:
        return None
    except ValueError:
        return {"unreadable": CLAIM_PATH}
    return {name: document.get(name) for name in _HOLDER_FIELDS}


def barrier_state(manifest: Manifest, profile: EngineProfile) -> tuple[str | None, bool, str]:
    """(stamp, writable, reason) for ``profile`` right now; writable needs its stamp and no claim."""
    stamp, migration_id = manifest.read_stamp()
    holder = claim_holder(manifest)
    if stamp not in profile.read_write_stamps:
        if stamp == FORMAT_MIGRATING:
            reason = f"migration {migration_id} holds the barrier (stamp migrating)"
        else:
            reason = f"stamp is {stamp}; {profile.program} writes only format {'/'.join(sorted(profile.read_write_stamps))}"
        return stamp, False, reason
    if holder is not None:
        return stamp, False, f"a migration claim is held by {holder.get('owner')} on {holder.get('host')}"
    return stamp, True, f"stamp {stamp}, no migration claim held"


def require_writable_stamp(manifest: Manifest, profile: EngineProfile) -> str:
    """The current stamp if ``profile`` may write now; else ``format_barrier`` (503).

    Writable means the stamp is one the program writes and no migration claim is held (a claim
    at stamp 4 is a migration about to raise the barrier; at stamp 5 one whose holder died after
    stamping, which ``omnigraph-migrate resume --token`` releases).
    """
    stamp, migration_id = manifest.read_stamp()
    holder = claim_holder(manifest)
    if stamp in profile.read_write_stamps and holder is None:
        return str(stamp)
    uri = manifest.store.uri
    if stamp == FORMAT_MIGRATING:
        advice = (
            f"a migration ({migration_id}) holds the barrier; writes resume on their own once it "
            f"finishes (`omnigraph-migrate status {uri}` shows its progress)"
        )
    elif stamp in profile.read_write_stamps:
        advice = (
            f"a migration claim is held; writes resume on their own once it is released "
            f"(`omnigraph-migrate status {uri}` names the next step)"
        )
    else:
        advice = profile.refusal_hint
    who = f"; claim held by {holder.get('owner')} on {holder.get('host')} (pid {holder.get('pid')})" if holder else ""
    raise FormatBarrier(
        f"{profile.program} refuses writes to {uri} at format {stamp}: {advice}{who}",
        {"stamp": stamp, "migration_id": migration_id, "holder": holder, "program": profile.program},
    )
