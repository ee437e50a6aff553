"""Every form ``Graph.load`` accepts loads the same rows (a path, bytes, a binary file, record dicts,
Arrow tables per type: the example exported as Arrow tables and loaded into a fresh graph exports
byte-identically), bad records are refused with their number before any write, and results are
frozen, round-trip their ``--json`` documents and convert to Arrow (pandas only when installed).
Local only: nothing here depends on the storage backend."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.util
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import omnigraph
from tests.support.graph_helpers import DATA_PATH, SCHEMA_PATH

FRIENDS = """
query friends($name: String) {
  match { $p: Person { name: $name }  $p knows $f }
  return { $f.name, $f.age }
  order { $f.name }
}
"""


def _export(graph: omnigraph.Graph) -> list[str]:
    return list(graph.export_jsonl())


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> omnigraph.Graph:
    graph = omnigraph.init(str(tmp_path_factory.mktemp("inputs") / "example"), SCHEMA_PATH)
    graph.load(DATA_PATH, mode="append")
    return graph


FORMS: dict[str, Callable[[omnigraph.Graph], Any]] = {
    "path": lambda example: DATA_PATH,
    "bytes": lambda example: DATA_PATH.read_bytes(),
    "binary file": lambda example: io.BytesIO(DATA_PATH.read_bytes()),
    "record dicts": lambda example: list(example.export()),
    "arrow tables": lambda example: {key.split(":", 1)[1]: table for key, table in example.export_tables().items()},
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_loads_the_same_rows(example: omnigraph.Graph, form: str, tmp_path: Path) -> None:
    with omnigraph.init(str(tmp_path / "copy"), SCHEMA_PATH) as copy:
        result = copy.load(FORMS[form](example), mode="append")
        assert sum(result.rows.values()) == 41 and len(result.commits) == 1
        assert _export(copy) == _export(example)


def test_bad_records_are_refused_with_their_number_and_nothing_is_written(example: omnigraph.Graph) -> None:
    head = example.commits()[0]
    with pytest.raises(omnigraph.BadRequest, match="record 2: expected a dict"):
        example.load([{"type": "Person", "data": {"name": "Zed"}}, ["not", "a", "record"]], mode="append")
    with pytest.raises(omnigraph.BadRequest, match=r"record 1: .*cannot be loaded"):
        example.load([{"type": "Person", "data": {"name": "Zed", "age": object()}}], mode="append")
    with pytest.raises(omnigraph.BadRequest, match=r"not a pyarrow.Table"):
        example.load({"Person": [{"name": "Zed"}]}, mode="append")
    with pytest.raises(omnigraph.BadRequest, match="cannot read data file"):
        example.load(Path("no-such-file.jsonl"), mode="append")
    assert example.commits()[0] == head


BAD_LOAD_ARGUMENTS: dict[str, dict[str, Any]] = {
    "mode upsert": {"mode": "upsert"},
    "mode None": {"mode": None},
    "chunk_rows 0": {"mode": "merge", "chunk_rows": 0},
    "chunk_rows text": {"mode": "merge", "chunk_rows": "3"},
    "chunk_rows bool": {"mode": "merge", "chunk_rows": True},
    "chunk_rows with overwrite": {"mode": "overwrite", "chunk_rows": 5},
    "branch not a string": {"mode": "merge", "branch": 3},
    "actor not a string": {"mode": "merge", "actor": 5},
    "progress not callable": {"mode": "merge", "progress": 3},
    "external_blobs not a bool": {"mode": "merge", "external_blobs": "no"},
}


@pytest.mark.parametrize("case", sorted(BAD_LOAD_ARGUMENTS))
def test_every_bad_load_argument_is_bad_request_before_anything_is_read(example: omnigraph.Graph, case: str) -> None:
    """Once ``mode="upsert"`` was a bare KeyError, and with no rows it "succeeded"."""

    def records() -> Iterator[dict[str, Any]]:
        raise AssertionError("the data was read")
        yield {}

    head = example.commits()[0]
    for data in (records(), b""):
        with pytest.raises(omnigraph.BadRequest) as refused:
            example.load(data, **BAD_LOAD_ARGUMENTS[case])
        assert refused.value.code == "bad_request"
    assert example.commits()[0] == head


def test_mode_like_arguments_of_open_and_fleet_membership_are_bad_request(example: omnigraph.Graph) -> None:
    with pytest.raises(omnigraph.BadRequest, match="stamp_checks must be one of every_call, at_open, got 'sometimes'"):
        omnigraph.open(example.uri, stamp_checks="sometimes")  # type: ignore[arg-type]
    with pytest.raises(omnigraph.BadRequest, match="role must be one of server, load, got 'writer'"):
        example.fleet_membership("writer")  # type: ignore[arg-type]


def test_dates_load_from_python_dates_and_export_as_iso(tmp_path: Path) -> None:
    with omnigraph.init(str(tmp_path / "dates"), SCHEMA_PATH) as graph:
        graph.load(
            [
                {"type": "Person", "data": {"name": "A"}},
                {"type": "Person", "data": {"name": "B"}},
                {"edge": "Knows", "from": "A", "to": "B", "data": {"id": "a-b", "since": dt.date(2024, 1, 1)}},
            ],
            mode="append",
        )
        assert [r["data"] for r in graph.export(types=["Knows"])] == [{"id": "a-b", "since": "2024-01-01"}]


def test_results_are_frozen_documents(example: omnigraph.Graph) -> None:
    snapshot = example.snapshot()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.branch = "other"  # type: ignore[misc]
    assert omnigraph.Snapshot.from_document(snapshot.to_dict()) == snapshot
    with pytest.raises(omnigraph.BadRequest, match="not a Snapshot document"):
        omnigraph.Snapshot.from_document({**snapshot.to_dict(), "extra": 1})


def test_query_results_convert(example: omnigraph.Graph) -> None:
    answer = example.query(FRIENDS, params={"name": "Alice"})
    assert answer.columns == ("f.name", "f.age")
    assert answer.to_pylist() == [{"f.name": "Bob", "f.age": 29}, {"f.name": "Carol", "f.age": 41}]
    table = answer.to_arrow()
    assert table.column_names == ["f.name", "f.age"] and table.column("f.age").to_pylist() == [29, 41]
    assert answer.to_dict()["rows"] == answer.to_pylist() and answer.commit == example.commits()[0].commit_id
    if importlib.util.find_spec("pandas") is None:
        with pytest.raises(omnigraph.BadRequest, match="needs pandas"):
            answer.to_pandas()
    else:
        assert list(answer.to_pandas().columns) == ["f.name", "f.age"]


TYPED_SCHEMA = """
node Reading {
  name: String @key
  day: Date?
  at: DateTime?
  level: F32?
  count: I32?
  tags: [String]?
  days: [Date]?
  shape: Vector(2)?
  kind: enum(low, high)?
}
"""

TYPED_QUERY = """
query readings() {
  match { $r: Reading }
  return { $r.name, $r.day, $r.at, $r.level, $r.count, $r.tags, $r.days, $r.shape, $r.kind }
  order { $r.name }
}
"""


def test_query_results_keep_the_stored_types(tmp_path: Path) -> None:
    """``to_arrow`` gives each column the Arrow type ``export_tables`` gives the property, and the same values."""
    with omnigraph.init(str(tmp_path / "typed"), TYPED_SCHEMA) as graph:
        graph.load(
            [
                {
                    "type": "Reading",
                    "data": {
                        "name": "a",
                        "day": "2024-02-29",
                        "at": "2024-01-31T09:30:00.250Z",
                        "level": 2.7,
                        "count": 7,
                        "tags": ["x", None],
                        "days": ["1999-12-31"],
                        "shape": [0.5, 1.5],
                        "kind": "high",
                    },
                },
                {"type": "Reading", "data": {"name": "b"}},
            ],
            mode="append",
        )
        answer = graph.query(TYPED_QUERY)
        assert answer.types == ("String", "Date", "DateTime", "F32", "I32", "[String]", "[Date]", "Vector(2)", "enum(low, high)")
        assert answer.to_pylist()[0]["r.day"] == "2024-02-29" and answer.to_pylist()[0]["r.at"] == "2024-01-31T09:30:00.250Z"
        typed = answer.to_arrow()
        stored = graph.export_tables(types=["Reading"])["node:Reading"]
        for column in typed.column_names:
            prop = column.removeprefix("r.")
            assert typed.schema.field(column).type == stored.schema.field(prop).type, column
            assert typed.column(column).to_pylist() == stored.column(prop).to_pylist(), column
        assert typed.column("r.at").to_pylist()[0] == dt.datetime(2024, 1, 31, 9, 30, 0, 250000)
        counted = graph.query("query n() { match { $r: Reading } return { count($r) as n, avg($r.level) as mean } }")
        assert counted.types == ("I64", "F64") and str(counted.to_arrow().schema.field("n").type) == "int64"
        if importlib.util.find_spec("pandas") is not None:
            assert answer.to_pandas()["r.day"].iloc[0] == dt.date(2024, 2, 29)
        assert omnigraph.QueryResult.from_document(answer.to_dict()) == answer
