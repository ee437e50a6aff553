"""``omnigraph-migrate``: preflight, plan, run, prepare, cutover, resume, status, verify, abort, duplicates.

Exit codes (DESIGN section 6): 0 ok, 1 error (including drift), 2 usage, 3 claim or barrier
held, 4 validation failed (duplicates/nulls), 5 recovery required, 6 format refused. The result
goes to stdout (a human rendering, or one JSON document with ``--json``); progress, advice and
error text go to stderr. A duplicate inventory is printed on stdout as tab-separated lines
without ``--json``.

Every subcommand is imported only when it is invoked (:class:`omnigraph.cli.lazy.LazyGroup`); the ones
this binary defines itself are in :mod:`omnigraph.cli.migrate_commands`.
"""

from __future__ import annotations

from typing import NoReturn

import click

from omnigraph.cli.console import run_script
from omnigraph.cli.lazy import LazyCommand, LazyGroup

COMMANDS = {
    "abort": LazyCommand("omnigraph.cli.migrate_commands:abort_command", "Put stamp 4 back and release the claim (before stamp 5 only)."),
    "claim": LazyCommand("omnigraph.cli.claim:claim_group", "Show the migration claim, or break the claim of a holder proven dead."),
    "cutover": LazyCommand(
        "omnigraph.cli.migrate_commands:cutover_command",
        "Raise the barrier, validate only what moved since prepare, install the primary keys, stamp 5, release.",
    ),
    "copy": LazyCommand(
        "omnigraph.cli.migrate_commands:copy_command",
        "Copy a graph root (all branches and versions) to an empty DESTINATION, for rehearsals.",
    ),
    "duplicates": LazyCommand(
        "omnigraph.cli.migrate_commands:duplicates_command",
        "Print every duplicate or null id of every pinned image (exit 4 if any); takes no claim.",
    ),
    "plan": LazyCommand(
        "omnigraph.cli.migrate_commands:plan_command",
        "List the units (branch, table, pinned image) a migration would process, and predict its cutover.",
    ),
    "playbook": LazyCommand(
        "omnigraph.cli.playbook:playbook_group",
        "Run a YAML runbook (upgrade, staging-rehearsal, resume-crashed, duplicate-repair), finish an interrupted run, list and show runs.",
    ),
    "preflight": LazyCommand(
        "omnigraph.cli.migrate_commands:preflight_command",
        "Read-only readiness check: stamp 4, no pending writes, no claim, no live registered writer, every unit listed.",
    ),
    "prepare": LazyCommand(
        "omnigraph.cli.migrate_commands:prepare_command",
        "Validate every pinned image of GRAPH online (writers go on) and record a receipt for each.",
    ),
    "rebuild": LazyCommand(
        "omnigraph.cli.rebuild:rebuild_command", "Copy GRAPH's current data into a NEW format-5 graph by export and load, every branch."
    ),
    "refence": LazyCommand(
        "omnigraph.cli.refence:refence_command", "Fence again a stamp-5 graph that a format-4 writer wrote to after the stamp."
    ),
    "repair": LazyCommand(
        "omnigraph.cli.migrate_commands:repair_command", "Repair duplicate/null ids behind the barrier, as decided in a decisions file."
    ),
    "resume": LazyCommand(
        "omnigraph.cli.migrate_commands:resume_command",
        "Continue a crashed migration from its ledger and sidecars (images not yet found clean are validated on --executor).",
    ),
    "run": LazyCommand(
        "omnigraph.cli.migrate_commands:run_command",
        "Migrate every branch of GRAPH to format 5: prepare online, then a cutover of at most --max-outage.",
    ),
    "status": LazyCommand(
        "omnigraph.cli.migrate_commands:status_command",
        "The stamp, the claim holder (and every process acting for it), the latest migration's ledger, and the command to run next.",
    ),
    "verify": LazyCommand(
        "omnigraph.cli.migrate_commands:verify_command",
        "Check every live table on every branch has the PK [id] and nothing is unpublished; with --queries, also that "
        "they answer as when the migration recorded them.",
    ),
}
"""The subcommands, each imported only when invoked: where each is built and the one-line help
``omnigraph-migrate --help`` lists."""


@click.group(cls=LazyGroup, lazy_commands=COMMANDS)
def cli() -> None:
    """omnigraph-migrate: upgrade a format-4 graph to key-conflict fencing (format 5) in place."""


def main() -> NoReturn:
    """The ``omnigraph-migrate`` console script: :func:`omnigraph.cli.console.run_script` of :data:`cli`."""
    run_script(cli)
