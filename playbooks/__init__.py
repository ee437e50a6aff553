"""YAML runbooks for the fencing upgrade, validated by pydantic and run step by step.

Bundled: ``upgrade.yaml`` (by hand), ``staging-rehearsal.yaml`` (CI), ``resume-crashed.yaml``
and ``duplicate-repair.yaml``. See :mod:`playbooks.model` for the format, :mod:`playbooks.actions`
for what steps can do and :mod:`playbooks.runner` for how they run.
"""
