"""Create-if-absent claims on object storage (local and S3): acquire, inspect, release, break.

See :mod:`claims.claim` for the contracts and for why there is no time-based takeover.
"""

from claims.claim import acquire, break_, break_record_path, inspect, read_break, release
from claims.document import BreakRecord, ClaimDocument
from claims.errors import ClaimCorrupt, claim_held, validation_problem
from claims.fields import ClaimToken, UtcTimestamp, new_token, utc_timestamp
from claims.liveness import holder_alive_here
from engine.storage import canonical_json

__all__ = [
    "BreakRecord",
    "ClaimCorrupt",
    "ClaimDocument",
    "ClaimToken",
    "UtcTimestamp",
    "acquire",
    "break_",
    "break_record_path",
    "canonical_json",
    "claim_held",
    "holder_alive_here",
    "inspect",
    "read_break",
    "new_token",
    "release",
    "utc_timestamp",
    "validation_problem",
]
