"""Physical fingerprint of a table image: which data and deletion files make up its rows.

Two versions with the same fingerprint hold the same rows: Lance never rewrites a data file in
place, and any row change adds data files or deletion files. A PK metadata commit and a branch
fork keep every fragment as it was (a fork only sets a base reference, which is ignored here), so
the migration checks its effects with this cheap fingerprint and falls back to re-reading the ids
only when it differs.
"""

from __future__ import annotations

import hashlib

import lance

from omnigraph.engine.storage.store import canonical_json


def physical_fingerprint(dataset: lance.LanceDataset) -> str:
    """sha256 over every fragment's id, data files (path, size), row count and deletion file."""
    fragments = []
    for fragment in dataset.get_fragments():
        meta = fragment.metadata.to_json()
        deletion = meta.get("deletion_file")
        fragments.append(
            {
                "id": meta["id"],
                "files": sorted((f["path"], f.get("file_size_bytes")) for f in meta["files"]),
                "physical_rows": meta["physical_rows"],
                "deletion": None if deletion is None else [deletion["id"], deletion["read_version"], deletion["num_deleted_rows"]],
            }
        )
    fragments.sort(key=lambda f: f["id"])
    return hashlib.sha256(canonical_json(fragments)).hexdigest()
