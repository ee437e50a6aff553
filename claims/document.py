"""The claim document, the break record and the acting record, as stored (canonical JSON).

Every model is frozen, forbids unknown fields and validates strictly (no string-to-int
coercion), so a stored document either parses exactly or is refused. ``process_start`` is the
kernel start time of the process a document names (:func:`omnigraph.engine.storage.process.process_start_marker`):
it tells that process apart from a later one that reuses its pid. It is None when unknown (a
claim written before it was recorded, or a platform without ``/proc``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from omnigraph.claims.fields import ClaimToken, UtcTimestamp

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
    process_start: str | None = None
    online: bool = False
    """True for a claim taken by ``omnigraph-migrate prepare``: it bars other migrations but not
    the writers of a format-4 graph (the stamp ``migrating`` is the barrier). False: it bars every
    writer while it is held."""


class BreakRecord(BaseModel):
    """The audit record an operator leaves when breaking a claim whose holder is proven dead."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    claim: ClaimDocument
    breaker: Text
    host: Text
    pid: PositiveInt
    reason: Text
    broken_at: UtcTimestamp


class ActingRecord(BaseModel):
    """One process starting or ending to act for a claim it did not create (:mod:`omnigraph.claims.acting`).

    ``event`` ``started`` is written before the process acts (``action``: ``resume``, ``abort``,
    ``repair``, ``break``); ``ended`` when it stops acting, also for the claim's own creator. A
    process killed while acting leaves no ``ended`` record; it is then known dead only by its
    host's process table.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    token: ClaimToken
    event: Literal["started", "ended"]
    action: Text
    owner: Text
    host: Text
    pid: PositiveInt
    process_start: str | None
    at: UtcTimestamp
