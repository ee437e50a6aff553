"""May this program write at this stamp: the one decision, the words of each refusal, and the write barrier.

:func:`write_permission` is the only place that applies the stamp rules. It takes the stamp on
``__manifest`` main (with the migration id a ``migrating`` stamp carries), who holds the migration
claim (for a caller that reads it) and the program's
:class:`~omnigraph.engine.door.routing.EngineProfile`, and returns a :class:`WritePermission`: the
:class:`Access` the program has (``writable``, ``read-only`` or ``refused``) and the
:class:`Ground` for it. The rules:

* no stamp, or a value outside :data:`~omnigraph.engine.storage.names.KNOWN_STAMPS`: refused, whatever
  the profile;
* a stamp the profile writes (``5`` for ``omnigraph``, ``4`` for ``omnigraph-v4``): writable, unless
  a migration claim is held, which leaves it read-only (a claim at ``4`` is a migration about to
  raise the barrier; at ``5`` one whose holder died after stamping). The one exception is an
  *online* claim (taken by ``omnigraph-migrate prepare``) at stamp ``4``: the migration validates
  immutable images while writers go on, so it does not bar them (the stamp ``migrating`` will);
* a stamp the profile only reads (``4`` and ``migrating`` for ``omnigraph``): read-only, on the
  ground of the claim at ``4`` when one is held (a migration is under way: the refusal names
  what releases it, not an upgrade the claim already refuses);
* any other known stamp (``migrating`` and ``5`` for ``omnigraph-v4``): refused.

A program reads every stamp it writes (each profile's read-only stamps include its read-write ones).

Every writer applies the same verdict, stamp and claim (the barrier is both): a graph open
(:meth:`WritePermission.open_refusal`: ``format_refused`` for the stamp, ``claim_held`` for a
claim) and a long-running writer re-checking before each write
(:meth:`WritePermission.barrier_refusal`: ``format_barrier``, 503) differ only in the words and
the error; a readiness probe reports :attr:`WritePermission.reason`.

A server opened once keeps running across a migration, so it cannot rely on the stamp it saw at
start (and a graph open, :func:`omnigraph.engine.graph.open_graph`, makes the same check once).
:func:`current_permission` re-reads ``omnigraph:format`` on ``__manifest`` main and the holder of
the migration claim (:func:`claim_holder`, read as plain JSON: the claim document belongs to
``claims/``, which the engine does not import) and hands both to :func:`write_permission`;
:func:`require_writable_stamp` refuses with ``format_barrier`` (503) unless the verdict is
writable, naming the stamp, the migration id and the claim's holder.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

import msgspec

from omnigraph.engine.door.routing import EngineProfile
from omnigraph.engine.errors import ClaimHeld, FormatBarrier, FormatRefused
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.names import CLAIM_PATH, FORMAT_4, FORMAT_5, FORMAT_MIGRATING, KNOWN_STAMPS


class Access(Enum):
    """What the program may do with the graph at this stamp."""

    WRITABLE = "writable"
    READ_ONLY = "read-only"
    REFUSED = "refused"


class Ground(Enum):
    """Why the verdict is what it is."""

    WRITABLE = "writable"  # a stamp the program writes, no migration claim held
    CLAIM_HELD = "claim_held"  # a stamp the program writes (or only reads, not migrating), but a migration claim is held
    MIGRATING = "migrating"  # the barrier is up and the program does not write behind it
    OTHER_FORMAT = "other_format"  # a known stamp the program does not write
    NO_STAMP = "no_stamp"
    UNKNOWN_STAMP = "unknown_stamp"


class WritePermission(msgspec.Struct, frozen=True):
    """The verdict of :func:`write_permission` for one program at one stamp."""

    profile: EngineProfile
    stamp: str | None
    migration_id: str | None
    holder: dict[str, Any] | None
    access: Access
    ground: Ground

    @property
    def writable(self) -> bool:
        """True if the program may write at this stamp now."""
        return self.access is Access.WRITABLE

    @property
    def readable(self) -> bool:
        """True if the program may at least read at this stamp (the verdict is not ``refused``)."""
        return self.access is not Access.REFUSED

    @property
    def reason(self) -> str:
        """One line for a readiness probe: why the program may write now, or why not."""
        if self.ground is Ground.WRITABLE and self.holder is not None:
            return f"stamp {self.stamp}, an online migration (prepare) is validating; writes go on until its cutover"
        if self.ground is Ground.WRITABLE:
            return f"stamp {self.stamp}, no migration claim held"
        if self.ground is Ground.CLAIM_HELD:
            holder = self.holder or {}
            return f"a migration claim is held by {holder.get('owner')} on {holder.get('host')}"
        if self.ground is Ground.MIGRATING:
            return f"migration {self.migration_id} holds the barrier (stamp migrating)"
        written = "/".join(sorted(self.profile.read_write_stamps))
        return f"stamp is {self.stamp}; {self.profile.program} writes only format {written}"

    def open_refusal(self, uri: str, *, write: bool) -> FormatRefused | ClaimHeld | None:
        """What an open of ``uri`` (read-write or read-only) raises, or None.

        ``claim_held`` for a read-write open at a stamp the program writes while a migration claim
        is held, ``format_refused`` for a stamp it may not open so.
        """
        if self.ground is Ground.NO_STAMP:
            return FormatRefused(
                f"{uri} has no omnigraph:format stamp on __manifest main; refusing to guess its format",
                {"uri": uri},
            )
        if self.ground is Ground.UNKNOWN_STAMP:
            return FormatRefused(
                f"{uri} has unknown format stamp {self.stamp!r}; this {self.profile.program} knows {list(KNOWN_STAMPS)}",
                {"uri": uri, "stamp": self.stamp},
            )
        if self.writable or (self.readable and not write):
            return None
        if self.ground is Ground.CLAIM_HELD:
            return self.claim_refusal(uri)
        if self.ground is Ground.MIGRATING:
            detail = f"a migration ({self.migration_id}) holds the barrier; see `omnigraph-migrate status {uri}` and resume or abort it"
        else:
            detail = self.profile.refusal_hint.format(uri=uri)
        mode = "read-write" if write else "read-only"
        return FormatRefused(
            f"{self.profile.program} refuses to open {uri} {mode} at format {self.stamp}: {detail}",
            {"uri": uri, "stamp": self.stamp, "mode": mode, "migration_id": self.migration_id},
        )

    def claim_refusal(self, uri: str, next_step: str | None = None) -> ClaimHeld:
        """The ``claim_held`` a read-write open raises while a migration claim is held.

        ``next_step`` is the command that releases the claim, worded by a caller that knows the
        migration (the CLI passes the migrator's, with the claim's token); without it the refusal
        names ``omnigraph-migrate status``, which prints that command.
        """
        holder = self.holder or {}
        details = {"uri": uri, "stamp": self.stamp, "mode": "read-write", "holder": holder, "program": self.profile.program}
        advice = f"`omnigraph-migrate status {uri}` names the command that releases it"
        if next_step is not None:
            advice, details["next"] = f"next: {next_step}", next_step
        return ClaimHeld(
            f"{self.profile.program} refuses to open {uri} read-write at format {self.stamp}: the migration "
            f"claim of migration {holder.get('migration_id')} is held by {holder.get('owner')} on "
            f"{holder.get('host')} (pid {holder.get('pid')}), so no program writes until it is released; {advice}",
            details,
        )

    def barrier_refusal(self, uri: str) -> FormatBarrier | None:
        """The ``format_barrier`` (503) a long-running writer raises instead of writing, or None."""
        if self.writable:
            return None
        if self.ground is Ground.MIGRATING and FORMAT_5 not in self.profile.read_write_stamps:
            advice = (
                f"a migration ({self.migration_id}) to format 5 holds the barrier, and {self.profile.program} does "
                f"not write format 5: once it finishes, write with the format-5 omnigraph; if it is lowered again "
                f"(stamp 4), writes go on (`omnigraph-migrate status {uri}` shows its progress)"
            )
        elif self.ground is Ground.MIGRATING:
            advice = (
                f"a migration ({self.migration_id}) holds the barrier; writes resume on their own once it "
                f"finishes (`omnigraph-migrate status {uri}` shows its progress)"
            )
        elif self.ground is Ground.CLAIM_HELD:
            advice = (
                f"a migration claim is held; writes resume on their own once it is released "
                f"(`omnigraph-migrate status {uri}` names the next step)"
            )
        else:
            advice = self.profile.refusal_hint.format(uri=uri)
        holder = self.holder
        who = f"; claim held by {holder.get('owner')} on {holder.get('host')} (pid {holder.get('pid')})" if holder else ""
        return FormatBarrier(
            f"{self.profile.program} refuses writes to {uri} at format {self.stamp}: {advice}{who}",
            {"stamp": self.stamp, "migration_id": self.migration_id, "holder": holder, "program": self.profile.program},
        )


def write_permission(
    profile: EngineProfile,
    stamp: str | None,
    migration_id: str | None = None,
    holder: dict[str, Any] | None = None,
) -> WritePermission:
    """May ``profile``'s program write at ``stamp``; ``holder`` is the migration claim's holder.

    ``holder`` is None when no claim is held (or the caller acts under it), and for a caller that
    only reads (a read-only open does not read the claim).
    """
    if stamp is None:
        ground = Ground.NO_STAMP
    elif stamp not in KNOWN_STAMPS:
        ground = Ground.UNKNOWN_STAMP
    elif stamp in profile.read_write_stamps:
        ground = Ground.WRITABLE if holder is None or _online_at_4(stamp, holder) else Ground.CLAIM_HELD
    elif stamp == FORMAT_MIGRATING:
        ground = Ground.MIGRATING
    elif holder is not None and stamp in profile.read_only_stamps:
        ground = Ground.CLAIM_HELD  # a migration under way from a stamp the program only reads (4 for omnigraph)
    else:
        ground = Ground.OTHER_FORMAT
    if ground is Ground.WRITABLE:
        access = Access.WRITABLE
    elif stamp in KNOWN_STAMPS and stamp in profile.read_only_stamps:
        access = Access.READ_ONLY
    else:
        access = Access.REFUSED
    return WritePermission(profile, stamp, migration_id, holder, access, ground)


def _online_at_4(stamp: str, holder: dict[str, Any]) -> bool:
    """True for an online claim (``omnigraph-migrate prepare``) at stamp ``4``: it does not bar writers."""
    return stamp == FORMAT_4 and holder.get("online") is True


_HOLDER_FIELDS = ("owner", "host", "pid", "migration_id", "created_at", "online")


def claim_holder(manifest: Manifest, own_token: str | None = None) -> dict[str, Any] | None:
    """Who holds the migration claim (owner, host, pid, migration id, since), or None.

    None also when the claim carries ``own_token``: the caller acts under that claim (a duplicate
    repair behind the barrier), so it does not bar the caller. A claim that does not parse bars
    everyone (``{"unreadable": path}``).
    """
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
    """May ``profile`` write now: the stamp and the migration claim, read afresh.

    A claim carrying ``own_token`` is the caller's own and does not bar it.
    """
    stamp, migration_id = manifest.read_stamp()
    return write_permission(profile, stamp, migration_id, claim_holder(manifest, own_token))


def require_writable_stamp(manifest: Manifest, profile: EngineProfile) -> str:
    """The current stamp if ``profile`` may write now; else ``format_barrier`` (503)."""
    permission = current_permission(manifest, profile)
    refusal = permission.barrier_refusal(manifest.store.uri)
    if refusal is not None:
        raise refusal
    return str(permission.stamp)
