"""Create-if-absent claims on object storage (local and S3): acquire, inspect, release, break,
and the record of every process that acts for a claim.

See :mod:`omnigraph.claims.claim` for the contracts and for why there is no time-based takeover, and
:mod:`omnigraph.claims.acting` for how a process takes over a claim whose creator is gone.
"""

from omnigraph.claims.acting import ActingProcess, acting_for, acting_processes, live_others, refuse_if_acting, take_over
from omnigraph.claims.claim import acquire, break_, break_record_path, inspect, read_break, release
from omnigraph.claims.document import ActingRecord, BreakRecord, ClaimDocument
from omnigraph.claims.errors import ClaimCorrupt, claim_held, validation_problem
from omnigraph.claims.fields import ClaimToken, UtcTimestamp, new_token, utc_timestamp
from omnigraph.claims.liveness import holder_alive_here
from omnigraph.engine.storage import canonical_json

__all__ = [
    "ActingProcess",
    "ActingRecord",
    "acting_for",
    "acting_processes",
    "live_others",
    "refuse_if_acting",
    "take_over",
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
