"""``commit list``: the graph commits reachable from a branch head, newest first.

Walks the commit graph (:mod:`omnigraph.engine.manifest.commit_graph`) from the branch head through every parent,
so a merge commit's history includes both lines; commits are ordered by commit time, newest
first (ties by commit id), each listed once. Versions that did not move the head (migration and
recovery publishes) are folded into the commit they belong to. The cost is proportional to the
history of the graph's live branches, by nature of the command; opening or writing a branch never
walks history.
"""

from __future__ import annotations

from omnigraph.engine.manifest.commit_graph import load_commit_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import HeadEntry


def commit_history(manifest: Manifest, branch: str) -> list[HeadEntry]:
    """Commits reachable from the head of ``branch``, newest first, each once."""
    manifest.require_branch(branch)
    head = manifest.snapshot(branch).head
    return load_commit_graph(manifest).history(head.commit_id)
