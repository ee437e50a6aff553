"""``omnigraph-migrate``: the all-branch, in-place, crash-resumable fencing migration (4 -> 5).

Modules: :mod:`migrator.plan` (units), :mod:`migrator.validate` (bounded-memory id checks),
:mod:`migrator.unit` (the per-unit install), :mod:`migrator.verify` (the final check),
:mod:`migrator.run` (run / resume / abort), :mod:`migrator.inspection` (read-only commands),
the binary is :mod:`cli.migrate`. The migrator writes Lance datasets only through
``engine``'s manifest and fenced table-store APIs.
"""
