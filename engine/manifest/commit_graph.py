"""The graph commit DAG: every commit of every live branch, its parents, merge bases and ``commit list``.

A commit is the head row of a ``__manifest`` version (commit id, parents, actor, message, time).
:func:`load_commit_graph` reads the head row of every ``__manifest`` version of every live
branch (a version that did not move the head, such as a migration or recovery publish, adds
nothing new) and remembers, per commit id, the first ``(branch, manifest version)`` where it is
the head: the catalog image of that commit. The cost is one small read per ``__manifest``
version, proportional to the history; only ``commit list`` and ``branch merge`` pay it. Opening
or writing a branch never walks history.

Commits of a deleted branch that a merge commit names as a parent are not in the graph (their
manifest is gone); walks stop there. Ancestors on live branches stay reachable through the
other parent, so a merge base is always a commit whose catalog image can still be read.

:func:`commit_history` (``commit list``) gives the commits reachable from a branch head through
every parent, so a merge commit's history includes both lines: ordered by commit time, newest
first (ties by commit id), each listed once. Versions that did not move the head (migration and
recovery publishes) are folded into the commit they belong to.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from contextlib import AbstractContextManager

import lance
import msgspec
import pyarrow.compute as pc

from omnigraph.engine.errors import NotFound, ReadSetConflict
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import HEAD_OBJECT_ID, BranchSnapshot, HeadEntry, fold_rows
from omnigraph.engine.storage.lance_io import open_pinned_for_read


class CommitNode(msgspec.Struct, frozen=True):
    """One graph commit and where its catalog image lives."""

    head: HeadEntry
    branch: str
    manifest_version: int


class CommitGraph(msgspec.Struct, frozen=True):
    """Commit id -> :class:`CommitNode` for every commit visible on a live branch."""

    nodes: dict[str, CommitNode]

    def ancestors(self, commit_id: str) -> set[str]:
        """``commit_id`` and every commit reachable from it through parents (known ones only)."""
        seen: set[str] = set()
        stack = [commit_id]
        while stack:
            current = stack.pop()
            if current in seen or current not in self.nodes:
                continue
            seen.add(current)
            stack.extend(self.nodes[current].head.parents)
        return seen

    def merge_base(self, left: str, right: str) -> str | None:
        """The nearest common ancestor of two commits (None if they share none).

        Of the common ancestors, the best ones are those that are not an ancestor of another
        common ancestor. With several (criss-cross merges), the newest by commit time is taken,
        ties broken by commit id, so the choice is deterministic.
        """
        common = self.ancestors(left) & self.ancestors(right)
        if not common:
            return None
        dominated: set[str] = set()
        for commit_id in common:
            for parent in self.nodes[commit_id].head.parents:
                dominated |= self.ancestors(parent) & common
        best = sorted(common - dominated, key=lambda c: (self.nodes[c].head.committed_at, c))
        return best[-1]

    def history(self, head_id: str) -> list[HeadEntry]:
        """Every commit reachable from ``head_id``, newest first (commit time, then id)."""
        reachable = self.ancestors(head_id)
        ordered = sorted(reachable, key=lambda c: (self.nodes[c].head.committed_at, c), reverse=True)
        return [self.nodes[c].head for c in ordered]


def load_commit_graph(manifest: Manifest) -> CommitGraph:
    """Read the head row of every ``__manifest`` version of every live branch."""
    nodes: dict[str, CommitNode] = {}
    for branch in manifest.branches():
        try:
            heads = [(version, _head_at(manifest, branch, version)) for version in manifest.head_versions(branch)]
        except (NotFound, ValueError, OSError):
            if manifest.incarnation(branch) is not None:
                raise
            continue  # deleted while it was read: no longer live
        for version, head in heads:
            if head.commit_id not in nodes:
                nodes[head.commit_id] = CommitNode(head, branch, version)
    return CommitGraph(nodes)


def _head_at(manifest: Manifest, branch: str, version: int) -> HeadEntry:
    rows = manifest.dataset(branch, version).to_table(filter=pc.field("object_id") == HEAD_OBJECT_ID)
    return fold_rows(branch, version, rows).head


def commit_history(manifest: Manifest, branch: str) -> list[HeadEntry]:
    """Commits reachable from the head of ``branch``, newest first, each once."""
    manifest.require_branch(branch)
    head = manifest.snapshot(branch).head
    return load_commit_graph(manifest).history(head.commit_id)


class ReadPoint(msgspec.Struct, frozen=True):
    """The commit a query reads and the folded manifest that holds its images.

    ``manifest_branch`` is the graph branch whose ``__manifest`` holds ``snapshot`` (for a
    commit inherited from a parent branch, the parent); ``incarnation`` is that branch's
    incarnation, read before the snapshot. A reader opens the images the snapshot pins with
    :meth:`open_images`, inside :meth:`reading`.
    """

    branch: str
    commit: str
    snapshot: BranchSnapshot
    manifest_branch: str
    incarnation: str

    def reading(self, manifest: Manifest) -> AbstractContextManager[None]:
        """``Manifest.reading`` of the snapshot's branch and incarnation: the guard of every read of its images."""
        return manifest.reading(self.manifest_branch, self.incarnation)

    def open_images(self, manifest: Manifest, table_keys: Iterable[str]) -> dict[str, lance.LanceDataset]:
        """The pinned image of each of ``table_keys``, opened, once the branch is confirmed still the snapshot's incarnation.

        A branch deleted and created again reuses its version numbers, so the images are the
        snapshot's only when the incarnation is unchanged after they were opened
        (``Manifest.confirm``: ``not_found`` or ``read_set_conflict``). For reading only: an image
        on a main branch is a handle the process shares among the readers of this commit
        (``open_pinned_for_read``).
        """
        datasets = {key: open_pinned_for_read(manifest.store, self.snapshot.table(key).image, self.commit) for key in table_keys}
        manifest.confirm(self.manifest_branch, self.incarnation)
        return datasets


def read_point(manifest: Manifest, branch: str, at: str | None) -> ReadPoint:
    """The head of ``branch``, or its commit ``at``; ``not_found`` for an unknown branch or commit.

    ``read_set_conflict`` (retry) when the branch holding the commit was deleted and created
    again while it was read: its version of that number is another incarnation's.
    """
    incarnation = manifest.require_incarnation(branch)
    head = manifest.snapshot(branch)
    if at is None or at == head.head.commit_id:
        return ReadPoint(branch, head.head.commit_id, head, branch, incarnation)
    commits = load_commit_graph(manifest)
    if at not in commits.ancestors(head.head.commit_id):
        raise NotFound(
            f"commit {at!r} is not a commit of branch {branch!r} (see "
            f"`omnigraph commit list --branch {shlex.quote(branch)} {shlex.quote(manifest.store.uri)}`)",
            {"branch": branch, "commit": at},
        )
    node = commits.nodes[at]
    holder = incarnation if node.branch == branch else manifest.require_incarnation(node.branch)
    return ReadPoint(branch, at, commit_snapshot(manifest, commits, at), node.branch, holder)


def commit_snapshot(manifest: Manifest, commits: CommitGraph, commit_id: str) -> BranchSnapshot:
    """The folded manifest where commit ``commit_id`` of ``commits`` was its branch's head.

    ``read_set_conflict`` (retry) when that version holds another commit: the branch was deleted
    and created again after ``commits`` was read, and numbers its versions again.
    """
    node = commits.nodes[commit_id]
    snapshot = manifest.snapshot(node.branch, node.manifest_version)
    if snapshot.head.commit_id != commit_id:
        raise ReadSetConflict(
            f"graph branch {node.branch!r} was deleted and created again while commit {commit_id!r} was read; retry",
            {"member": f"branch {node.branch}", "expected": f"commit {commit_id}", "actual": f"commit {snapshot.head.commit_id}"},
        )
    return snapshot
