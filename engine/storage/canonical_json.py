"""Canonical JSON: the one byte encoding of every persisted document (intents, claims, ledger records).

Contract: keys sorted at every level, ``separators=(",", ":")``, UTF-8 without ASCII escaping,
no NaN or infinity. Equal values always encode to equal bytes, so a document read back and
re-encoded is byte-identical to what was written.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel


def canonical_json(value: BaseModel | Any) -> bytes:
    """The canonical UTF-8 JSON bytes of ``value`` (a pydantic model is dumped in JSON mode).

    pydantic is not imported here: a model exists only once pydantic is, so a process that
    encodes plain values (a read-only command) never pays for importing it."""
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(value, pydantic.BaseModel):
        value = value.model_dump(mode="json")
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")
