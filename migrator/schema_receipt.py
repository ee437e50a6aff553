"""The schema a migration's receipts were taken with, and the refusal to rely on them once it changed.

A graph root holds its accepted schema source, ``_schema.pg``. Through the tools it cannot change
during an upgrade (the engine changes a schema at format 5 only, never behind the barrier), but a
hand edit or a foreign program can replace it between ``prepare`` and the cutover. Receipts are
validations of the images as the graph stood with one schema; the migration relies on them only
with that schema.

The *schema identity* (:func:`schema_identity`) is the sha256 hex of the exact bytes of
``_schema.pg``: what :attr:`omnigraph.engine.schema.catalog.Catalog.version_id` gives for its
catalog (the sha256 of the exact source text).
Whenever receipts are taken (:func:`take_schema`, called by
:func:`omnigraph.migrator.receipts.validate_plan_images`: every ``prepare`` round and every
validation behind the barrier), the identity is recorded in the migration's *schema receipt*
(:class:`SchemaReceipt`, ``__migration/schema-receipts/<migration-id>.json``, written before the
receipts): the identity and the first ledger sequence number whose ``image_validated`` records were
taken with it (``receipts_from``). It sits beside the migration's directory, not in it: the
documents under ``__migration/<id>/`` are the ledger's records and the unit sidecars only.

A migration started by an earlier release has no schema receipt: its identity is unknown
(``schema_id`` None), nothing is refused for it and its receipts are kept; the first receipts
this release takes record the identity.

Where the migration relies on its receipts (``cutover``, ``resume``, and the driver every command
ends in, :func:`omnigraph.migrator.run.drive`), :func:`refuse_schema_changed` refuses with
:class:`~omnigraph.migrator.errors.SchemaChanged` (``migration_refused``, exit 1, nothing written)
when ``_schema.pg`` has another identity now. What resolves it (:func:`resolving_command`): at
stamp 4 under the online claim, ``prepare --token``, which takes the receipts again
(``take_schema(..., retake=True)``: every receipt of the earlier schema stops holding and every
image is validated again, writers going on), then the cutover; behind the barrier, ``abort
--token`` (stamp 4 again) and a new ``run``. Putting back the ``_schema.pg`` the receipts were
taken with clears it too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from omnigraph.engine.errors import NotFound
from omnigraph.engine.storage.names import FORMAT_4, SCHEMA_FILE
from omnigraph.engine.storage.store import GraphStore, canonical_json
from omnigraph.migrator.errors import SchemaChanged
from omnigraph.migrator.layout import schema_receipt_path

if TYPE_CHECKING:
    from omnigraph.claims.document import ClaimDocument
    from omnigraph.ledger.ledger import LedgerReplay
    from omnigraph.migrator.claim import Migration


class SchemaReceipt(BaseModel):
    """The schema identity a migration's receipts were taken with.

    ``schema_id`` is the sha256 hex of ``_schema.pg`` (None: unknown); the ``image_validated``
    records from ledger sequence number ``receipts_from`` on were taken with it, the earlier ones
    with the identities in ``replaced`` (oldest first) and no longer hold.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    migration_id: str
    token: str
    schema_id: str | None = None
    receipts_from: int = Field(default=1, ge=1)
    replaced: list[str] = []


def schema_identity(store: GraphStore) -> str | None:
    """The sha256 hex of the exact bytes of the graph's ``_schema.pg``; None if it has none."""
    try:
        data = store.read_bytes(SCHEMA_FILE)
    except FileNotFoundError:
        return None
    return hashlib.sha256(data).hexdigest()


def read_schema_receipt(store: GraphStore, migration_id: str) -> SchemaReceipt | None:
    """The migration's schema receipt, or None if it has none (started by an earlier release, or no receipt yet)."""
    try:
        data = store.read_bytes(schema_receipt_path(migration_id))
    except FileNotFoundError:
        return None
    return SchemaReceipt.model_validate_json(data)


@dataclass(frozen=True)
class SchemaStanding:
    """The schema identity the receipts were taken with (if recorded) against the one ``_schema.pg`` has now."""

    recorded: SchemaReceipt | None
    current: str | None
    """The identity now; None if the graph has no ``_schema.pg``."""

    @property
    def known(self) -> bool:
        """True if the receipts' schema identity was recorded."""
        return self.recorded is not None and self.recorded.schema_id is not None

    @property
    def changed(self) -> bool:
        """True if the receipts were taken with a known schema that ``_schema.pg`` no longer is."""
        return self.known and self.recorded is not None and self.recorded.schema_id != self.current

    @property
    def receipts_from(self) -> int:
        """The first ledger sequence number whose receipts were taken with the recorded identity."""
        return self.recorded.receipts_from if self.recorded is not None else 1


def schema_standing(store: GraphStore, migration_id: str) -> SchemaStanding:
    """How the migration's receipts stand against ``_schema.pg`` now (reads two small files)."""
    return SchemaStanding(read_schema_receipt(store, migration_id), schema_identity(store))


def resolving_command(store: GraphStore, claim: ClaimDocument, stamp: str | None) -> str:
    """The command that clears a schema change under ``claim``'s receipts, as it is run (no backticks).

    ``prepare --token`` at stamp 4 under the online claim (it takes the receipts again); else
    ``abort --token``, after which a new ``run`` takes them.
    """
    if claim.online and stamp == FORMAT_4:
        return f"omnigraph-migrate prepare {store.uri} --token {claim.token}"
    return f"omnigraph-migrate abort {store.uri} --token {claim.token}"


def schema_change_advice(store: GraphStore, claim: ClaimDocument, stamp: str | None) -> str:
    """What to run after a schema change under ``claim``'s receipts, each command in backticks."""
    uri, token = store.uri, claim.token
    command = resolving_command(store, claim, stamp)
    if claim.online and stamp == FORMAT_4:
        return (
            f"`{command}` takes the receipts again with the schema now (writers go on), then "
            f"`omnigraph-migrate cutover {uri} --token {token}`; or put back the {SCHEMA_FILE} the receipts were taken with"
        )
    return (
        f"`{command}` puts stamp 4 back (primary keys already installed stay), then `omnigraph-migrate run {uri}` "
        f"takes the receipts again with the schema now; or put back the {SCHEMA_FILE} the receipts were taken with "
        f"and `omnigraph-migrate resume {uri} --token {token}`"
    )


def schema_changed_error(
    store: GraphStore, claim: ClaimDocument, stamp: str | None, standing: SchemaStanding, done: str = "nothing was written"
) -> SchemaChanged:
    """The refusal of a migration whose receipts were taken with another schema than ``_schema.pg`` now; ``done`` says what was written."""
    assert standing.recorded is not None and standing.recorded.schema_id is not None
    recorded = standing.recorded.schema_id
    now = "gone (the file is missing)" if standing.current is None else f"sha256 {standing.current[:12]}"
    return SchemaChanged(
        f"the schema of {store.uri} ({SCHEMA_FILE}) changed since the receipts of migration {claim.migration_id} were "
        f"taken (sha256 {recorded[:12]} then, {now} now): the migration does not rely on receipts taken with another "
        f"schema, and {done}. {schema_change_advice(store, claim, stamp)}",
        {
            "migration_id": claim.migration_id,
            "token": claim.token,
            "schema_file": SCHEMA_FILE,
            "recorded_schema_id": recorded,
            "current_schema_id": standing.current,
            "next": resolving_command(store, claim, stamp),
        },
    )


def refuse_schema_changed(m: Migration) -> None:
    """:class:`~omnigraph.migrator.errors.SchemaChanged` if ``_schema.pg`` is not the schema the receipts were taken with.

    Reads only. A migration whose receipts' identity is unknown (no schema receipt) is not refused.
    """
    standing = schema_standing(m.store, m.migration_id)
    if standing.changed:
        raise schema_changed_error(m.store, m.claim, m.manifest.read_stamp()[0], standing)


def take_schema(m: Migration, replay: LedgerReplay, *, retake: bool) -> int:
    """Record the schema identity the receipts about to be taken are taken with; the first sequence number whose receipts hold.

    The schema receipt is written before any receipt it covers. Unchanged: nothing is written.
    Unknown (no schema receipt, or one without an identity): the identity now is recorded and the
    receipts so far are kept. Changed: with ``retake`` (``prepare``) the receipts taken so far stop
    holding (the identity now is recorded from the next sequence number on, so every image is
    validated again); without it (behind the barrier) it is refused
    (:class:`~omnigraph.migrator.errors.SchemaChanged`). ``not_found`` if the graph has no
    ``_schema.pg``.
    """
    standing = schema_standing(m.store, m.migration_id)
    if standing.current is None:
        raise NotFound(
            f"{m.store.uri} has no {SCHEMA_FILE}; receipts are taken only with the graph's accepted schema",
            {"path": SCHEMA_FILE, "migration_id": m.migration_id},
        )
    recorded = standing.recorded
    if standing.known and not standing.changed:
        return standing.receipts_from
    replaced = list(recorded.replaced) if recorded is not None else []
    receipts_from = standing.receipts_from
    if standing.changed:
        if not retake:
            raise schema_changed_error(m.store, m.claim, m.manifest.read_stamp()[0], standing, "no receipt was taken now")
        assert recorded is not None and recorded.schema_id is not None
        replaced.append(recorded.schema_id)
        receipts_from = replay.records[-1][0] + 1 if replay.records else 1
    receipt = SchemaReceipt(
        migration_id=m.migration_id, token=m.token, schema_id=standing.current, receipts_from=receipts_from, replaced=replaced
    )
    m.store.write_bytes(schema_receipt_path(m.migration_id), canonical_json(receipt))
    return receipts_from
