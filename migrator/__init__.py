"""``omnigraph-migrate``: the all-branch, in-place, crash-resumable fencing migration (4 -> 5).

Modules: :mod:`omnigraph.migrator.inspection` (the read-only refusals at every command's door),
:mod:`omnigraph.migrator.context` (a new claim, or the held one, and ``migration_started``),
:mod:`omnigraph.migrator.run` (the protocol under the claim: barrier, plan, validation, units, verify,
stamp 5, release), :mod:`omnigraph.migrator.run` (``run``, ``refence``, ``resume``), :mod:`omnigraph.migrator.claim_ops`,
:mod:`omnigraph.migrator.plan` (units), :mod:`omnigraph.migrator.executors` and :mod:`omnigraph.migrator.executors` (bounded-memory
id checks, here or on Ray), :mod:`omnigraph.migrator.unit` (the per-unit install), :mod:`omnigraph.migrator.verify`
(the final check), :mod:`omnigraph.migrator.inspection` (read-only commands), :mod:`omnigraph.migrator.claim_ops`
(``claim show`` / ``claim break``), :mod:`omnigraph.migrator.repair` (duplicate repair under the claim); the
binary is :mod:`omnigraph.cli.migrate`. The migrator writes Lance datasets only through ``engine``'s
storage, manifest and fenced table-store APIs.
"""
