"""The errors specific to the migrator, each with its code, HTTP status and exit code.

:class:`DriftDetected` (something moved, or the graph is not fenced) and :class:`AnswersChanged`
(an answer of the answer check differs) keep a migration from writing stamp 5, and are what
``verify`` reports about a graph; :class:`MigrationRefused` refuses a state the migration cannot
proceed from, and its :class:`SchemaChanged` a graph whose schema changed under the migration's
receipts; :class:`CutoverDeferred` is a cutover that did not keep (or did not raise) the
barrier, leaving the graph writable at stamp 4; :class:`ExecutorFailed` reports an executor that could not validate images (nothing
is recorded for those images). Every class is an :class:`~omnigraph.engine.errors.OmnigraphError`,
reported by the CLIs and the server like any other. ``fleet_active`` is
:class:`omnigraph.migrator.inspection.FleetActive`.
"""

from __future__ import annotations

from omnigraph.engine.errors import EXIT_ERROR, EXIT_VALIDATION_FAILED, OmnigraphError


class DriftDetected(OmnigraphError):
    """Something moved under the barrier (a writer was not stopped); the stamp is not written."""

    code = "drift_detected"
    http_status = 409
    exit_code = EXIT_ERROR


class MigrationRefused(OmnigraphError):
    """The migration cannot proceed from the state it found (for example, a foreign fork)."""

    code = "migration_refused"
    http_status = 409
    exit_code = EXIT_ERROR


class SchemaChanged(MigrationRefused):
    """The graph's ``_schema.pg`` is not the schema the migration's receipts were taken with.

    A ``migration_refused`` (its code, HTTP status and exit code): nothing was written. The
    message names the command that takes the receipts again (``prepare --token`` at stamp 4, else
    ``abort --token`` then ``run``), also in ``details["next"]``; putting the schema back clears it
    too (:mod:`omnigraph.migrator.schema_receipt`).
    """


class ExecutorFailed(OmnigraphError):
    """The executor validating images could not do its work.

    For example a Ray cluster that cannot be reached, a task whose worker was lost, a worker
    running another release. Nothing was recorded for the images it did not validate;
    ``resume --token`` validates them.
    """

    code = "executor_failed"
    http_status = 503
    exit_code = EXIT_ERROR


class AnswersChanged(OmnigraphError):
    """A read query of the answer check answers differently than when its answer was recorded under the barrier.

    During a migration the stamp is not written; for ``verify --queries`` the graph is reported.
    """

    code = "answers_changed"
    http_status = 409
    exit_code = EXIT_VALIDATION_FAILED


class CutoverDeferred(OmnigraphError):
    """A cutover did not raise the barrier, or lowered it again before any primary key was installed.

    The estimate exceeded the outage bound, or writers kept committing under the barrier. The
    graph is at stamp ``4`` and writable, the online claim and the receipts are kept: catch up
    with ``prepare --token`` and run ``cutover --token`` again (or raise ``--max-outage``).
    """

    code = "cutover_deferred"
    http_status = 409
    exit_code = EXIT_ERROR
