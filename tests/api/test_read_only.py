"""A ``Graph`` opened read-only refuses every write with ``omnigraph.ReadOnlyGraph`` before it reads
or writes anything (every object under the root is byte-identical afterwards), and reads at every
stamp the engine reads: a format-4 graph opens read-only, while a read-write open of it is
``format_refused`` (exit 6, the CLI's status) naming ``lazy=True``, with which an application
deployed ahead of the upgrade reads at once, is refused writes with ``format_barrier``, and
writes once the upgrade stamps ``5`` (``Graph.wait_writable`` returns then)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import omnigraph
from tests.support.check_helpers import tree_digest
from tests.support.graph_helpers import DATA_PATH, SCHEMA_PATH

PERSON = [{"type": "Person", "data": {"name": "Olga", "age": 50}}]
BIRTHDAY = "query b($name: String) { update Person set { age: 51 } where name = $name }"

WRITES: dict[str, Callable[[omnigraph.Graph], Any]] = {
    "load": lambda g: g.load(PERSON, mode="append"),
    "load_chunked": lambda g: g.load(PERSON, mode="merge", chunk_rows=1),
    "mutate": lambda g: g.mutate(BIRTHDAY, params={"name": "Alice"}),
    "mutate_chunked": lambda g: g.mutate_chunked(BIRTHDAY, params={"name": "Alice"}, chunk_rows=10),
    "resume_mutation": lambda g: g.resume_mutation("01M8PB4BEZR39QSCDQCQWSP5H5"),
    "create_branch": lambda g: g.create_branch("review"),
    "delete_branch": lambda g: g.delete_branch("feature"),
    "merge": lambda g: g.merge("feature"),
}


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = str(tmp_path_factory.mktemp("read-only") / "graph")
    with omnigraph.init(uri, SCHEMA_PATH) as graph:
        graph.load(DATA_PATH, mode="append")
        graph.create_branch("feature")
        graph.load(PERSON, mode="append", branch="feature")
    return uri


@pytest.mark.parametrize("write", sorted(WRITES))
def test_every_write_is_refused_and_nothing_is_written(example: str, write: str) -> None:
    before = tree_digest(example)
    with omnigraph.open(example, read_only=True) as graph:
        assert graph.read_only
        with pytest.raises(omnigraph.ReadOnlyGraph) as refused:
            WRITES[write](graph)
        assert refused.value.code == "read_only" and refused.value.exit_code == 1
        assert refused.value.details["operation"] == ("load" if write == "load_chunked" else write)
        assert graph.snapshot("feature").branch == "feature"  # reads still work
    assert tree_digest(example) == before


def test_a_format_4_graph_reads_but_does_not_open_for_writes(tmp_path: Path) -> None:
    uri = str(tmp_path / "legacy")
    with omnigraph.init(uri, SCHEMA_PATH, program=omnigraph.FORMAT_4_WRITER) as legacy:
        legacy.load(PERSON, mode="append")
    with omnigraph.open(uri, read_only=True) as graph:
        assert graph.format == "4" and [t.pk for t in graph.snapshot().tables] == [()] * 8
        assert [r["data"]["id"] for r in graph.export(types=["Person"])] == ["Olga"]
    with pytest.raises(omnigraph.FormatRefused) as refused:
        omnigraph.open(uri)
    assert refused.value.exit_code == 6 and "omnigraph-migrate" in refused.value.message

    assert "lazy=True" in refused.value.message and refused.value.details["stamp"] == "4"


def test_an_application_deployed_ahead_of_the_upgrade_writes_once_it_is_stamped(tmp_path: Path) -> None:
    uri = str(tmp_path / "ahead")
    with omnigraph.init(uri, SCHEMA_PATH, program=omnigraph.FORMAT_4_WRITER) as legacy:
        legacy.load(PERSON, mode="append")
    with omnigraph.open(uri, lazy=True) as graph:
        assert graph.query("query q() { match { $p: Person } return { $p.name } }").to_pylist() == [{"p.name": "Olga"}]
        with pytest.raises(omnigraph.FormatBarrier) as barred:
            graph.load([{"type": "Person", "data": {"name": "Pia"}}], mode="append")
        assert barred.value.exit_code == 3 and "omnigraph-migrate run" in barred.value.message
        with pytest.raises(omnigraph.FormatBarrier, match=r"still not writable after 0\.2 s"):
            graph.wait_writable(timeout=0.2, poll_interval=0.05)
        waited: list[omnigraph.Readiness] = []
        waiter = threading.Thread(target=lambda: waited.append(graph.wait_writable(timeout=120, poll_interval=0.05)))
        waiter.start()
        omnigraph.migrate.run(uri, owner="ci")
        waiter.join(timeout=130)
        assert [(ready.format, ready.writable) for ready in waited] == [("5", True)]
        graph.load([{"type": "Person", "data": {"name": "Pia"}}], mode="append")
        assert sorted(r["data"]["id"] for r in graph.export(types=["Person"])) == ["Olga", "Pia"]
    with omnigraph.open(uri, read_only=True) as reader, pytest.raises(omnigraph.ReadOnlyGraph):
        reader.wait_writable(timeout=0)
