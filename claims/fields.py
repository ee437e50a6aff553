"""Field types shared by claims and ledger records, and the functions that mint their values.

``UtcTimestamp`` is an ISO-8601 UTC instant ending in ``Z`` (``2026-07-10T12:00:00.123456Z``);
``ClaimToken`` is 128 random bits as 32 lowercase hex characters.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Annotated

from pydantic import StringConstraints

UtcTimestamp = Annotated[str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")]
ClaimToken = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]


def utc_timestamp() -> str:
    """The current instant as an ISO-8601 UTC string with microseconds and a ``Z`` suffix."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_token() -> str:
    """A fresh claim token: 128 bits from :mod:`secrets`, as 32 hex characters."""
    return secrets.token_hex(16)
