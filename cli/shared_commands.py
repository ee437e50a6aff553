"""The graph commands both binaries share, built for a given :class:`EngineProfile`.

``omnigraph`` and ``omnigraph-v4`` expose the same flags for init, load, branch, snapshot and
export; only the profile (stamps and write routing) differs.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

import click

from cli.support import actor_name, echo_result, emit_json, json_option, reports_errors, say
from engine.access import fleet
from engine.door import EngineProfile
from engine.errors import BadRequest
from engine.graph import Graph, init_graph, open_graph
from engine.manifest import MAIN
from engine.ops import branch_documents, create_branch, delete_branch, export_lines, snapshot_document
from engine.ops.load import LoadResult, load

PIPE_COPY_BYTES = 1 << 20


def _read_file(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise BadRequest(f"cannot read {what} {path!r}: {error.strerror}", {"path": path}) from error


def _open_file(path: str, what: str) -> BinaryIO:
    """``path`` opened for binary reading (a load reads it in blocks, never whole); the caller
    closes it. A pipe (``/dev/stdin``, a process substitution) is first copied to an anonymous
    temporary file, because a refused record makes the load read its input again from the start
    to name the first refused line."""
    try:
        stream = open(path, "rb")  # noqa: SIM115 - the caller closes it
        if stream.seekable():
            return stream
        with stream:
            copy = tempfile.TemporaryFile(prefix="omnigraph-load-")  # noqa: SIM115 - the caller closes it
            shutil.copyfileobj(stream, copy, PIPE_COPY_BYTES)
        copy.seek(0)
        return copy
    except OSError as error:
        raise BadRequest(f"cannot read {what} {path!r}: {error.strerror}", {"path": path}) from error


def _decode_utf8(data: bytes, what: str, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadRequest(f"{what} {path!r} is not UTF-8: {error.reason} at byte {error.start}", {"path": path}) from None


def _report_recovery(graph: Graph) -> None:
    for record in graph.recovered:
        say(f"recovered interrupted commit {record.operation_id} on {record.graph_branch}: {record.outcome}")


def _chunked_load(graph: Graph, data: BinaryIO, mode: str, branch: str, chunk_rows: int) -> LoadResult:
    """``load`` with ``--chunk-rows``, with a progress bar of the commits on stderr."""
    bars: list[Any] = []

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(click.progressbar(length=total, label="committing chunks", file=sys.stderr))
            bars[0].__enter__()
        bars[0].update(done - bars[0].pos)

    try:
        return load(graph, data, mode=mode, branch=branch, actor=actor_name(),  # type: ignore[arg-type]
                    chunk_rows=chunk_rows, progress=progress)
    finally:
        if bars:
            bars[0].__exit__(None, None, None)


def add_shared_commands(group: click.Group, profile: EngineProfile) -> None:
    """Attach init, load, branch, snapshot and export for ``profile`` to ``group``."""
    @group.command("init")
    @click.option("--schema", "schema_path", required=True, help="The .pg schema file.")
    @json_option
    @click.argument("graph")
    @reports_errors
    def init_command(schema_path: str, graph: str, as_json: bool) -> None:
        """Create a new graph at GRAPH (a directory or s3://bucket/prefix)."""
        source = _decode_utf8(_read_file(schema_path, "schema file"), "schema file", schema_path)
        created = init_graph(graph, source, profile, actor_name())
        for warning in created.catalog.warnings:
            say(f"warning: {warning}")
        document = {"graph": created.store.uri, "format": created.stamp, "tables": created.catalog.table_keys()}
        if as_json:
            emit_json(document)
            return
        echo_result(f"initialised {created.store.uri} at format {created.stamp} with {len(document['tables'])} tables")

    @group.command("load")
    @click.option("--mode", type=click.Choice(["overwrite", "append", "merge"]), required=True,
                  help="append = strict insert, merge = upsert, overwrite = replace the tables in the file.")
    @click.option("--data", "data_path", required=True, help="The JSONL file to load.")
    @click.option("--branch", default=MAIN, show_default=True)
    @click.option("--chunk-rows", type=click.IntRange(min=1), default=None,
                  help="Split the file into commits of at most N records (nodes first); the load "
                       "registers in the fleet registry while it runs.")
    @json_option
    @click.argument("graph")
    @reports_errors
    def load_command(mode: str, data_path: str, branch: str, chunk_rows: int | None, graph: str, as_json: bool) -> None:
        """Load a JSONL file into a branch as one atomic commit (or one per chunk)."""
        with _open_file(data_path, "data file") as data:
            opened = open_graph(graph, profile, write=True)
            _report_recovery(opened)
            if chunk_rows is None:
                result = load(opened, data, mode=mode, branch=branch, actor=actor_name())  # type: ignore[arg-type]
            else:
                with fleet.registered(opened.store, profile.program, "load", profile.init_stamp):
                    result = _chunked_load(opened, data, mode, branch, chunk_rows)
        document = {
            "branch": result.branch,
            "mode": result.mode,
            "commits": [c.commit_id for c in result.commits],
            "manifest_version": result.commits[-1].manifest_version if result.commits else None,
            "rows": result.rows,
        }
        if as_json:
            emit_json(document)
            return
        echo_result(f"loaded {sum(result.rows.values())} rows into {branch} in {len(result.commits)} commit(s)")

    @group.group("branch")
    def branch_group() -> None:
        """Create, list and delete graph branches."""

    @branch_group.command("create")
    @click.argument("name")
    @click.option("--from", "source", default=MAIN, show_default=True, help="Branch to fork from.")
    @json_option
    @click.argument("graph")
    @reports_errors
    def branch_create(name: str, source: str, graph: str, as_json: bool) -> None:
        """Create branch NAME from the current state of --from."""
        opened = open_graph(graph, profile, write=True)
        _report_recovery(opened)
        branch = create_branch(opened, name, source)
        if as_json:
            emit_json({"name": branch.name, "parent_branch": branch.parent_branch, "incarnation": branch.incarnation})
            return
        echo_result(f"created branch {name} from {source}")

    @branch_group.command("list")
    @json_option
    @click.argument("graph")
    @reports_errors
    def branch_list(graph: str, as_json: bool) -> None:
        """List graph branches."""
        documents = branch_documents(open_graph(graph, profile, write=False))
        if as_json:
            emit_json({"branches": documents})
            return
        for doc in documents:
            parent = f" (from {doc['parent_branch']})" if doc["parent_branch"] else ""
            echo_result(f"{doc['name']}{parent}")

    @branch_group.command("delete")
    @click.argument("name")
    @json_option
    @click.argument("graph")
    @reports_errors
    def branch_delete(name: str, graph: str, as_json: bool) -> None:
        """Delete branch NAME (refused while other branches were forked from it)."""
        opened = open_graph(graph, profile, write=True)
        _report_recovery(opened)
        delete_branch(opened, name)
        if as_json:
            emit_json({"deleted": name})
            return
        echo_result(f"deleted branch {name}")

    @group.command("snapshot")
    @click.option("--branch", default=MAIN, show_default=True)
    @json_option
    @click.argument("graph")
    @reports_errors
    def snapshot_command(branch: str, graph: str, as_json: bool) -> None:
        """Show what a branch pins: every table's image, rows and primary key."""
        document = snapshot_document(open_graph(graph, profile, write=False), branch)
        if as_json:
            emit_json(document)
            return
        echo_result(f"branch {document['branch']}  manifest v{document['manifest_version']}  format {document['format']}")
        for table in document["tables"]:
            pinned = f"{table['table_branch'] or 'main'}@v{table['version']}"
            echo_result(f"  {table['table_key']:<28} {pinned:<24} rows={table['rows']:<8} pk={table['pk']}")

    @group.command("export")
    @click.option("--branch", default=MAIN, show_default=True)
    @click.option("--type", "types", multiple=True, help="Only these node/edge types (repeatable).")
    @click.argument("graph")
    @reports_errors
    def export_command(branch: str, types: tuple[str, ...], graph: str) -> None:
        """Write a branch as JSONL on stdout (loadable with `load`)."""
        opened = open_graph(graph, profile, write=False)
        for line in export_lines(opened, branch, list(types)):
            sys.stdout.write(line + "\n")
