"""The graph commands both binaries share, built for a given program profile.

``omnigraph`` and ``omnigraph-v4`` expose the same flags for init, load, branch, snapshot and
export; only the profile (stamps and write routing) differs. Each ``*_for`` function here builds
one command (or the ``branch`` group) for a profile; :func:`shared_lazy_commands` is the table
entry of each (``serve`` included) that both console scripts' :class:`omnigraph.cli.lazy.LazyGroup` use,
so a command is built only when it is invoked.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

import omnigraph
from omnigraph.cli.lazy import LazyCommand
from omnigraph.cli.support import echo_result, emit_json, json_option, open_for_command, reports_errors, say, say_recovered
from omnigraph.errors import BadRequest

if TYPE_CHECKING:
    from omnigraph.graph import LoadMode

MAIN = "main"
STDIN = "-"
"""The file name that means standard input, wherever a command takes a data file (`load --data -`)."""


def shared_lazy_commands(program: str) -> dict[str, LazyCommand]:
    """The lazy table entries of init, load, branch, snapshot, export and serve for ``program``."""
    profile = (program,)
    return {
        "branch": LazyCommand("omnigraph.cli.shared_commands:branch_group_for", "Create, list and delete graph branches.", profile),
        "export": LazyCommand(
            "omnigraph.cli.shared_commands:export_command_for", "Write a branch as JSONL on stdout (loadable with `load`).", profile
        ),
        "init": LazyCommand(
            "omnigraph.cli.shared_commands:init_command_for", "Create a new graph at GRAPH (a directory or s3://bucket/prefix).", profile
        ),
        "load": LazyCommand(
            "omnigraph.cli.shared_commands:load_command_for",
            "Load a JSONL file into a branch as one atomic commit (or one per chunk).",
            profile,
        ),
        "serve": LazyCommand(
            "omnigraph.cli.serve_commands:serve_command_for", "Serve GRAPH over HTTP until interrupted (OpenAPI at /docs).", profile
        ),
        "snapshot": LazyCommand(
            "omnigraph.cli.shared_commands:snapshot_command_for",
            "Show what a branch pins: every table's image, rows and primary key.",
            profile,
        ),
    }


def _read_file(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise BadRequest(f"cannot read {what} {path!r}: {error.strerror}", {"path": path}) from error


def _decode_utf8(data: bytes, what: str, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadRequest(f"{what} {path!r} is not UTF-8: {error.reason} at byte {error.start}", {"path": path}) from None


def read_text_file(path: str, what: str) -> str:
    """The UTF-8 text of the file at ``path`` (``bad_request`` naming ``what`` when unreadable or not UTF-8)."""
    return _decode_utf8(_read_file(path, what), what, path)


def _chunked_load(graph: omnigraph.Graph, data: Any, mode: LoadMode, branch: str, chunk_rows: int) -> omnigraph.LoadResult:
    """``load`` with ``--chunk-rows``, with a progress bar of the commits on stderr."""
    bars: list[Any] = []

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(click.progressbar(length=total, label="committing chunks", file=sys.stderr))
            bars[0].__enter__()
        bars[0].update(done - bars[0].pos)

    try:
        return graph.load(data, mode=mode, branch=branch, chunk_rows=chunk_rows, progress=progress)
    finally:
        if bars:
            bars[0].__exit__(None, None, None)


def load_summary(result: omnigraph.LoadResult) -> str:
    """``load``'s text answer: the rows and commits, then one line per table of what it changed."""
    lines = [f"loaded {sum(result.rows.values())} rows into {result.branch} in {len(result.commits)} commit(s)"]
    for table_key, counts in result.changes.items():
        names = ("inserted", "updated", "unchanged") + (("deleted",) if result.mode == "overwrite" else ())
        words = [f"{counts[name]} {name}" for name in names]
        lines.append(f"  {table_key:<28} {', '.join(words)}")
    return "\n".join(lines)


def init_command_for(program: str) -> click.Command:
    """``init`` for ``program`` (an :mod:`omnigraph` program profile)."""

    @click.command("init")
    @click.option("--schema", "schema_path", required=True, help="The .pg schema file.")
    @click.option("--strict", is_flag=True, help="Refuse a schema with a warning (an unknown annotation), writing nothing.")
    @json_option
    @click.argument("uri", metavar="GRAPH")
    @reports_errors
    def init_command(schema_path: str, strict: bool, uri: str, as_json: bool) -> None:
        """Create a new graph at GRAPH (a directory or s3://bucket/prefix)."""
        source = _decode_utf8(_read_file(schema_path, "schema file"), "schema file", schema_path)
        with omnigraph.init(uri, source, program=program, strict=strict) as created:
            result = omnigraph.InitResult(graph=created.uri, format=created.format, tables=created.tables)
            warnings = created.schema_warnings
        for warning in warnings:
            say(f"warning: {warning}")
        if as_json:
            emit_json(result.to_dict())
            return
        echo_result(f"initialised {result.graph} at format {result.format} with {len(result.tables)} tables")

    return init_command


def load_command_for(program: str) -> click.Command:
    """``load`` for ``program``."""

    @click.command("load")
    @click.option(
        "--mode",
        type=click.Choice(["overwrite", "append", "merge"]),
        required=True,
        help="append = strict insert, merge = upsert, overwrite = replace the tables in the file.",
    )
    @click.option("--data", "data_path", required=True, help="The JSONL file to load; - reads standard input.")
    @click.option("--branch", default=MAIN, show_default=True)
    @click.option(
        "--chunk-rows",
        type=click.IntRange(min=1),
        default=None,
        help="Split the file into commits of at most N records (nodes first); the load registers in the fleet registry while it runs.",
    )
    @json_option
    @click.argument("uri", metavar="GRAPH")
    @reports_errors
    def load_command(mode: LoadMode, data_path: str, branch: str, chunk_rows: int | None, uri: str, as_json: bool) -> None:
        """Load a JSONL file into a branch as one atomic commit (or one per chunk)."""
        from omnigraph.inputs import open_data_file, open_data_stream

        source = open_data_stream(sys.stdin.buffer) if data_path == STDIN else open_data_file(data_path)
        with source as data, open_for_command(uri, program=program) as opened:
            say_recovered(opened)
            if chunk_rows is None:
                result = opened.load(data, mode=mode, branch=branch)
            else:
                result = _chunked_load(opened, data, mode, branch, chunk_rows)
        if as_json:
            emit_json(result.to_dict())
            return
        echo_result(load_summary(result))

    return load_command


def branch_group_for(program: str) -> click.Group:
    """``branch create|list|delete`` for ``program``."""

    @click.group("branch")
    def branch_group() -> None:
        """Create, list and delete graph branches."""

    @branch_group.command("create")
    @click.argument("name")
    @click.option("--from", "source", default=MAIN, show_default=True, help="Branch to fork from.")
    @json_option
    @click.argument("uri", metavar="GRAPH")
    @reports_errors
    def branch_create(name: str, source: str, uri: str, as_json: bool) -> None:
        """Create branch NAME from the current state of --from."""
        with open_for_command(uri, program=program) as opened:
            say_recovered(opened)
            created = opened.create_branch(name, from_branch=source)
        if as_json:
            emit_json(created.to_dict())
            return
        echo_result(f"created branch {name} from {source}")

    @branch_group.command("list")
    @json_option
    @click.argument("uri", metavar="GRAPH")
    @reports_errors
    def branch_list(uri: str, as_json: bool) -> None:
        """List graph branches."""
        with open_for_command(uri, read_only=True, program=program) as opened:
            branches = opened.branches()
        if as_json:
            emit_json({"branches": [b.to_dict() for b in branches]})
            return
        for branch in branches:
            parent = f" (from {branch.parent_branch})" if branch.parent_branch else ""
            echo_result(f"{branch.name}{parent}")

    @branch_group.command("delete")
    @click.argument("name")
    @json_option
    @click.argument("uri", metavar="GRAPH")
    @reports_errors
    def branch_delete(name: str, uri: str, as_json: bool) -> None:
        """Delete branch NAME (refused while other branches were forked from it)."""
        with open_for_command(uri, program=program) as opened:
            say_recovered(opened)
            deleted = opened.delete_branch(name)
        if as_json:
            emit_json(deleted.to_dict())
            return
        echo_result(f"deleted branch {name}")

    return branch_group


def snapshot_command_for(program: str) -> click.Command:
    """``snapshot`` for ``program``."""

    @click.command("snapshot")
    @click.option("--branch", default=MAIN, show_default=True)
    @json_option
    @click.argument("uri", metavar="GRAPH")
    @reports_errors
    def snapshot_command(branch: str, uri: str, as_json: bool) -> None:
        """Show what a branch pins: every table's image, rows and primary key."""
        with open_for_command(uri, read_only=True, program=program) as opened:
            document = opened.snapshot(branch).to_dict()
        if as_json:
            emit_json(document)
            return
        echo_result(f"branch {document['branch']}  manifest v{document['manifest_version']}  format {document['format']}")
        for table in document["tables"]:
            pinned = f"{table['table_branch'] or 'main'}@v{table['version']}"
            echo_result(f"  {table['table_key']:<28} {pinned:<24} rows={table['rows']:<8} pk={table['pk']}")

    return snapshot_command


def export_command_for(program: str) -> click.Command:
    """``export`` for ``program``."""

    @click.command("export")
    @click.option("--branch", default=MAIN, show_default=True)
    @click.option("--type", "types", multiple=True, help="Only these node/edge types (repeatable).")
    @click.option(
        "--at", "at_commit", default=None, help="Export the branch as of this commit (see `commit list`), with that commit's schema."
    )
    @click.argument("uri", metavar="GRAPH")
    @reports_errors
    def export_command(branch: str, types: tuple[str, ...], at_commit: str | None, uri: str) -> None:
        """Write a branch as JSONL on stdout (loadable with `load`)."""
        with open_for_command(uri, read_only=True, program=program) as opened:
            for line in opened.export_jsonl(branch, list(types), at=at_commit):
                sys.stdout.write(line + "\n")

    return export_command
