"""Create-if-absent claims on object storage (local and S3): acquire, inspect, release, break,
and the record of every process that acts for a claim.

See :mod:`omnigraph.claims.claim` for the contracts and for why there is no time-based takeover, and
:mod:`omnigraph.claims.acting` for how a process takes over a claim whose creator is gone.
"""
