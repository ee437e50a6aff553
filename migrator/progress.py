"""The progress protocol for long migration steps, and a silent implementation.

The stderr progress bar people see lives in :mod:`cli.progress`; nothing below ``cli`` draws one.
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
