"""Catching a format-4 writer that published after stamp 5, and the readiness check built on it.

Every graph commit's head row records the program and format that wrote it
(:class:`omnigraph.engine.manifest.rows.HeadEntry`); stamp ``5`` records every branch's head at stamping time
(``omnigraph:fenced_heads``). A branch head written by a format-4 writer that is not one of
those heads was published after the stamp, by an old binary that had opened the graph before the
barrier: its rows went in without the fence (a bare Append, an unfiltered merge, or an overwrite
that drops the PK). Such a commit makes the graph refuse format-5 writes (``format_refused``,
naming the commit) until ``omnigraph-migrate refence`` has validated every image and fenced the
graph again. Heads whose writer is unknown (graphs whose ``__manifest`` predates the writer
columns) are not flagged.

Checked where: every format-5 read-write open (:func:`refuse_foreign_heads`, cheap: one manifest
read per branch), every commit's snapshot and publish rebase (:func:`foreign_head`), and
:func:`readiness_problems` (heads plus the PK of every pinned table image), which
``omnigraph-migrate verify`` and a server's readiness check call.
"""

from __future__ import annotations

from typing import Any

import msgspec

from omnigraph.engine.access.permission import current_permission
from omnigraph.engine.door.routing import EngineProfile
from omnigraph.engine.door.table_store import KEY_COLUMN
from omnigraph.engine.errors import FormatRefused
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import BranchSnapshot
from omnigraph.engine.results import Readiness
from omnigraph.engine.storage.lance_io import open_pinned, primary_key
from omnigraph.engine.storage.names import FORMAT_4, FORMAT_5
from omnigraph.engine.storage.store import GraphStore


class ForeignCommit(msgspec.Struct, frozen=True):
    """A branch head written by a format-4 writer after stamp 5."""

    branch: str
    commit_id: str
    writer_program: str
    manifest_version: int
    message: str

    def describe(self) -> str:
        """The commit in words, for messages: id, branch, manifest version, message and writer."""
        return (
            f"commit {self.commit_id} on branch {self.branch} (__manifest v{self.manifest_version}, "
            f"{self.message!r}) was written by {self.writer_program} (format 4) after stamp 5"
        )

    def to_json(self) -> dict[str, Any]:
        """The commit's JSON document: branch, commit id, writer program, manifest version, message."""
        return {
            "branch": self.branch,
            "commit_id": self.commit_id,
            "writer_program": self.writer_program,
            "manifest_version": self.manifest_version,
            "message": self.message,
        }


def foreign_head(snapshot: BranchSnapshot, fenced_heads: dict[str, str]) -> ForeignCommit | None:
    """The snapshot's head if a format-4 writer published it after stamp 5, else None."""
    head = snapshot.head
    if head.writer_format != FORMAT_4 or head.commit_id in set(fenced_heads.values()):
        return None
    return ForeignCommit(snapshot.branch, head.commit_id, head.writer_program or "unknown", snapshot.manifest_version, head.message)


def foreign_heads(manifest: Manifest) -> list[ForeignCommit]:
    """Every branch head a format-4 writer published after stamp 5, by branch (main first)."""
    fenced = manifest.read_fenced_heads()
    found = []
    for snapshot in manifest.snapshots().values():
        commit = foreign_head(snapshot, fenced)
        if commit is not None:
            found.append(commit)
    return found


def refence_command(uri: str) -> str:
    """The command that validates every image of ``uri`` and fences the graph again."""
    return f"omnigraph-migrate refence {uri}"


def foreign_refusal(uri: str, found: list[ForeignCommit]) -> FormatRefused:
    """The ``format_refused`` error for format-4 commits after stamp 5, naming each commit."""
    return FormatRefused(
        f"{uri} refuses format-5 writes: " + "; ".join(c.describe() for c in found) + ". An old binary "
        "opened the graph before the upgrade and wrote without the key-conflict fence. Stop every "
        f"format-4 process, then run `{refence_command(uri)}` (it validates every image and fences the "
        "graph again); reads still work.",
        {"uri": uri, "foreign_commits": [c.to_json() for c in found], "repair": refence_command(uri)},
    )


def refuse_foreign_heads(store: GraphStore, manifest: Manifest) -> None:
    """Raise :func:`foreign_refusal` if any branch head is a format-4 commit after stamp 5."""
    found = foreign_heads(manifest)
    if found:
        raise foreign_refusal(store.uri, found)


def readiness_problems(store: GraphStore, manifest: Manifest) -> list[str]:
    """Why a stamp-5 graph must not take format-5 writes; [] when it may.

    Format-4 heads after the stamp, and every pinned table image (each distinct image once)
    whose primary key is not exactly ``[id]``, naming the branch head that pins it.
    """
    problems = [f"{c.describe()}; run `{refence_command(store.uri)}`" for c in foreign_heads(manifest)]
    checked: dict[tuple[str, str | None, int], list[str]] = {}
    for branch, snapshot in manifest.snapshots().items():
        for table_key, entry in snapshot.tables.items():
            image = (entry.table_path, entry.table_branch, entry.table_version)
            if image not in checked:
                try:
                    schema = open_pinned(store, entry.image).schema
                except (ValueError, OSError):
                    if manifest.incarnation(branch) is not None:
                        raise
                    break  # the branch was deleted while it was read: no longer live
                checked[image] = primary_key(schema)
            if checked[image] != [KEY_COLUMN]:
                problems.append(
                    f"{table_key} on branch {branch} (as of commit {snapshot.head.commit_id}) pins "
                    f"{entry.table_path}@{entry.table_branch or 'main'}:v{entry.table_version}, whose primary key "
                    f"is {checked[image] or 'none'}; run `{refence_command(store.uri)}`"
                )
    return sorted(problems)


def readiness(manifest: Manifest, profile: EngineProfile) -> Readiness:
    """Whether ``profile`` may write the graph now, and why (what ``GET /readyz`` answers).

    The stamp and the migration claim decide (:func:`omnigraph.engine.access.permission.current_permission`);
    at stamp ``5`` a fenced program also needs :func:`readiness_problems` to find nothing (a commit
    a format-4 writer published after the stamp, or an image without the primary key, makes the
    graph not writable).

    Raises:
        FormatRefused: the graph has no stamp or an unknown one.
    """
    permission = current_permission(manifest, profile)
    stamp, writable, reason = permission.stamp, permission.writable, permission.reason
    if writable and stamp == FORMAT_5 and profile.router.with_pk:
        problems = readiness_problems(manifest.store, manifest)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            writable, reason = False, f"format_refused: {problems[0]}{more}"
    return Readiness(format=stamp, writable=writable, reason=reason)
