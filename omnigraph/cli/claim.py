"""``omnigraph-migrate claim show|break``: inspect the migration claim, or break a dead holder's.

``claim show GRAPH [--json]`` prints the claim (owner, host, pid, token, migration, since), every
process recorded as acting for it (its creator, then each resume, abort, repair or break, with
its liveness), and one word for them: ``alive`` if any runs on this host; read-only, exit 0 with or
without a claim. ``claim break GRAPH --token T --reason R [--json]`` removes the claim whose
holder the operator has proven dead; it is refused with exit 3 while the holder is a live
process on this host (or one that took it over is), and exit 1 for a wrong token or an absent claim. The break is recorded in
the migration's ledger (``claim_broken``) and next to the claim; the command then names what to
run next (``abort --token T`` while the barrier is up).
"""

from __future__ import annotations

import click

from omnigraph import migrate
from omnigraph.cli.support import actor_name, echo_result, emit_json, json_option, reports_errors, say


@click.group("claim")
def claim_group() -> None:
    """Show the migration claim, or break the claim of a holder proven dead."""


@claim_group.command("show")
@click.argument("uri", metavar="GRAPH")
@json_option
@reports_errors
def show_command(uri: str, as_json: bool) -> None:
    """Print the claim holder of GRAPH and whether it is alive (as far as this host can tell)."""
    document = migrate.claim(uri).to_dict()
    if as_json:
        emit_json(document)
        return
    claim = document["claim"]
    echo_result(f"graph {document['graph']}: stamp {document['stamp']}")
    if claim is None:
        echo_result("no claim")
        return
    echo_result(
        f"claim held by {claim['owner']} on {claim['host']} (pid {claim['pid']}) since {claim['created_at']}; "
        f"migration {claim['migration_id']}, token {claim['token']}; acting for it: {document['holder_process']}"
    )
    for process in document["acting"]:
        echo_result(
            f"  {process['action']}: {process['owner']} on {process['host']} (pid {process['pid']}) "
            f"since {process['since']}: {process['liveness']}"
        )


@claim_group.command("break")
@click.argument("uri", metavar="GRAPH")
@click.option("--token", required=True, help="The holder's exact token (see `claim show`).")
@click.option("--reason", required=True, help="Why the holder is known to be dead (recorded).")
@json_option
@reports_errors
def break_command(uri: str, token: str, reason: str, as_json: bool) -> None:
    """Remove the claim of a holder proven dead (refused while it is alive on this host)."""
    document = migrate.break_claim(uri, token=token, reason=reason, actor=actor_name()).to_dict()
    if as_json:
        emit_json(document)
        return
    broken = document["broken"]["claim"]
    echo_result(f"broke the claim of {broken['owner']} (migration {broken['migration_id']}); recorded in its ledger")
    say(f"next: {document['next']}")
