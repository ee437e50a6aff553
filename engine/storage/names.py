"""Root-relative names the engine shares across modules, the Lance primary-key metadata key, the format stamps.

A graph root holds ``_schema.pg`` (the accepted schema source), ``_schemas/`` (every schema
version a schema change accepted, once the first change is applied), ``__manifest`` (the manifest
Lance dataset), one Lance dataset per table, ``__recovery/`` (write intents, their resolution
log, the per-branch leases and a schema change in progress), ``__fleet/`` (the registry of running writers) and, during an
upgrade, ``__migration/`` (the migrator's claim, ledger and unit sidecars). The engine reads the
claim document only as plain JSON; its format belongs to ``claims/``.

The format stamp is ``omnigraph:format`` on ``__manifest`` main; its values are :data:`FORMAT_4`,
:data:`FORMAT_MIGRATING` and :data:`FORMAT_5` (:data:`KNOWN_STAMPS`).
"""

from __future__ import annotations

SCHEMA_FILE = "_schema.pg"
SCHEMAS_DIR = "_schemas"
MANIFEST_DIR = "__manifest"
RECOVERY_DIR = "__recovery"
FLEET_DIR = "__fleet"
MIGRATION_DIR = "__migration"
CLAIM_PATH = f"{MIGRATION_DIR}/claim.json"
SCHEMA_CHANGE_PATH = f"{RECOVERY_DIR}/schema/change.json"

PK_METADATA_KEY = "lance-schema:unenforced-primary-key"
"""Lance field metadata that makes ``id`` the table's unenforced primary key (format 5)."""


FORMAT_4 = "4"
FORMAT_MIGRATING = "migrating"
FORMAT_5 = "5"
KNOWN_STAMPS = (FORMAT_4, FORMAT_MIGRATING, FORMAT_5)
