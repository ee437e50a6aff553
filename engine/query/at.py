"""Which catalog image a read query reads: a branch head, or a commit of the branch (``--at``).

Time travel: the graph as of commit ``C`` of branch ``B`` is the ``__manifest`` version where
``C`` first became a head (:func:`omnigraph.engine.manifest.load_commit_graph`); its table rows pin the
images that commit published, which version cleanup keeps while the commit is reachable. ``C``
must be reachable from ``B``'s head (``B``'s own commits and those it inherited or merged),
else ``not_found``. Finding it reads one head row per ``__manifest`` version of the live
branches, so a head read (no ``--at``) never pays it.
"""

from __future__ import annotations

from dataclasses import dataclass

from omnigraph.engine.errors import NotFound
from omnigraph.engine.manifest.commit_graph import load_commit_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import BranchSnapshot


@dataclass(frozen=True)
class ReadPoint:
    """The commit a query reads and the folded manifest that holds its images.

    ``manifest_branch`` is the graph branch whose ``__manifest`` holds ``snapshot`` (for a
    commit inherited from a parent branch, the parent).
    """

    branch: str
    commit: str
    snapshot: BranchSnapshot
    manifest_branch: str


def read_point(manifest: Manifest, branch: str, at: str | None) -> ReadPoint:
    """The head of ``branch``, or its commit ``at``; ``not_found`` for an unknown branch or commit."""
    head = manifest.snapshot(branch)
    if at is None or at == head.head.commit_id:
        return ReadPoint(branch, head.head.commit_id, head, branch)
    commits = load_commit_graph(manifest)
    if at not in commits.ancestors(head.head.commit_id):
        raise NotFound(
            f"commit {at!r} is not a commit of branch {branch!r} (see `omnigraph commit list --branch {branch}`)",
            {"branch": branch, "commit": at},
        )
    node = commits.nodes[at]
    return ReadPoint(branch, at, manifest.snapshot(node.branch, node.manifest_version), node.branch)
