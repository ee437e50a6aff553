"""The ledger's refusals: a lost sequence-number race, and a ledger that cannot be read back."""

from __future__ import annotations

from typing import Any

from omnigraph.engine.errors import EXIT_CLAIM_HELD, OmnigraphError


class LedgerFenced(OmnigraphError):
    """Another writer created the sequence number this writer tried to append.

    The losing writer is fenced: it must stop, not retry at a higher number (a live second writer
    means the claim is no longer, or never was, exclusively this process's).
    ``details``: ``{"path", "seq"}``.
    """

    code = "ledger_fenced"
    http_status = 409
    exit_code = EXIT_CLAIM_HELD

    def __init__(self, path: str, seq: int) -> None:
        super().__init__(
            f"ledger record {path} was written by another process first: this process is fenced "
            "and stops here. Another migration process is writing this ledger; inspect the claim "
            "and the ledger before doing anything else.",
            {"path": path, "seq": seq},
        )


class LedgerCorrupt(OmnigraphError):
    """A ledger file is not JSON, not a record, out of sequence, or inconsistent with the ledger.

    The file is left untouched and nothing is skipped. ``details``: ``{"path", "problem", ...}``.
    """

    code = "ledger_corrupt"
    http_status = 500

    def __init__(self, path: str, problem: str, **extra: Any) -> None:
        super().__init__(
            f"ledger record {path} is unusable: {problem}. It was left untouched; repair or "
            "restore it by hand before resuming (no record is ever skipped).",
            {"path": path, "problem": problem, **extra},
        )
