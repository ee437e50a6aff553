"""Out-of-band table commits (made with Lance directly): find them, classify them, adopt or revert them.

:mod:`~omnigraph.engine.reconcile.drift.detect` finds the tables whose HEAD is past their pin with no
intent that explains it and classifies every commit in between from Lance's own records;
:mod:`~omnigraph.engine.reconcile.drift.report` is what it reports (verdict ``adoptable`` or ``drift``), the
``table_drift`` refusal and the commands that resolve it; :mod:`~omnigraph.engine.reconcile.drift.adoption`
adopts (re-pins HEAD after the fencing checks), reverts, and settles a branch (adopts everything
adoptable). Callers use this face: ``from omnigraph.engine.reconcile import drift``, then ``drift.<name>``.
"""

from omnigraph.engine.reconcile.drift.adoption import ADOPT_ATTEMPTS, adopt, fencing_problems, revert, settle, settle_all
from omnigraph.engine.reconcile.drift.detect import (
    HEAD_READERS,
    classify,
    classify_unpinned_fork,
    in_flight_tables,
    operation_name,
    out_of_band,
    same_rows,
)
from omnigraph.engine.reconcile.drift.report import (
    UNDECODED,
    OutOfBandCommit,
    StepKind,
    TableDriftReport,
    Verdict,
    commands_for,
    drift_error,
    recover_command,
)

__all__ = [
    "ADOPT_ATTEMPTS",
    "HEAD_READERS",
    "UNDECODED",
    "OutOfBandCommit",
    "StepKind",
    "TableDriftReport",
    "Verdict",
    "adopt",
    "classify",
    "classify_unpinned_fork",
    "commands_for",
    "drift_error",
    "fencing_problems",
    "in_flight_tables",
    "operation_name",
    "out_of_band",
    "recover_command",
    "revert",
    "same_rows",
    "settle",
    "settle_all",
]
