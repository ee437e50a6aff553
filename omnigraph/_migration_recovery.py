"""The operator's tools for a migration that stopped, as :mod:`omnigraph.migrate` names them.

Abort (:func:`abort`), the claim (:func:`claim`, :func:`break_claim`), the duplicate repair behind
the barrier (:func:`repair_template`, :func:`write_repair_decisions`, :func:`read_repair_decisions`,
:func:`repair`), and what a migration left (:func:`unit_sidecars`, :func:`migration_ledger`). Each
does what the ``omnigraph-migrate`` command of the same name does and imports the part of the
migrator it drives when it is called. Applications take them from :mod:`omnigraph.migrate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import omnigraph
from omnigraph._migration_results import Aborted, BrokenClaim, ClaimState, Repaired
from omnigraph.engine.progress import Progress, SilentProgress
from omnigraph.engine.storage.store import open_store

if TYPE_CHECKING:
    from omnigraph.ledger.ledger import Ledger
    from omnigraph.migrator.repair import DecisionsFile as RepairDecisions


def abort(
    uri: str, *, token: str, reason: str = "aborted by operator", actor: str | None = None, storage_options: Mapping[str, str] | None = None
) -> Aborted:
    """Give up the migration whose claim carries ``token`` (before stamp 5 only).

    Stamp 4 is put back and the claim released. Old writers may run again, so a later :func:`run`
    validates every image again.

    Raises:
        NotFound: no graph, or no claim to abort.
        PreconditionFailed: ``token`` is not the claim's.
        FormatRefused: the graph is already at stamp 5.
        ClaimHeld: a process acting for the claim is still alive on this host.
    """
    from omnigraph.migrator.claim import abort_migration

    return Aborted.from_document(abort_migration(open_store(uri, storage_options), token, reason, actor or omnigraph.default_actor()))


def unit_sidecars(uri: str, migration_id: str, *, storage_options: Mapping[str, str] | None = None) -> list[str]:
    """The units of migration ``migration_id`` whose sidecar is written (read-only).

    Such a unit is in flight, or was interrupted after its sidecar.
    """
    from omnigraph.migrator.layout import remaining

    return sorted(remaining(open_store(uri, storage_options), migration_id))


def migration_ledger(uri: str, migration_id: str, *, storage_options: Mapping[str, str] | None = None) -> Ledger:
    """The ledger of migration ``migration_id`` on the graph at ``uri``, to replay or to append records to.

    Each append is create-if-absent: a second writer of a sequence number loses.
    """
    from omnigraph.ledger.ledger import Ledger as MigrationLedger
    from omnigraph.migrator.layout import ledger_dir

    return MigrationLedger(open_store(uri, storage_options), ledger_dir(migration_id))


def claim(uri: str, *, storage_options: Mapping[str, str] | None = None) -> ClaimState:
    """The migration claim of the graph (None when there is none), who acts for it, and the stamp (read-only).

    Every process recorded as acting for the claim comes with its liveness, as far as this host
    can tell.

    Raises:
        NotFound: no graph at ``uri``.
    """
    from omnigraph.migrator.claim import show_claim

    return ClaimState.from_document(show_claim(open_store(uri, storage_options)))


def break_claim(
    uri: str, *, token: str, reason: str, actor: str | None = None, storage_options: Mapping[str, str] | None = None
) -> BrokenClaim:
    """Remove the claim whose holder the operator has proven dead.

    The break (with ``reason``) is recorded in its ledger and next to the claim; ``next`` names
    what to run then.

    Raises:
        NotFound: no graph, or no claim to break.
        PreconditionFailed: ``token`` is not the holder's.
        ClaimHeld: the holder (or a process acting for it) is alive on this host.
    """
    from omnigraph.migrator.claim import break_claim as remove_claim

    return BrokenClaim.from_document(remove_claim(open_store(uri, storage_options), token, reason, actor or omnigraph.default_actor()))


def repair_template(
    uri: str, *, token: str, progress: Progress | None = None, storage_options: Mapping[str, str] | None = None
) -> RepairDecisions:
    """The decisions to make for every duplicate or null id of the migration whose claim carries ``token``.

    There is one for each id on each branch that pins it, with its rows and no action chosen.

    Raises:
        NotFound: no graph, or no claim.
        PreconditionFailed: ``token`` is not the claim's.
    """
    from omnigraph.migrator.repair import template

    return template(open_store(uri, storage_options), token, progress or SilentProgress())


def write_repair_decisions(path: Path, decisions: RepairDecisions) -> None:
    """Write ``decisions`` as a YAML decisions file for the operator to fill in.

    Raises:
        BadRequest: ``path`` exists (a decisions file is never overwritten).
    """
    from omnigraph.migrator.repair import write_decisions

    write_decisions(path, decisions)


def read_repair_decisions(path: Path) -> RepairDecisions:
    """The decisions file at ``path``, checked.

    Raises:
        BadRequest: the file cannot be read or is not valid (every problem located).
    """
    from omnigraph.migrator.repair import read_decisions

    return read_decisions(path)


def repair(
    uri: str,
    *,
    token: str,
    decisions: RepairDecisions,
    actor: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> Repaired:
    """Apply ``decisions`` behind the barrier of the migration whose claim carries ``token``.

    Each decision is one recorded repair commit; then :func:`resume` continues the migration.

    Raises:
        NotFound: no graph, or no claim.
        PreconditionFailed: ``token`` is not the claim's.
        BadRequest: the decisions were written for another migration, or one is not applicable.
        ClaimHeld: another process acting for the claim is alive on this host.
    """
    from omnigraph.migrator.repair import apply

    applied = apply(open_store(uri, storage_options), token, decisions, actor or omnigraph.default_actor())
    return Repaired.from_document({"commits": [record.model_dump(mode="json") for record in applied]})
