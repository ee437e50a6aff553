"""The one write-permission decision: every profile x stamp x claim combination, and what each caller does with it.

:func:`omnigraph.engine.access.write_permission` is the only place the stamp rules live; a graph open, the
barrier a server re-checks before each write and the readiness probe all act on its verdict. The
table below is the whole rule set written out: changing a rule fails here.
"""

from __future__ import annotations

import itertools

import pytest

from omnigraph.engine.access.permission import Access, Ground, WritePermission, write_permission
from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.door.routing import EngineProfile
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import ClaimHeld, FormatBarrier, FormatRefused
from omnigraph.migrator.repair import REPAIR_PROFILE

W, RO, X = Access.WRITABLE, Access.READ_ONLY, Access.REFUSED
HOLDER = {"owner": "ops", "host": "h1", "pid": 7, "migration_id": "M1", "created_at": 1}
PROFILES = {"omnigraph": FENCED_PROFILE, "omnigraph-v4": LEGACY_PROFILE, "omnigraph-migrate repair": REPAIR_PROFILE}
STAMPS = (None, "4", "migrating", "5", "6")

# (program, stamp, claim held) -> (access, ground)
TABLE: dict[tuple[str, str | None, bool], tuple[Access, Ground]] = {
    # the format-5 engine: writes 5, reads 4 / migrating / 5
    ("omnigraph", None, False): (X, Ground.NO_STAMP),
    ("omnigraph", None, True): (X, Ground.NO_STAMP),
    ("omnigraph", "4", False): (RO, Ground.OTHER_FORMAT),
    ("omnigraph", "4", True): (RO, Ground.CLAIM_HELD),  # a migration under way: the claim, not an upgrade, bars it
    ("omnigraph", "migrating", False): (RO, Ground.MIGRATING),
    ("omnigraph", "migrating", True): (RO, Ground.MIGRATING),
    ("omnigraph", "5", False): (W, Ground.WRITABLE),
    ("omnigraph", "5", True): (RO, Ground.CLAIM_HELD),
    ("omnigraph", "6", False): (X, Ground.UNKNOWN_STAMP),
    ("omnigraph", "6", True): (X, Ground.UNKNOWN_STAMP),
    # the format-4 writer: reads and writes 4 only
    ("omnigraph-v4", None, False): (X, Ground.NO_STAMP),
    ("omnigraph-v4", None, True): (X, Ground.NO_STAMP),
    ("omnigraph-v4", "4", False): (W, Ground.WRITABLE),
    ("omnigraph-v4", "4", True): (RO, Ground.CLAIM_HELD),
    ("omnigraph-v4", "migrating", False): (X, Ground.MIGRATING),
    ("omnigraph-v4", "migrating", True): (X, Ground.MIGRATING),
    ("omnigraph-v4", "5", False): (X, Ground.OTHER_FORMAT),
    ("omnigraph-v4", "5", True): (X, Ground.OTHER_FORMAT),
    ("omnigraph-v4", "6", False): (X, Ground.UNKNOWN_STAMP),
    ("omnigraph-v4", "6", True): (X, Ground.UNKNOWN_STAMP),
    # duplicate repair: only behind the barrier
    ("omnigraph-migrate repair", None, False): (X, Ground.NO_STAMP),
    ("omnigraph-migrate repair", None, True): (X, Ground.NO_STAMP),
    ("omnigraph-migrate repair", "4", False): (X, Ground.OTHER_FORMAT),
    ("omnigraph-migrate repair", "4", True): (X, Ground.OTHER_FORMAT),
    ("omnigraph-migrate repair", "migrating", False): (W, Ground.WRITABLE),
    ("omnigraph-migrate repair", "migrating", True): (RO, Ground.CLAIM_HELD),
    ("omnigraph-migrate repair", "5", False): (X, Ground.OTHER_FORMAT),
    ("omnigraph-migrate repair", "5", True): (X, Ground.OTHER_FORMAT),
    ("omnigraph-migrate repair", "6", False): (X, Ground.UNKNOWN_STAMP),
    ("omnigraph-migrate repair", "6", True): (X, Ground.UNKNOWN_STAMP),
}
CASES = sorted(TABLE, key=lambda key: (key[0], STAMPS.index(key[1]), key[2]))
URI = "file:///graphs/g"


def verdict(program: str, stamp: str | None, claim: bool) -> WritePermission:
    migration_id = "M1" if stamp == "migrating" else None
    return write_permission(PROFILES[program], stamp, migration_id, HOLDER if claim else None)


def test_the_table_covers_every_combination() -> None:
    assert set(TABLE) == set(itertools.product(PROFILES, STAMPS, (False, True)))


@pytest.mark.parametrize("profile", PROFILES.values(), ids=list(PROFILES))
def test_a_program_reads_every_stamp_it_writes(profile: EngineProfile) -> None:
    assert profile.read_write_stamps <= profile.read_only_stamps


@pytest.mark.parametrize(("program", "stamp", "claim"), CASES)
def test_decision(program: str, stamp: str | None, claim: bool) -> None:
    permission = verdict(program, stamp, claim)
    assert (permission.access, permission.ground) == TABLE[(program, stamp, claim)]
    assert permission.writable == (permission.access is W)
    assert permission.readable == (permission.access is not X)
    assert permission.stamp == stamp
    assert permission.holder == (HOLDER if claim else None)


@pytest.mark.parametrize(("program", "stamp", "claim"), CASES)
def test_open_acts_on_the_verdict(program: str, stamp: str | None, claim: bool) -> None:
    """A read-write open needs a writable verdict, a read-only open a readable one; a claim held at a
    stamp the program writes is claim_held (exit 3), every other refusal format_refused."""
    permission = verdict(program, stamp, claim)
    for write, allowed in ((True, permission.writable), (False, permission.readable)):
        refusal = permission.open_refusal(URI, write=write)
        if allowed:
            assert refusal is None
        elif permission.ground is Ground.CLAIM_HELD:
            assert isinstance(refusal, ClaimHeld)
            assert (refusal.code, refusal.http_status, refusal.exit_code) == ("claim_held", 409, 3)
            assert f"`omnigraph-migrate status {URI}`" in str(refusal) and "held by ops on h1 (pid 7)" in str(refusal)
        else:
            assert isinstance(refusal, FormatRefused)
            assert (refusal.code, refusal.http_status, refusal.exit_code) == ("format_refused", 409, 6)
            assert URI in str(refusal)


@pytest.mark.parametrize(("program", "stamp", "claim"), CASES)
def test_barrier_acts_on_the_verdict(program: str, stamp: str | None, claim: bool) -> None:
    """The live barrier refuses every verdict but writable, with format_barrier (503) naming the claim's holder."""
    permission = verdict(program, stamp, claim)
    refusal = permission.barrier_refusal(URI)
    if permission.writable:
        assert refusal is None
        assert permission.reason == f"stamp {stamp}, no migration claim held"
        return
    assert isinstance(refusal, FormatBarrier)
    assert (refusal.code, refusal.http_status, refusal.exit_code) == ("format_barrier", 503, 3)
    assert str(refusal).startswith(f"{program} refuses writes to {URI} at format {stamp}: ")
    assert refusal.details == {"stamp": stamp, "migration_id": permission.migration_id, "holder": permission.holder, "program": program}
    assert ("claim held by ops on h1 (pid 7)" in str(refusal)) == claim


def test_the_words_of_each_ground() -> None:
    fenced_4 = verdict("omnigraph", "4", False)
    assert fenced_4.reason == "stamp is 4; omnigraph writes only format 5"
    assert str(fenced_4.open_refusal(URI, write=True)) == (
        f"omnigraph refuses to open {URI} read-write at format 4: {FENCED_PROFILE.refusal_hint.format(uri=URI)}"
    )
    migrating = verdict("omnigraph", "migrating", False)
    assert migrating.reason == "migration M1 holds the barrier (stamp migrating)"
    assert "a migration (M1) holds the barrier; writes resume on their own" in str(migrating.barrier_refusal(URI))
    # A format-4 writer is not told its writes resume: after the stamp it does not write at all.
    v4_barrier = str(verdict("omnigraph-v4", "migrating", False).barrier_refusal(URI))
    assert "omnigraph-v4 does not write format 5: once it finishes, write with the format-5 omnigraph" in v4_barrier
    assert "online" not in v4_barrier and "resume on their own" not in v4_barrier
    assert str(verdict("omnigraph-v4", "migrating", False).open_refusal(URI, write=False)) == (
        f"omnigraph-v4 refuses to open {URI} read-only at format migrating: a migration (M1) holds the barrier; "
        f"see `omnigraph-migrate status {URI}` and resume or abort it"
    )
    online = write_permission(LEGACY_PROFILE, "4", None, {"owner": "ops", "host": "h1", "pid": 7, "online": True})
    assert online.writable and online.reason.startswith("stamp 4, an online migration (prepare) is validating")
    assert not write_permission(FENCED_PROFILE, "5", None, {"owner": "ops", "host": "h1", "pid": 7, "online": True}).writable
    assert not write_permission(LEGACY_PROFILE, "4", None, {"owner": "ops", "host": "h1", "pid": 7, "online": False}).writable
    claimed = verdict("omnigraph", "5", True)
    assert claimed.reason == "a migration claim is held by ops on h1"
    assert "a migration claim is held; writes resume on their own once it is released" in str(claimed.barrier_refusal(URI))
    assert claimed.open_refusal(URI, write=False) is None
    assert verdict("omnigraph-v4", "5", False).barrier_refusal(URI).message.endswith(LEGACY_PROFILE.refusal_hint)
    assert str(verdict("omnigraph", None, False).open_refusal(URI, write=False)) == (
        f"{URI} has no omnigraph:format stamp on __manifest main; refusing to guess its format"
    )
    assert str(verdict("omnigraph-v4", "6", False).open_refusal(URI, write=False)) == (
        f"{URI} has unknown format stamp '6'; this omnigraph-v4 knows ['4', 'migrating', '5']"
    )
