"""``omnigraph-migrate``: the all-branch, in-place, crash-resumable fencing migration (4 -> 5).

Modules: :mod:`migrator.preconditions` (the read-only refusals at every command's door),
:mod:`migrator.start` (a new claim, or the held one, and ``migration_started``),
:mod:`migrator.driver` (the protocol under the claim: barrier, plan, validation, units, verify,
stamp 5, release), :mod:`migrator.run` (``run``, ``refence``, ``resume``), :mod:`migrator.abort`,
:mod:`migrator.plan` (units), :mod:`migrator.validate` and :mod:`migrator.executors` (bounded-memory
id checks, here or on Ray), :mod:`migrator.unit` (the per-unit install), :mod:`migrator.verify`
(the final check), :mod:`migrator.inspection` (read-only commands), :mod:`migrator.claim_ops`
(``claim show`` / ``claim break``), :mod:`migrator.repair` (duplicate repair under the claim); the
binary is :mod:`cli.migrate`. The migrator writes Lance datasets only through ``engine``'s
storage, manifest and fenced table-store APIs.
"""
