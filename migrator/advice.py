"""What the operator runs next about a migration claim: the one wording every command prints.

:func:`claim_next_step` reads who acts for the claim (:mod:`omnigraph.claims.acting`) and the migration's
ledger phase, and names one command with the claim's real token, never a placeholder, so the
advice can be run as printed: while a recorded process is alive on this host, nothing but
waiting (and ``claim show``); otherwise ``resume --token`` (which releases the claim at stamp 5,
continues the migration before it, also when its holder died before the first ledger record),
or for a migration stopped by duplicates, the repair playbook. A process on another host that
has not ended is named first, to be checked there. :func:`unclaimed_barrier_next_step` is the advice
for a barrier whose claim was broken (``abort`` with the broken claim's token), and
:func:`claim_findings` says both as ``omnigraph check`` findings.
"""

from __future__ import annotations

from omnigraph.claims.acting import acting_processes
from omnigraph.claims.claim import break_record_path, inspect, read_break
from omnigraph.claims.document import ClaimDocument
from omnigraph.engine.errors import NotFound
from omnigraph.engine.maintenance.findings import Finding
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.storage.names import FORMAT_5, FORMAT_MIGRATING
from omnigraph.engine.storage.store import GraphStore
from omnigraph.ledger.ledger import Ledger
from omnigraph.migrator.layout import CLAIM_PATH, ledger_dir


def ledger_phase(store: GraphStore, migration_id: str) -> str | None:
    """The phase of the migration's ledger, or None if it has no record yet."""
    try:
        return Ledger(store, ledger_dir(migration_id)).replay().state.phase
    except NotFound:
        return None


def claim_next_step(store: GraphStore, holder: ClaimDocument, stamp: str | None) -> str:
    """The next command for a graph whose migration claim ``holder`` is held (see the module docstring)."""
    uri, token = store.uri, holder.token
    processes = acting_processes(store, CLAIM_PATH, holder)
    live = [p for p in processes if p.acting_here]
    if live:
        p = live[-1]
        return (
            f"wait: process {p.pid} on this host ({p.action} by {p.owner!r}) is acting for migration "
            f"{holder.migration_id}; `omnigraph-migrate claim show {uri}` says when it is gone"
        )
    elsewhere = [p for p in processes if p.liveness.startswith("unknown")]
    check = "".join(f"check that process {p.pid} on {p.host} is gone, then " for p in elsewhere)
    if stamp == FORMAT_5:
        return (
            f"{check}`omnigraph-migrate resume {uri} --token {token}` releases the claim (stamp 5 is already written: the graph is fenced)"
        )
    if ledger_phase(store, holder.migration_id) == "validation_failed":
        return (
            f"{check}repair the duplicates under the claim: `omnigraph-migrate playbook run duplicate-repair {uri}` "
            f"(or give the migration up: `omnigraph-migrate abort {uri} --token {token}`)"
        )
    return (
        f"{check}`omnigraph-migrate resume {uri} --token {token}` continues migration {holder.migration_id} "
        f"(or give it up: `omnigraph-migrate abort {uri} --token {token}`)"
    )


def broken_token(store: GraphStore, migration_id: str) -> str | None:
    """The token of the broken claim of ``migration_id``, if its claim was broken."""
    directory = break_record_path(CLAIM_PATH, "x").rsplit("/", 1)[0]
    for name in sorted(store.list(directory)):
        token = name.removesuffix(".json")
        record = read_break(store, CLAIM_PATH, token) if name.endswith(".json") else None
        if record is not None and record.claim.migration_id == migration_id:
            return token
    return None


def unclaimed_barrier_next_step(store: GraphStore, migration_id: str) -> str:
    """The next command for a barrier of ``migration_id`` with no claim: ``abort --token`` with the
    broken claim's token. A claim that vanished without a break (removed by hand) has no command:
    the claim must be restored."""
    token = broken_token(store, migration_id)
    if token is None:
        return (
            f"the barrier of migration {migration_id} has no claim and no record of a break; restore "
            f"{CLAIM_PATH} from a backup of the graph root"
        )
    return f"`omnigraph-migrate abort {store.uri} --token {token}` lowers the barrier the broken claim left (stamp 4 again)"


def claim_findings(store: GraphStore, stamp: str | None) -> list[Finding]:
    """What ``omnigraph check`` reports about the migration claim and the barrier, each with its
    next command: behind the barrier (stamp ``migrating``) one ``migration_in_progress`` finding
    (its claim held, or broken); at any other stamp a held claim is ``claim_held`` (no program
    writes while it is held)."""
    holder = inspect(store, CLAIM_PATH)
    _, migration_id = Manifest(store).read_stamp()
    if holder is not None:
        advice = claim_next_step(store, holder, stamp)
        who = f"held by {holder.owner} on {holder.host} (pid {holder.pid})"
        details = {"holder": holder.model_dump(mode="json"), "stamp": stamp, "next": advice}
        if stamp == FORMAT_MIGRATING:
            message = f"stamp is 'migrating': migration {migration_id} holds the barrier (its claim {who}); next: {advice}"
            return [Finding(kind="migration_in_progress", message=message, details={**details, "migration_id": migration_id})]
        message = f"the claim of migration {holder.migration_id} is {who} at stamp {stamp}: every writer is refused; next: {advice}"
        return [Finding(kind="claim_held", message=message, details=details)]
    if stamp != FORMAT_MIGRATING:
        return []
    advice = unclaimed_barrier_next_step(store, str(migration_id))
    message = f"stamp is 'migrating': migration {migration_id} holds the barrier without a claim; next: {advice}"
    return [Finding(kind="migration_in_progress", message=message, details={"migration_id": migration_id, "next": advice})]
