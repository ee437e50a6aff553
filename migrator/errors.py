"""[omnigraph.migrator.errors]
[omnigraph.migrator.errors]
Errors specific to the migrator.

[omnigraph.migrator.errors]
The executors' names and the checks of their options that need no executor: light enough for
a command's ``--help`` to import (:mod:`omnigraph.migrator.executors` imports Lance, pyarrow and the
validator).

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


class ExecutorFailed(OmnigraphError):
    """The executor validating images could not do its work: a Ray cluster that cannot be
    reached, a task whose worker was lost, a worker running another release. Nothing was
    recorded for the images it did not validate; ``resume --token`` validates them.
    """

    code = "executor_failed"
    http_status = 503
    exit_code = EXIT_ERROR


class AnswersChanged(OmnigraphError):
    """A read query of the answer check answers differently than when its answer was recorded
    under the barrier: the stamp is not written (``verify --queries``: the graph is reported).
    """

    code = "answers_changed"
    http_status = 409
    exit_code = EXIT_VALIDATION_FAILED
