"""Out-of-band table commits on a graph about to be migrated.

A format-4 graph gets routine Lance maintenance too (an index, a compaction). Before anything is
claimed, :func:`out_of_band_reports` classifies every table HEAD past its pin on every live
branch (:mod:`omnigraph.engine.reconcile.drift`): preflight reports them, and row-changing drift refuses the
migration (``table_drift``, naming the ``omnigraph drift`` commands that resolve it). Under the
claim and the barrier, before the plan pins any image, :func:`adopt_before_plan` re-pins the
HEADs that change no row with a recorded graph commit, so the units pin them; drift that
appeared after the check stops the run (the unit drift checks stop it later too).
"""

from __future__ import annotations

from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.reconcile import drift
from omnigraph.engine.storage.store import GraphStore
from omnigraph.migrator.errors import DriftDetected
from omnigraph.migrator.fan_out import default_parallel, fan_out


def out_of_band_reports(store: GraphStore, manifest: Manifest) -> list[drift.TableDriftReport]:
    """Every owned table past its pin, on every live branch (main first, then by name)."""
    branches = list(manifest.branches())
    found = fan_out(lambda branch: drift.out_of_band(store, manifest, branch), branches, default_parallel(store))
    return [report for reports in found for report in reports]


def refuse_row_drift(store: GraphStore, reports: list[drift.TableDriftReport]) -> None:
    """``table_drift`` (nothing claimed, nothing written) if any report changes rows."""
    drifted = [r for r in reports if r.verdict == "drift"]
    if drifted:
        raise drift.drift_error(store.uri, drifted)


def adopt_before_plan(store: GraphStore, manifest: Manifest, migration_id: str, token: str) -> list[drift.TableDriftReport]:
    """Adopt every change-no-row HEAD on every branch under the claim; returns what was adopted.

    The branches are looked at :func:`~omnigraph.migrator.fan_out.default_parallel` at a time (reads only);
    those with a table past its pin are then settled one after another, main first, then by name,
    so the first drift met in that order is the one refused. Under the claim and the barrier no
    writer moves a table between the two reads.
    """
    adopted: list[drift.TableDriftReport] = []
    branches = list(manifest.branches())
    found = fan_out(lambda branch: drift.out_of_band(store, manifest, branch), branches, default_parallel(store))
    for branch in [name for name, reports in zip(branches, found, strict=True) if reports]:
        done, drifted = drift.settle(store, manifest, branch, actor=f"omnigraph-migrate {migration_id}", require_fencing=False)
        adopted += done
        if drifted:
            first = drifted[0]
            raise DriftDetected(
                f"{first.describe()}, which changes rows, appeared after the migration started; the "
                f"stamp will not be written. Stop every writer, `omnigraph-migrate abort {store.uri} "
                f"--token {token}`, then resolve it with `{drift.commands_for(store.uri, first)['adopt']}` "
                f"or `{drift.commands_for(store.uri, first)['revert']}` and run the migration again.",
                {"drifted": [r.to_json() for r in drifted], "migration_id": migration_id},
            )
    return adopted
