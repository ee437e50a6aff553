"""Three-way comparison of one table across a merge: base, source and target images.

Each image is summarised as a Python dict ``id -> row digest`` (a 16-byte BLAKE2b of the row's
canonical JSON), read 8,192 rows at a time, so a table costs memory proportional to its row count
(the id string, the digest and the dict slot: on the order of 150 bytes per row with short ids)
per image read, never its full rows. An image whose pin equals the base's or the target's pin is
not read twice. Per id (absence counts as a value; "changed" = differs from base):

* source unchanged: keep target;
* source changed, target unchanged: take source (insert, update or delete);
* both changed to the same value: keep target;
* both changed differently: a conflict, ``divergent_insert`` (absent in base),
  ``delete_vs_update`` (one side deleted, the other updated), else ``divergent_update``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.manifest import TableEntry
from engine.storage import GraphStore, open_pinned

ConflictKind = Literal["divergent_insert", "delete_vs_update", "divergent_update"]
_BATCH_ROWS = 8192


@dataclass(frozen=True)
class Conflict:
    """One id both sides changed differently."""

    table_key: str
    id: str
    kind: ConflictKind

    def document(self) -> dict[str, str]:
        return {"table_key": self.table_key, "id": self.id, "kind": self.kind}


@dataclass
class TableChanges:
    """What merging the source into the target does to one table (ids sorted)."""

    table_key: str
    inserts: list[str] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.inserts) + len(self.updates) + len(self.deletes)


def _pin(entry: TableEntry | None) -> tuple[str, str | None, int] | None:
    return None if entry is None else (entry.table_path, entry.table_branch, entry.table_version)


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot digest {type(value).__name__}")


def image_digests(store: GraphStore, entry: TableEntry | None) -> dict[str, bytes]:
    """``id -> digest`` of every row of the pinned image (empty for a missing table)."""
    if entry is None:
        return {}
    dataset = open_pinned(store, entry.image)
    digests: dict[str, bytes] = {}
    for batch in dataset.to_batches(batch_size=_BATCH_ROWS):
        for row in batch.to_pylist():
            text = json.dumps(row, sort_keys=True, default=_json_default, separators=(",", ":"))
            digests[row["id"]] = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
    return digests


def _conflict_kind(base: bytes | None, source: bytes | None, target: bytes | None) -> ConflictKind:
    if base is None:
        return "divergent_insert"
    if source is None or target is None:
        return "delete_vs_update"
    return "divergent_update"


def compare_table(
    store: GraphStore,
    table_key: str,
    base: TableEntry | None,
    source: TableEntry | None,
    target: TableEntry | None,
) -> TableChanges:
    """The three-way result for one table (see the module docstring)."""
    changes = TableChanges(table_key)
    if _pin(source) == _pin(base) or _pin(source) == _pin(target):
        return changes
    base_rows = image_digests(store, base)
    source_rows = image_digests(store, source)
    target_rows = base_rows if _pin(target) == _pin(base) else image_digests(store, target)
    changed = sorted(row_id for row_id in base_rows.keys() | source_rows.keys() if base_rows.get(row_id) != source_rows.get(row_id))
    for row_id in changed:
        was, theirs, ours = base_rows.get(row_id), source_rows.get(row_id), target_rows.get(row_id)
        if ours == was:
            if theirs is None:
                changes.deletes.append(row_id)
            elif ours is None:
                changes.inserts.append(row_id)
            else:
                changes.updates.append(row_id)
        elif ours != theirs:
            changes.conflicts.append(Conflict(table_key, row_id, _conflict_kind(was, theirs, ours)))
    return changes
