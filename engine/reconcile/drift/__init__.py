"""Out-of-band table commits (made with Lance directly): find them, classify them, adopt or revert them.

:mod:`~omnigraph.engine.reconcile.drift.detect` finds the tables whose HEAD is past their pin with no
intent that explains it and classifies every commit in between from Lance's own records;
:mod:`~omnigraph.engine.reconcile.drift.report` is what it reports (verdict ``adoptable`` or ``drift``), the
``table_drift`` refusal and the commands that resolve it; :mod:`~omnigraph.engine.reconcile.drift.adoption`
adopts (re-pins HEAD after the fencing checks), reverts, and settles a branch (adopts everything
adoptable). Callers use this face: ``from omnigraph.engine.reconcile import drift``, then ``drift.<name>``.
"""
