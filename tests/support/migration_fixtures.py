"""Format-4 fixture graphs built only with the format-4 writer (``omnigraph-v4``'s library).

``build_fixture`` makes: main with several node and edge tables (the example graph) and an empty
table; ``feat``, a branch that owns its Person table; ``lazy``, a branch that inherits main's
images at a version older than main's HEAD; ``feat2``, a branch of ``feat``. ``build_compact``
makes the same branch shapes over four tables (for the crash matrix, which runs many
migrations). ``build_duplicate`` adds branch ``dup`` holding a duplicate Person id made by
two v4 appends interleaved as a race interleaves them.

Building a fixture takes seconds, so tests build one per backend and copy it per test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from omnigraph.engine.door.legacy import LEGACY_PROFILE
from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.graph import init_graph, open_graph
from omnigraph.engine.ops.branches import create_branch
from omnigraph.engine.ops.export import export_lines
from omnigraph.engine.ops.load import load
from omnigraph.engine.storage.store import copy_root, open_store
from tests.support.graph_helpers import OMNIGRAPH_V4
from tests.support.process_race import interleave_held

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = (ROOT / "examples" / "social.pg").read_text() + "\nnode Audit { note: String }\n"
COMPACT_SCHEMA = """
node Person { name: String @key  age: I32? }
node Company { name: String @key }
node Audit { note: String }
edge WorksAt: Person -> Company
"""
COMPACT_DATA = [
    {"type": "Person", "data": {"name": "Alice", "age": 34}},
    {"type": "Person", "data": {"name": "Bob"}},
    {"type": "Company", "data": {"name": "Acme"}},
    {"edge": "WorksAt", "from": "Alice", "to": "Acme", "data": {"id": "w-alice"}},
]
BRANCHES = ["feat", "feat2", "lazy", "main"]
BIN = Path(sys.executable).parent


def _records(*records: dict) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def build_fixture(uri: str, compact: bool = False) -> None:
    """The standard (or compact) format-4 fixture graph at ``uri`` (see the module docstring)."""
    graph = init_graph(open_store(uri), COMPACT_SCHEMA if compact else SCHEMA, LEGACY_PROFILE, actor="fixture")
    data = _records(*COMPACT_DATA) if compact else (ROOT / "examples" / "social.jsonl").read_bytes()
    load(graph, data, mode="append", branch="main", actor="fixture")
    create_branch(graph, "lazy")
    create_branch(graph, "feat")
    load(graph, _records({"type": "Person", "data": {"name": "Feat Only", "age": 7}}), mode="append", branch="feat", actor="fixture")
    create_branch(graph, "feat2", "feat")
    load(graph, _records({"type": "Person", "data": {"name": "Feat2 Only"}}), mode="merge", branch="feat2", actor="fixture")
    load(
        graph,
        _records(
            {"type": "Person", "data": {"name": "Main Later", "age": 50}},
            {"edge": "WorksAt", "from": "Main Later", "to": "Acme", "data": {"id": "w-later"}}
            if compact
            else {"edge": "Knows", "from": "Main Later", "to": "Alice", "data": {"id": "knows-later-alice"}},
        ),
        mode="append",
        branch="main",
        actor="fixture",
    )


def build_duplicate(uri: str, tmp_path: Path, compact: bool = True) -> str:
    """The fixture plus branch ``dup`` holding a duplicate Person id, landed the way format 4
    lets one in: two ``omnigraph-v4`` strict inserts of the same id pass the pin check together.
    Writer A is held right after arming its intent (``write.after_arm:stop``), writer B inserts
    and publishes, then A goes on and publishes too. Returns the duplicated id."""
    build_fixture(uri, compact=compact)
    return add_duplicate(uri, tmp_path)


def add_duplicate(uri: str, tmp_path: Path, name: str = "Twin") -> str:
    """Branch ``dup`` of ``uri``'s main with ``name`` on two Person rows, landed as in :func:`build_duplicate`."""
    create_branch(open_graph(open_store(uri), LEGACY_PROFILE, write=True), "dup")
    record = tmp_path / f"dup-{name}.jsonl"
    record.write_bytes(_records({"type": "Person", "data": {"name": name}}))
    argv = [str(OMNIGRAPH_V4), "load", "--mode", "append", "--branch", "dup", "--data", str(record), uri]
    held, other = interleave_held(argv, "write.after_arm")
    assert (held.returncode, other.returncode) == (0, 0), (held.stderr, other.stderr)
    assert count_ids(uri, "dup", "node:Person", name) == 2
    return name


def count_ids(uri: str, branch: str, table_key: str, entity_id: str) -> int:
    from omnigraph.engine.manifest.manifest import Manifest
    from omnigraph.engine.storage.lance_io import open_dataset

    store = open_store(uri)
    entry = Manifest(store).snapshot(branch).table(table_key)
    dataset = open_dataset(store, entry.table_path, entry.table_branch, entry.table_version)
    return dataset.count_rows(f"id = '{entity_id}'")


def exports(uri: str, stamp_profile=None) -> dict[str, list[str]]:
    """Every branch's export, read with the format-5 engine (it reads 4, migrating and 5)."""
    graph = open_graph(open_store(uri), stamp_profile or FENCED_PROFILE, write=False)
    return {branch: list(export_lines(graph, branch)) for branch in graph.manifest.branches()}


def clone(source_uri: str, destination_uri: str) -> None:
    copy_root(open_store(source_uri), open_store(destination_uri))


def compact_copy(backend: str, tmp_path: Path, sources: dict[str, str]) -> str:
    """A fresh copy of the compact fixture on ``backend``; ``sources`` keeps the one fixture
    built per backend (build it once per module, copy it per test)."""
    from tests.conftest import new_root

    if backend not in sources:
        sources[backend] = new_root(backend, tmp_path, "fixture-source")
        build_fixture(sources[backend], compact=True)
    uri = new_root(backend, tmp_path)
    clone(sources[backend], uri)
    return uri
