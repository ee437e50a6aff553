"""What drift detection reports about one table, and how drift is refused and resolved.

A :class:`TableDriftReport` lists the out-of-band commits (:class:`OutOfBandCommit`) between one
table's pin and its HEAD (or on an unpublished fork of a table the branch inherits) with the
verdict: ``adoptable`` (no row changed; the engine re-pins HEAD with a recorded graph commit) or
``drift`` (``table_drift`` until an operator runs ``omnigraph drift adopt`` or ``omnigraph drift
revert``). :func:`drift_error` is that refusal, naming the exact commands (:func:`commands_for`);
:func:`recover_command` is the command that resolves interrupted commits.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Literal

from omnigraph.engine.errors import TableDrift
from omnigraph.engine.storage.lance_io import LanceBranch

StepKind = Literal["no_row_change", "rewrite", "row_change"]
Verdict = Literal["adoptable", "drift"]

UNDECODED = "undecoded"
"""An operation pylance 14.0.2 has no Python class for (``BaseOperation``; compaction's fragment
reservation is one); classified by its fragments."""


@dataclass(frozen=True)
class OutOfBandCommit:
    """One table version made outside the engine, with what its records say it did."""

    version: int
    operation: str
    kind: StepKind

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "operation": self.operation, "kind": self.kind}


@dataclass(frozen=True)
class TableDriftReport:
    """The out-of-band commits between one table's pin and its HEAD, and the verdict."""

    graph_branch: str
    table_key: str
    table_path: str
    table_branch: str | None
    pinned_version: int
    head_version: int
    commits: tuple[OutOfBandCommit, ...]
    rows_preserved: bool | None
    verdict: Verdict
    unpinned_fork: LanceBranch | None = None
    inherited_branch: str | None = None

    @property
    def pinned_branch_name(self) -> str:
        """The table branch the manifest pins (for an unpinned fork, the inherited one)."""
        if self.unpinned_fork is None:
            return self.table_branch or "main"
        return self.pinned_table_branch or "main"

    @property
    def pinned_table_branch(self) -> str | None:
        return self.table_branch if self.unpinned_fork is None else self.inherited_branch

    @property
    def span(self) -> str:
        return f"v{self.pinned_version}..v{self.head_version}"

    @property
    def operations(self) -> list[str]:
        """Distinct operation names, in version order; undecoded steps that change no row are left
        out when the span has a named operation (they are the bookkeeping of that operation)."""
        named = [c for c in self.commits if not (c.operation == UNDECODED and c.kind == "no_row_change")]
        names: list[str] = []
        for commit in named or self.commits:
            if commit.operation not in names:
                names.append(commit.operation)
        return names

    def describe(self) -> str:
        steps = ", ".join(f"v{c.version} {c.operation}" for c in self.commits) or "no commits"
        if self.unpinned_fork is not None:
            fork = self.unpinned_fork
            return (
                f"{self.table_key} on branch {self.graph_branch!r}: {self.table_path} has a Lance branch "
                f"{fork.name!r} forked from {fork.parent_branch or 'main'}@v{fork.parent_version} that the "
                f"graph never published (it pins {self.pinned_branch_name}@v{self.pinned_version}), at "
                f"v{self.head_version} ({steps})"
            )
        return (
            f"{self.table_key} on branch {self.graph_branch!r}: table branch {self.table_branch or 'main'} of "
            f"{self.table_path} moved {self.span} outside the engine ({steps})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "graph_branch": self.graph_branch,
            "table_key": self.table_key,
            "table_path": self.table_path,
            "table_branch": self.table_branch,
            "pinned_version": self.pinned_version,
            "head_version": self.head_version,
            "commits": [c.to_json() for c in self.commits],
            "rows_preserved": self.rows_preserved,
            "verdict": self.verdict,
            "unpinned_fork": None
            if self.unpinned_fork is None
            else {
                "name": self.unpinned_fork.name,
                "parent_branch": self.unpinned_fork.parent_branch,
                "parent_version": self.unpinned_fork.parent_version,
            },
        }


def recover_command(uri: str) -> str:
    """The command that opens ``uri`` read-write to resolve interrupted commits (and reports drift)."""
    return f"omnigraph recover {shlex.quote(uri)}"


def commands_for(uri: str, report: TableDriftReport) -> dict[str, str]:
    """The exact ``omnigraph drift`` commands for one table's drift."""
    tail = f"{shlex.quote(uri)} --branch {shlex.quote(report.graph_branch)} --table {shlex.quote(report.table_key)}"
    return {verb: f"omnigraph drift {verb} {tail}" for verb in ("show", "adopt", "revert")}


def drift_error(uri: str, reports: list[TableDriftReport]) -> TableDrift:
    """``table_drift`` for the first drifted table, with every drifted table in ``details``."""
    first = reports[0]
    commands = commands_for(uri, first)
    undo = (
        f"deletes the unpublished fork {first.unpinned_fork.name!r}"
        if first.unpinned_fork is not None
        else f"restores the rows of v{first.pinned_version}"
    )
    return TableDrift(
        f"{first.describe()}, which changes what the branch reads; writes to it are refused until an "
        f"operator decides. `{commands['show']}` lists the commits; `{commands['adopt']}` keeps them "
        f"(after the fencing checks); `{commands['revert']}` {undo}",
        {
            "graph_branch": first.graph_branch,
            "table_key": first.table_key,
            "table_path": first.table_path,
            "table_branch": first.table_branch,
            "pinned_version": first.pinned_version,
            "head_version": first.head_version,
            "operations": [c.to_json() for c in first.commits],
            "commands": commands,
            "drifted": [r.to_json() for r in reports],
        },
    )
