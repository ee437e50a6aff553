"""Progress reporting for long migration steps (stderr bars for people, silence for tests)."""

from __future__ import annotations

import sys
from typing import Any, Protocol

import click


class Progress(Protocol):
    def start(self, label: str, total: int) -> None: ...

    def advance(self, amount: int = 1) -> None: ...

    def finish(self) -> None: ...


class SilentProgress:
    """Reports nothing."""

    def start(self, label: str, total: int) -> None:
        return None

    def advance(self, amount: int = 1) -> None:
        return None

    def finish(self) -> None:
        return None


class StderrProgress:
    """One click progress bar at a time on stderr (units, rows validated)."""

    def __init__(self) -> None:
        self._bar: Any = None

    def start(self, label: str, total: int) -> None:
        self.finish()
        self._bar = click.progressbar(length=max(total, 1), label=label, file=sys.stderr, show_pos=True)
        self._bar.__enter__()

    def advance(self, amount: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(amount)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
