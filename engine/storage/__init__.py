"""Storage: the graph root on object storage and the Lance datasets under it.

:mod:`~omnigraph.engine.storage.store` is the object store (one URI, local or S3, with the atomic
create-if-absent primitive), :mod:`~omnigraph.engine.storage.image` names one pinned table image (:class:`ImageRef`) and opens it
(:func:`open_pinned`), :mod:`~omnigraph.engine.storage.lance_io` opens Lance datasets at a (branch,
version) and lists, forks and deletes Lance branches, :mod:`~omnigraph.engine.storage.names` holds every
root-relative name used in several places, :mod:`~omnigraph.engine.storage.stamps` the format stamp values,
:mod:`~omnigraph.engine.storage.canonical_json` the byte encoding of every persisted JSON document and
:mod:`~omnigraph.engine.storage.process` the liveness of the processes those documents name (host, pid,
start time).
Nothing here writes table rows, and nothing here imports another engine sub-package but
:mod:`omnigraph.engine.errors`.
"""

from omnigraph.engine.storage.canonical_json import canonical_json
from omnigraph.engine.storage.image import ImageRef, open_pinned
from omnigraph.engine.storage.lance_io import (
    ForeignFork,
    Fork,
    ForkInterrupted,
    LanceBranch,
    create_empty_dataset,
    delete_branch_if_present,
    fork_or_adopt,
    latest_version,
    list_branches,
    open_dataset,
    open_dataset_at,
    primary_key,
    read_branch,
    remove_unreferenced_fork,
    wait_for_branch,
)
from omnigraph.engine.storage.names import (
    CLAIM_PATH,
    FLEET_DIR,
    MANIFEST_DIR,
    MIGRATION_DIR,
    PK_METADATA_KEY,
    RECOVERY_DIR,
    SCHEMA_FILE,
)
from omnigraph.engine.storage.stamps import FORMAT_4, FORMAT_5, FORMAT_MIGRATING, KNOWN_STAMPS
from omnigraph.engine.storage.store import (
    STORAGE_OPTION_ENV,
    GraphStore,
    check_storage_options,
    copy_root,
    open_store,
    storage_options_scope,
)

__all__ = [
    "CLAIM_PATH",
    "FLEET_DIR",
    "FORMAT_4",
    "FORMAT_5",
    "FORMAT_MIGRATING",
    "KNOWN_STAMPS",
    "MANIFEST_DIR",
    "MIGRATION_DIR",
    "PK_METADATA_KEY",
    "RECOVERY_DIR",
    "SCHEMA_FILE",
    "STORAGE_OPTION_ENV",
    "ForeignFork",
    "Fork",
    "ForkInterrupted",
    "GraphStore",
    "ImageRef",
    "LanceBranch",
    "canonical_json",
    "check_storage_options",
    "copy_root",
    "create_empty_dataset",
    "delete_branch_if_present",
    "fork_or_adopt",
    "latest_version",
    "list_branches",
    "open_dataset",
    "open_dataset_at",
    "open_pinned",
    "open_store",
    "primary_key",
    "read_branch",
    "remove_unreferenced_fork",
    "storage_options_scope",
    "wait_for_branch",
]
