"""The all-branch, in-place, crash-resumable fencing migration of a graph from format 4 to format 5.

Applications, ``omnigraph-migrate`` (:mod:`omnigraph.cli.migrate`) and the playbooks reach the
migrator through one door, :mod:`omnigraph.migrate`. The migrator writes Lance datasets only
through the engine's storage, manifest and fenced table-store APIs. Its modules:

* :mod:`~omnigraph.migrator.errors`: the errors only the migrator raises;
* :mod:`~omnigraph.migrator.options`: the executor names and the checks of the run options
  (executor, Ray address, parallel bounds); light enough for ``--help`` (no Lance, Arrow or DuckDB);
* :mod:`~omnigraph.migrator.layout`: where a migration keeps its claim, ledger and unit sidecars,
  the pinned images every executor sees, their physical fingerprints and the unit sidecars;
* :mod:`~omnigraph.migrator.status`: the operator's view (``status``), the next-step advice every
  command prints and the claim findings of ``omnigraph check``;
* :mod:`~omnigraph.migrator.executors`: the bounded fan-out of reads, the bounded-memory id
  validator and the executor seam with the ``local`` executor;
* :mod:`~omnigraph.migrator.ray_executor`: the ``ray`` executor, imported only when chosen;
* :mod:`~omnigraph.migrator.plan`: out-of-band table commits, the plan (units and images) and the
  duplicate/null inventory;
* :mod:`~omnigraph.migrator.inspection`: the read-only checks at every command's door (fleet,
  preconditions) and the read-only commands ``preflight``, ``plan`` and ``duplicates``;
* :mod:`~omnigraph.migrator.claim`: the claim's life: the :class:`~omnigraph.migrator.claim.Migration`
  a claim holder carries, a new claim and its ``migration_started`` (``begin``) or the held one
  (``attach``), and the operator's ``claim show``, ``claim break`` and ``abort``;
* :mod:`~omnigraph.migrator.schema_receipt`: the schema identity (``_schema.pg``) a migration's
  receipts were taken with, and the refusal to rely on them once it changed;
* :mod:`~omnigraph.migrator.unit`: one unit, idempotently, and the pool of units in flight;
* :mod:`~omnigraph.migrator.verify`: the answer check, the verification of the fencing state
  (``verify``) and the already-up-to-date check;
* :mod:`~omnigraph.migrator.run`: the protocol under the claim (barrier, plan, validation, units,
  verification, stamp 5, release) and the commands ``run``, ``refence`` and ``resume``;
* :mod:`~omnigraph.migrator.repair`: duplicate repair under the claim;
* :mod:`~omnigraph.migrator.rebuild`: the alternative to the in-place migration, a copy into a new
  format-5 graph by export and load.
"""
