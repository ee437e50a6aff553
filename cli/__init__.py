"""Every click command of the three console scripts.

``omnigraph`` (:mod:`cli.omnigraph`), ``omnigraph-v4`` (:mod:`cli.omnigraph_v4`) and
``omnigraph-migrate`` (:mod:`cli.migrate`). This package sits above ``engine``, ``claims``,
``ledger``, ``migrator`` and ``playbooks``; none of them imports it or click. Output contract
(:mod:`cli.support`): the result a command was asked for goes to stdout, progress, warnings and
error text go to stderr.
"""
