"""Shared helpers for the engine tests: running the CLIs, example graphs, storage state.

The console scripts live next to ``sys.executable`` (the package has no ``__main__``); they run
as real subprocesses (:func:`run_cli`, :func:`run_parallel`), which inherit ``os.environ``, so
the AWS settings the ``s3_server`` fixture exports reach them. Where a test needs many CLI
invocations, :func:`invoke` runs the same click command in-process to keep the suite fast.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.door.routing import EngineProfile
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.graph import Graph, init_graph, open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.ops.load import LoadResult, load
from omnigraph.engine.ops.snapshot import snapshot_document
from omnigraph.engine.storage.lance_io import latest_version, list_branches, open_dataset, primary_key
from omnigraph.engine.storage.names import MANIFEST_DIR
from omnigraph.engine.storage.store import open_store

__all__ = [
    "ACTOR",
    "BIN",
    "DATA_PATH",
    "FENCED_PROFILE",
    "LEGACY_PROFILE",
    "OMNIGRAPH",
    "OMNIGRAPH_V4",
    "PROJECT",
    "SCHEMA_PATH",
    "Cli",
    "all_objects",
    "commit_ids",
    "example_data",
    "export_text",
    "graph_for",
    "init",
    "invoke",
    "invoke_all",
    "jsonl",
    "knows",
    "lance_branch_names",
    "load_lines",
    "make_example_graph",
    "omnigraph",
    "omnigraph_v4",
    "person",
    "record_key",
    "run_cli",
    "run_parallel",
    "schema_source",
    "snapshot",
    "storage_state",
    "write_jsonl",
]

PROJECT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = PROJECT / "examples" / "social.pg"
DATA_PATH = PROJECT / "examples" / "social.jsonl"
BIN = Path(sys.executable).parent
OMNIGRAPH = BIN / "omnigraph"
OMNIGRAPH_V4 = BIN / "omnigraph-v4"
ACTOR = "engine-tests"


# -- the CLIs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cli:
    """One finished CLI run."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    stdout_bytes: bytes = b""

    def json(self) -> Any:
        """stdout parsed as exactly one JSON document."""
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError as error:
            raise AssertionError(f"stdout of {self.describe()} is not one JSON document: {error}") from None

    def describe(self) -> str:
        return f"{' '.join(self.args)} -> exit {self.returncode}\n--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"

    def ok(self) -> Cli:
        assert self.returncode == 0, self.describe()
        return self


def _environment(env: dict[str, str] | None) -> dict[str, str]:
    full_env = dict(os.environ)
    full_env.pop("OMNIGRAPH_FAILPOINTS", None)
    full_env["OMNIGRAPH_ACTOR"] = ACTOR
    full_env.update(env or {})
    return full_env


def run_cli(program: Path, *args: str | os.PathLike[str], env: dict[str, str] | None = None, timeout: float = 180) -> Cli:
    """Run a console script; ``env`` entries are added to the inherited environment."""
    argv = [str(program), *(str(a) for a in args)]
    completed = subprocess.run(argv, capture_output=True, env=_environment(env), timeout=timeout, check=False)
    return Cli(
        tuple([program.name, *argv[1:]]),
        completed.returncode,
        completed.stdout.decode("utf-8", "replace"),
        completed.stderr.decode("utf-8", "replace"),
        completed.stdout,
    )


def run_parallel(*calls: list[Any], timeout: float = 180) -> list[Cli]:
    """Run several CLI invocations concurrently (``[program, arg, ...]`` each); results in order.

    Only for commands that are independent of each other (reads, or commands expected to be
    refused before any effect): a test that runs refused commands in parallel still compares the
    storage state before and after all of them.
    """
    running = []
    for call in calls:
        program, args = Path(call[0]), [str(a) for a in call[1:]]
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115 - the children write to them; read and closed after the waits
        process = subprocess.Popen([str(program), *args], stdout=out, stderr=err, env=_environment(None))
        running.append((program, args, process, out, err))
    results = []
    for program, args, process, out, err in running:
        process.wait(timeout=timeout)
        out.seek(0)
        err.seek(0)
        raw = out.read()
        results.append(
            Cli(
                tuple([program.name, *args]), process.returncode, raw.decode("utf-8", "replace"), err.read().decode("utf-8", "replace"), raw
            )
        )
        out.close()
        err.close()
    return results


def omnigraph(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> Cli:
    return run_cli(OMNIGRAPH, *args, env=env)


def omnigraph_v4(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> Cli:
    return run_cli(OMNIGRAPH_V4, *args, env=env)


def invoke(program: Path, *args: str | os.PathLike[str]) -> Cli:
    """Run a CLI command in this process (click's test runner): same command code, exit status,
    stdout and stderr as the console script, without a new interpreter per call.

    Used where a test needs many invocations; the console scripts themselves are exercised as
    real subprocesses (:func:`run_cli`, :func:`run_parallel`) elsewhere. Never use it with a
    failpoint armed (a failpoint ends the process).
    """
    from click.testing import CliRunner

    from omnigraph.cli.omnigraph import cli as omnigraph_cli
    from omnigraph.cli.omnigraph_v4 import cli as legacy_cli

    command = {OMNIGRAPH.name: omnigraph_cli, OMNIGRAPH_V4.name: legacy_cli}[program.name]
    argv = [str(a) for a in args]
    result = CliRunner().invoke(
        command,
        argv,
        env={"OMNIGRAPH_ACTOR": ACTOR, "OMNIGRAPH_FAILPOINTS": None},
        catch_exceptions=False,
        prog_name=program.name,
    )
    return Cli(tuple([program.name, *argv]), result.exit_code, result.stdout, result.stderr, result.stdout_bytes)


def invoke_all(*calls: list[Any]) -> list[Cli]:
    """:func:`invoke` for each ``[program, arg, ...]``, in order."""
    return [invoke(Path(call[0]), *call[1:]) for call in calls]


# -- graphs through the library ------------------------------------------------------------------


def schema_source() -> str:
    return SCHEMA_PATH.read_text(encoding="utf-8")


def example_data() -> bytes:
    return DATA_PATH.read_bytes()


_OPEN: dict[tuple[str, str, bool], Graph] = {}


def graph_for(uri: str, profile: EngineProfile = FENCED_PROFILE, *, write: bool) -> Graph:
    """``open_graph``, reused across helper calls for the same root, profile and mode.

    Opening a graph creates a new object-store client (about 0.2 s against the S3 server), and the
    helpers below are called many times per test. A cached graph is reopened when the stamp on
    ``__manifest`` changed since it was opened, so stamp rules always apply as on a fresh open.
    Tests that check the opening rules themselves call ``open_graph`` or the CLI directly.
    """
    key = (uri, profile.program, write)
    graph = _OPEN.get(key)
    if graph is None or graph.manifest.read_stamp()[0] != graph.stamp:
        graph = _OPEN[key] = open_graph(open_store(uri), profile, write=write)
    return graph


def init(uri: str, profile: EngineProfile = FENCED_PROFILE) -> Graph:
    graph = init_graph(open_store(uri), schema_source(), profile, ACTOR)
    _OPEN[(uri, profile.program, True)] = graph
    return graph


def make_example_graph(uri: str, profile: EngineProfile = FENCED_PROFILE) -> Graph:
    """init + ``load --mode append`` of the example data; returns the read-write graph."""
    graph = init(uri, profile)
    load(graph, example_data(), mode="append", branch="main", actor=ACTOR)
    return graph


def load_lines(
    uri: str,
    lines: list[str] | bytes,
    mode: str = "append",
    *,
    branch: str = "main",
    profile: EngineProfile = FENCED_PROFILE,
    chunk_rows: int | None = None,
) -> LoadResult:
    data = lines if isinstance(lines, bytes) else jsonl(lines)
    graph = graph_for(uri, profile, write=True)
    return load(graph, data, mode=mode, branch=branch, actor=ACTOR, chunk_rows=chunk_rows)  # type: ignore[arg-type]


def export_text(uri: str, branch: str = "main", types: list[str] | None = None, profile: EngineProfile = FENCED_PROFILE) -> str:
    """What ``export`` prints (one line per row, newline-terminated)."""
    from omnigraph.engine.ops.export import export_lines

    graph = graph_for(uri, profile, write=False)
    return "".join(line + "\n" for line in export_lines(graph, branch, types))


def snapshot(uri: str, branch: str = "main", profile: EngineProfile = FENCED_PROFILE) -> dict[str, Any]:
    return snapshot_document(graph_for(uri, profile, write=False), branch)


# -- records -------------------------------------------------------------------------------------


def person(name: str, age: int | None = None, email: str | None = None, **extra: Any) -> str:
    data: dict[str, Any] = {"name": name}
    if age is not None:
        data["age"] = age
    if email is not None:
        data["email"] = email
    data.update(extra)
    return json.dumps({"type": "Person", "data": data}, ensure_ascii=False)


def knows(src: str, dst: str, edge_id: str, since: int | None = None) -> str:
    data: dict[str, Any] = {"id": edge_id}
    if since is not None:
        data["since"] = since
    return json.dumps({"edge": "Knows", "from": src, "to": dst, "data": data})


def make_chain_graph(uri: str, people: int) -> None:
    """A graph of ``people`` Person nodes ``p0000``, ``p0001``, ... aged 0, 1, ..., each knowing the next."""
    init(uri)
    names = [f"p{i:04d}" for i in range(people)]
    lines = [person(name, i) for i, name in enumerate(names)]
    lines += [knows(a, b, f"k{i}") for i, (a, b) in enumerate(itertools.pairwise(names))]
    load_lines(uri, lines)


def jsonl(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8")


def write_jsonl(directory: Path, name: str, lines: list[str] | bytes | str) -> Path:
    path = directory / name
    if isinstance(lines, bytes):
        path.write_bytes(lines)
    elif isinstance(lines, str):
        path.write_text(lines, encoding="utf-8")
    else:
        path.write_bytes(jsonl(lines))
    return path


# -- storage state -------------------------------------------------------------------------------


def _dataset_versions(store: Any, rel: str) -> dict[str, int]:
    """Latest version of every Lance branch (``main`` included) of the dataset at ``rel``."""
    dataset = open_dataset(store, rel)
    versions = {"main": int(dataset.version)}
    for name in sorted(dataset.branches.list()):
        versions[name] = latest_version(store, rel, name)
    return versions


def storage_state(uri: str) -> dict[str, Any]:
    """Everything a refused command must leave untouched, independent of the stamp value.

    * the stamp (and migration id) on ``__manifest`` main;
    * per graph branch: its ``__manifest`` version, head row and every pinned table row, plus the
      PK of each pinned image - everything ``snapshot --json`` prints is derived from these;
    * the latest version of every Lance branch of ``__manifest`` and of every dataset under
      ``nodes/`` and ``edges/`` (a new table version or fork anywhere shows here);
    * the listing of the root, ``nodes/``, ``edges/`` and ``__recovery/``.
    """
    store = open_store(uri)
    manifest = Manifest(store)
    state: dict[str, Any] = {"stamp": manifest.read_stamp()}
    pk_of: dict[tuple[str, str | None, int], list[str]] = {}
    branches: dict[str, Any] = {}
    for name in manifest.branches():
        folded = manifest.snapshot(name)
        tables = []
        for entry in folded.tables.values():
            image = (entry.table_path, entry.table_branch, entry.table_version)
            if image not in pk_of:
                pk_of[image] = primary_key(open_dataset(store, *image).schema)
            tables.append({**msgspec.structs.asdict(entry), "pk": pk_of[image]})
        branches[name] = {"manifest_version": folded.manifest_version, "head": msgspec.structs.asdict(folded.head), "tables": tables}
    state["branches"] = branches
    datasets = {MANIFEST_DIR: _dataset_versions(store, MANIFEST_DIR)}
    for kind in ("nodes", "edges"):
        for name in store.list(kind):
            datasets[f"{kind}/{name}"] = _dataset_versions(store, f"{kind}/{name}")
    state["datasets"] = datasets
    state["listing"] = {rel or "/": store.list(rel) for rel in ("", "nodes", "edges", "__recovery")}
    return state


def all_objects(uri: str) -> list[str]:
    """Every object under the root, relative to it (a recursive listing)."""
    store = open_store(uri)
    if store.is_empty_root():
        return []
    prefix = store.root.rstrip("/") + "/"
    return sorted(path[len(prefix) :] if path.startswith(prefix) else path for path in store.fs.find(store.root))


def commit_ids(uri: str, branch: str = "main") -> list[str]:
    """``commit list`` of ``branch`` (newest first), as commit ids."""
    from omnigraph.engine.manifest.commit_graph import commit_history

    return [head.commit_id for head in commit_history(Manifest(open_store(uri)), branch)]


def lance_branch_names(uri: str) -> dict[str, list[str]]:
    """Lance branch names (main excluded) of ``__manifest`` and every table dataset."""
    store = open_store(uri)
    result = {MANIFEST_DIR: sorted(list_branches(open_dataset(store, MANIFEST_DIR)))}
    for kind in ("nodes", "edges"):
        for name in store.list(kind):
            result[f"{kind}/{name}"] = sorted(list_branches(open_dataset(store, f"{kind}/{name}")))
    return result


def record_key(line: str) -> tuple[str, str]:
    """(table key, id) of one exported JSONL line."""
    record = json.loads(line)
    table_key = f"edge:{record['edge']}" if "edge" in record else f"node:{record['type']}"
    return table_key, record["data"]["id"]
