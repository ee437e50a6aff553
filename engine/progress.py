"""The progress protocol for long work (optimize, migration steps), and a silent implementation.

A long task calls :meth:`Progress.start` with a label and the number of units of work, then
:meth:`Progress.advance` as units finish and :meth:`Progress.finish` at the end.
:class:`SilentProgress` reports nothing. The stderr progress bar people see is
:class:`omnigraph.cli.progress.StderrProgress`; nothing in the engine or the migrator draws one.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """What long work reports its progress to."""

    def start(self, label: str, total: int) -> None:
        """A task named ``label`` begins, with ``total`` units of work."""

    def advance(self, amount: int = 1) -> None:
        """``amount`` more units of the current task are done."""

    def finish(self) -> None:
        """The current task is over."""


class SilentProgress:
    """Reports nothing."""

    def start(self, label: str, total: int) -> None:
        """Report nothing."""
        return None

    def advance(self, amount: int = 1) -> None:
        """Report nothing."""
        return None

    def finish(self) -> None:
        """Report nothing."""
        return None
