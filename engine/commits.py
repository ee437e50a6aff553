"""``commit list``: the graph commits reachable from a branch head, newest first.

Walks the branch's own ``__manifest`` versions, then its parent's up to the fork point, and so on
to main; versions that did not move the head (migration and recovery publishes) are folded into
the commit they belong to. The cost is proportional to the history listed, by nature of the
command; opening or writing a branch never walks history.
"""

from __future__ import annotations

from engine.manifest import MAIN, HeadEntry, Manifest


def commit_history(manifest: Manifest, branch: str) -> list[HeadEntry]:
    """Commits visible from ``branch``, newest first, each once."""
    manifest.require_branch(branch)
    branches = manifest.branches()
    seen: set[str] = set()
    history: list[HeadEntry] = []
    current, upto = branch, None
    while True:
        for version in reversed(manifest.head_versions(current)):
            if upto is not None and version > upto:
                continue
            head = manifest.snapshot(current, version).head
            if head.commit_id not in seen:
                seen.add(head.commit_id)
                history.append(head)
        if current == MAIN:
            return history
        info = branches[current]
        current, upto = str(info.parent_branch), info.parent_version
