"""The claim document and the break record, as stored (canonical JSON, see :mod:`claims.canonical`).

Both models are frozen, forbid unknown fields and validate strictly (no string-to-int coercion),
so a stored document either parses exactly or is refused.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from claims.fields import ClaimToken, UtcTimestamp

Text = Annotated[str, Field(min_length=1)]


class ClaimDocument(BaseModel):
    """Who holds a claim: the operation, its migration id, the holder's token and identity."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    operation: Text
    migration_id: Text
    token: ClaimToken
    owner: Text
    host: Text
    pid: PositiveInt
    created_at: UtcTimestamp
    tool_version: Text


class BreakRecord(BaseModel):
    """The audit record an operator leaves when breaking a claim whose holder is proven dead."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    claim: ClaimDocument
    breaker: Text
    host: Text
    pid: PositiveInt
    reason: Text
    broken_at: UtcTimestamp
