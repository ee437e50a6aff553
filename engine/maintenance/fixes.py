"""What resolves each kind of ``omnigraph check`` finding (:data:`FIXES`).

A finding's message ends with the text of its kind's :class:`Fix`, and a finding that one command
resolves carries the command in ``details["next"]`` as well, with the graph's root filled in, to be
run as printed. States no command repairs (a damaged manifest, a table changed behind the
engine's back) say what restores them instead. ``tests/migrator/test_check_fixes.py`` checks every
kind the check reports has an entry here.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from omnigraph.engine.access.writer_audit import refence_command
from omnigraph.engine.reconcile.drift import recover_command


class Fix(msgspec.Struct, frozen=True):
    """What resolves one kind of finding.

    ``text`` may name ``{command}`` and ``{uri}``; ``command`` gives the one command that resolves
    the state for a graph root, if one does.
    """

    text: str
    command: Callable[[str], str] | None = None

    def next_command(self, uri: str) -> str | None:
        """The command, for the graph at ``uri``; None when no single command resolves the state."""
        return self.command(uri) if self.command is not None else None

    def words(self, uri: str) -> str:
        """The text, for the graph at ``uri``."""
        return self.text.format(command=self.next_command(uri), uri=uri)


def status_command(uri: str) -> str:
    """The command that says what a migration claim or barrier waits for, and names the next step."""
    return f"omnigraph-migrate status {uri}"


_RESTORE = "restore {what} from a backup of the graph root (no command rebuilds it)"
_ID_REPAIR = Fix(
    "`omnigraph-migrate duplicates {uri}` lists them all; at stamp 4 the migration stops at them behind the barrier "
    "and `omnigraph-migrate playbook run duplicate-repair {uri}` repairs them"
)

FIXES: dict[str, Fix] = {
    "stamp_invalid": Fix(_RESTORE.format(what="the stamp (`omnigraph:format` on `__manifest` main)")),
    "migration_in_progress": Fix("`{command}` says how to resume or abort it", status_command),
    "claim_held": Fix("`{command}` names the command that releases it", status_command),
    "unfenced_commit": Fix("every format-5 write is refused until `{command}` fences the graph again", refence_command),
    "intent_unreadable": Fix(
        "recovery cannot read it: once no write is running, move it out of `__recovery/` (keep it for a report), then "
        "`omnigraph recover {uri}` adopts or reports what its write left"
    ),
    "pending_intent": Fix("`{command}` resolves it once its writer is gone", recover_command),
    "interrupted_branch_operation": Fix("`{command}` completes it", recover_command),
    "schema_change_pending": Fix("if no `schema apply` is running, `{command}` completes it", recover_command),
    "schema_behind": Fix("`{command}` brings it to the accepted schema", recover_command),
    "table_head_ahead": Fix(
        "`{command}` pins it if its commits change no row (an index, the primary key an aborted migration installed), "
        "and otherwise reports the drift with the exact command that adopts or reverts it",
        recover_command,
    ),
    "unpinned_table_branch": Fix(
        "a fork an aborted migration left is adopted by the next `omnigraph-migrate run {uri}`; any other is an "
        "unpublished fork, which the drift commands show and delete (docs/operations.md section 10)"
    ),
    "manifest_unreadable": Fix(_RESTORE.format(what="the branch's manifest")),
    "table_missing": Fix(_RESTORE.format(what="the manifest and the table")),
    "table_unexpected": Fix(_RESTORE.format(what="the manifest and `_schema.pg`")),
    "table_version_missing": Fix(_RESTORE.format(what="the table")),
    "row_count_mismatch": Fix(_RESTORE.format(what="the table")),
    "table_schema_mismatch": Fix(_RESTORE.format(what="the table (its columns were changed with Lance directly)")),
    "pk_wrong": Fix(_RESTORE.format(what="the table (its primary key was set with Lance directly)")),
    "pk_missing": Fix(_RESTORE.format(what="the table (a writer outside the engine replaced a fenced image)")),
    "schema_unreadable": Fix(_RESTORE.format(what="`_schema.pg` and `_schemas/`")),
    "source_missing": Fix(
        "the copy reads the data files that predate its forks from there: put the source back (or give the settings "
        "of its store), or copy again from a source that stays: a copy is not self-contained"
    ),
    "duplicate_ids": _ID_REPAIR,
    "null_ids": _ID_REPAIR,
    "dangling_edge": Fix("load the missing nodes (a merge load) or delete those edges (a delete mutation)"),
}
"""What resolves each kind of finding (a guard test checks every kind the check reports is here)."""
