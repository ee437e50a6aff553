"""[omnigraph.engine.progress]
The progress protocol for long work (optimize, migration steps), and a silent implementation.

The stderr progress bar people see lives in :mod:`omnigraph.cli.progress`; nothing in the engine or the
migrator draws one.

"""

from __future__ import annotations

from typing import Protocol


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
