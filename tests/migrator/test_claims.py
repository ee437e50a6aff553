"""Claims: one winner among concurrent acquirers, token-checked release and break, no takeover."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from omnigraph.claims.claim import acquire, break_, break_record_path, inspect, release
from omnigraph.claims.document import BreakRecord, ClaimDocument
from omnigraph.claims.errors import ClaimCorrupt
from omnigraph.engine.errors import BadRequest, ClaimHeld, PreconditionFailed
from omnigraph.engine.storage.store import GraphStore, canonical_json, open_store
from tests.support.process_race import release_together, spawn

CLAIM = "__migration/claim.json"

# Imports and opens the store, says "ready", then waits for the start time sent on stdin.
ACQUIRE_SCRIPT = r"""
import json, sys, time
from omnigraph.claims.claim import acquire
from omnigraph.engine.errors import ClaimHeld
from omnigraph.engine.storage.store import open_store
store = open_store(sys.argv[1])
print("ready", flush=True)
start = float(sys.stdin.readline())
while time.time() < start:
    time.sleep(0.001)
try:
    doc = acquire(store, sys.argv[2], operation="migrate", migration_id="m-race", owner=sys.argv[3])
    print(json.dumps({"won": doc.model_dump(mode="json")}))
except ClaimHeld as error:
    print(json.dumps({"code": error.code, "details": error.details, "message": error.message}))
"""

HOLDER_SCRIPT = r"""
import sys, time
from omnigraph.claims.claim import acquire
from omnigraph.engine.storage.store import open_store
doc = acquire(open_store(sys.argv[1]), sys.argv[2], operation="migrate", migration_id="m-dead", owner="doomed")
print(doc.token, flush=True)
time.sleep(600)
"""


def _acquire(store: GraphStore, owner: str = "alice") -> ClaimDocument:
    return acquire(store, CLAIM, operation="migrate", migration_id="m-1", owner=owner)


def test_sixteen_concurrent_acquirers_have_exactly_one_winner(root_uri: str) -> None:
    outcomes = release_together(
        [spawn([sys.executable, "-c", ACQUIRE_SCRIPT, root_uri, CLAIM, f"owner-{i:02d}"]) for i in range(16)], timeout=60
    )
    assert all(o.returncode == 0 for o in outcomes), [o.stderr for o in outcomes]
    results = [o.json() for o in outcomes]

    winners = [result["won"] for result in results if "won" in result]
    assert len(winners) == 1, results
    winner = winners[0]
    held = [result for result in results if "won" not in result]
    assert len(held) == 15
    for result in held:
        assert result["code"] == "claim_held"
        assert result["details"] == {"holder": winner, "path": CLAIM}
        assert winner["owner"] in result["message"] and winner["token"] in result["message"]
        assert str(winner["pid"]) in result["message"] and "break" in result["message"]
    stored = inspect(open_store(root_uri), CLAIM)
    assert stored is not None and stored.model_dump(mode="json") == winner


def test_acquire_writes_canonical_document_and_release_frees_it(root_uri: str) -> None:
    store = open_store(root_uri)
    doc = _acquire(store)
    assert re.fullmatch(r"[0-9a-f]{32}", doc.token)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", doc.created_at)
    assert (doc.owner, doc.pid, doc.operation, doc.migration_id) == ("alice", os.getpid(), "migrate", "m-1")
    raw = store.read_bytes(CLAIM)
    # ``online`` is written only when true: an offline claim reads as a claim of an earlier release.
    assert raw == canonical_json(doc.model_dump(mode="json", exclude={"online"})) and not doc.online
    assert list(json.loads(raw)) == sorted(json.loads(raw))
    assert inspect(store, CLAIM) == doc

    release(store, CLAIM, doc.token)
    assert inspect(store, CLAIM) is None
    again = _acquire(store, owner="bob")
    assert again.token != doc.token and inspect(store, CLAIM) == again
    release(store, CLAIM, again.token)
    online = acquire(store, CLAIM, operation="migrate", migration_id="m-2", owner="carol", online=True)
    assert json.loads(store.read_bytes(CLAIM))["online"] is True and inspect(store, CLAIM) == online


def test_wrong_token_release_and_break_are_refused_and_change_nothing(root_uri: str) -> None:
    store = open_store(root_uri)
    doc = _acquire(store)
    before = store.read_bytes(CLAIM)
    wrong = "0" * 32
    with pytest.raises(PreconditionFailed) as released:
        release(store, CLAIM, wrong)
    assert released.value.details["expected_token"] == wrong
    assert released.value.details["actual_token"] == doc.token
    with pytest.raises(PreconditionFailed) as broken:
        break_(store, CLAIM, wrong, "holder is gone", "oncall")
    assert broken.value.details["actual_token"] == doc.token
    assert store.read_bytes(CLAIM) == before
    assert store.list("__migration") == ["claim.json"]


def test_release_and_break_of_an_absent_claim_are_refused(root_uri: str) -> None:
    store = open_store(root_uri)
    token = "1" * 32
    with pytest.raises(PreconditionFailed) as released:
        release(store, CLAIM, token)
    assert released.value.details["actual_token"] is None
    with pytest.raises(PreconditionFailed):
        break_(store, CLAIM, token, "nothing there", "oncall")
    assert store.list("__migration") == []


def test_killed_holder_keeps_its_claim_until_an_operator_breaks_it(root_uri: str) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER_SCRIPT, root_uri, CLAIM], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    token = holder.stdout.readline().strip()
    os.kill(holder.pid, signal.SIGKILL)
    assert holder.wait(timeout=30) == -signal.SIGKILL
    holder.stdout.close()

    store = open_store(root_uri)
    dead = inspect(store, CLAIM)
    assert dead is not None and (dead.token, dead.pid, dead.owner) == (token, holder.pid, "doomed")
    with pytest.raises(ClaimHeld) as held:
        _acquire(store)
    assert held.value.details["holder"]["token"] == token

    record = break_(store, CLAIM, token, "pid confirmed gone after SIGKILL", "oncall-sre")
    assert inspect(store, CLAIM) is None
    assert (record.claim, record.breaker, record.reason) == (dead, "oncall-sre", "pid confirmed gone after SIGKILL")
    stored_record = BreakRecord.model_validate_json(store.read_bytes(break_record_path(CLAIM, token)))
    assert stored_record == record

    successor = _acquire(store, owner="successor")
    assert successor.token != token and inspect(store, CLAIM) == successor


def test_break_finishes_a_break_that_stopped_after_its_record(root_uri: str) -> None:
    store = open_store(root_uri)
    doc = _acquire(store)
    earlier = BreakRecord(claim=doc, breaker="first-sre", host="h", pid=1, reason="first attempt", broken_at="2026-01-01T00:00:00Z")
    assert store.put_if_absent(break_record_path(CLAIM, doc.token), canonical_json(earlier))
    assert break_(store, CLAIM, doc.token, "second attempt", "second-sre") == earlier
    assert inspect(store, CLAIM) is None


@pytest.mark.parametrize("content", [b'{"owner": "x"', b'{"operation":"migrate","pid":"12"}'], ids=["truncated", "invalid"])
def test_unparsable_claim_is_refused_never_treated_as_absent(root_uri: str, content: bytes) -> None:
    store = open_store(root_uri)
    store.write_bytes(CLAIM, content)
    with pytest.raises(ClaimCorrupt) as corrupt:
        inspect(store, CLAIM)
    assert corrupt.value.details["path"] == CLAIM and CLAIM in corrupt.value.message
    with pytest.raises(ClaimCorrupt):
        _acquire(store)
    assert store.read_bytes(CLAIM) == content


class _VanishingClaimStore(GraphStore):
    """A store where the claim is always taken at create time and already gone when read."""

    def put_if_absent(self, rel: str, data: bytes) -> bool:
        return False

    def read_bytes(self, rel: str) -> bytes:
        raise FileNotFoundError(rel)


def test_a_claim_that_keeps_changing_hands_is_reported_held(tmp_path) -> None:
    real = open_store(str(tmp_path / "g"))
    store = _VanishingClaimStore(uri=real.uri, root=real.root)
    with pytest.raises(ClaimHeld) as held:
        _acquire(store)
    assert held.value.details == {"holder": None, "path": CLAIM}


def test_blank_owner_is_refused(tmp_path) -> None:
    store = open_store(str(tmp_path / "g"))
    with pytest.raises(BadRequest):
        _acquire(store, owner=" ")
    assert store.list("__migration") == []
