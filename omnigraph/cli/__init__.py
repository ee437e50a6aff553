"""Every click command of the three console scripts.

``omnigraph`` (:mod:`omnigraph.cli.omnigraph`), ``omnigraph-v4`` (:mod:`omnigraph.cli.omnigraph_v4`) and
``omnigraph-migrate`` (:mod:`omnigraph.cli.migrate`). This package sits above ``engine``, ``claims``,
``ledger``, ``migrator`` and ``playbooks``; none of them imports it or click. Output contract
(:mod:`omnigraph.cli.support`): the result a command was asked for goes to stdout, progress, warnings and
error text go to stderr.
"""
