"""``omnigraph-migrate refence GRAPH [--owner NAME] [--json]``: fence a stamp-5 graph again.

For a graph a format-4 writer published to after stamp 5 (every format-5 write is then refused
with exit 6, naming the commit), or one with a pinned table image without PK ``[id]``. Stop every
format-4 process first. Exit codes as for ``run``: 0 fenced again, 4 duplicates the old writer
let in (repair them under the claim, then ``resume --token``), 3 a claim exists, 5 a commit is in
flight by a live process on this host, 6 the graph is not at stamp 5. ``--executor ray`` validates
the images on a Ray cluster, as for ``run``.
"""

from __future__ import annotations

import click

from omnigraph import migrate
from omnigraph.cli.executor_options import chosen_executor, executor_options
from omnigraph.cli.parallel_option import parallel_option
from omnigraph.cli.progress import StderrProgress
from omnigraph.cli.support import actor_name, echo_result, emit_json, json_option, reports_errors, say
from omnigraph.migrate import SilentProgress


@click.command("refence")
@click.argument("uri", metavar="GRAPH")
@click.option(
    "--owner", default=None, help="Who runs it (recorded in the claim and ledger) [default: OMNIGRAPH_ACTOR, else the login name]."
)
@executor_options
@parallel_option
@json_option
@reports_errors
def refence_command(uri: str, owner: str | None, executor: str, ray_address: str | None, parallel: int | None, as_json: bool) -> None:
    """Fence again a stamp-5 graph that a format-4 writer wrote to after the stamp."""
    with chosen_executor(executor, ray_address) as validator:
        progress = SilentProgress() if as_json else StderrProgress()
        outcome = migrate.refence(uri, owner=owner or actor_name(), progress=progress, executor=validator, parallel=parallel)
    if as_json:
        emit_json(outcome.to_dict())
        return
    echo_result(f"fenced again: {outcome.units} unit(s) over {outcome.images} image(s) validated and verified; stamp is {outcome.stamp}")
    say(f"next: `omnigraph-migrate verify {uri}`; keep every format-4 binary stopped")
