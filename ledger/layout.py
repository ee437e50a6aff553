"""File names of ledger records: ``<seq:08d>.json``, sequence numbers from 1, no gaps."""

from __future__ import annotations

import re

_RECORD_NAME = re.compile(r"^(\d{8,})\.json$")
# Local put_if_absent stages ".<name>.tmp-<hex>" next to the target; a killed writer leaves it.
_STAGING_NAME = re.compile(r"^\.\d{8,}\.json\.tmp-[0-9a-f]+$")


def record_name(seq: int) -> str:
    """The file name of sequence number ``seq``."""
    return f"{seq:08d}.json"


def record_path(directory: str, seq: int) -> str:
    """The store-relative path of sequence number ``seq`` in the ledger at ``directory``."""
    return f"{directory}/{record_name(seq)}"


def is_staging_name(name: str) -> bool:
    """True for a local create-if-absent staging file, which is not part of the ledger."""
    return bool(_STAGING_NAME.match(name))


def parse_record_name(name: str) -> int | None:
    """The sequence number a canonical record file name stands for, else None."""
    match = _RECORD_NAME.match(name)
    if match is None:
        return None
    seq = int(match.group(1))
    return seq if seq >= 1 and record_name(seq) == name else None
