"""Create-if-absent claims on object storage (local and S3), and who acts for them.

The package itself names nothing; its modules do:

- :mod:`omnigraph.claims.claim`: acquire, inspect, release and break a claim, and why there is no
  time-based takeover;
- :mod:`omnigraph.claims.acting`: the record of every process that acts for a claim, and how a
  process takes over a claim whose creator is gone;
- :mod:`omnigraph.claims.document`: the claim document, the break record and the acting record, as stored;
- :mod:`omnigraph.claims.liveness`: whether a process a claim names is provably alive on this host;
- :mod:`omnigraph.claims.fields`: the field types shared with ledger records, and their minting;
- :mod:`omnigraph.claims.errors`: the one constructor of ``claim_held``, and ``claim_corrupt``.
"""
