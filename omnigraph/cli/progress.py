"""Progress bars for long work: always on stderr, so stdout carries only a command's result.

:class:`StderrProgress` implements :class:`omnigraph.migrate.Progress`.
"""

from __future__ import annotations

import sys
from typing import Any

import click


class StderrProgress:
    """One click progress bar at a time on stderr (units, rows validated)."""

    def __init__(self) -> None:
        self._bar: Any = None

    def start(self, label: str, total: int) -> None:
        """End the current bar, if any, and show a new one named ``label`` for ``total`` steps."""
        self.finish()
        self._bar = click.progressbar(length=max(total, 1), label=label, file=sys.stderr, show_pos=True)
        self._bar.__enter__()

    def advance(self, amount: int = 1) -> None:
        """Move the current bar ``amount`` steps on (nothing without a bar)."""
        if self._bar is not None:
            self._bar.update(amount)

    def finish(self) -> None:
        """Close the current bar, if any."""
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
