"""YAML runbooks for the fencing upgrade, validated by pydantic and run step by step.

Bundled: ``upgrade.yaml`` (by hand), ``staging-rehearsal.yaml`` (CI), ``resume-crashed.yaml``
and ``duplicate-repair.yaml``. See :mod:`omnigraph.playbooks.model` for the format, :mod:`omnigraph.playbooks.actions`
for what steps can do and :mod:`omnigraph.playbooks.runner` for how they run.
"""
