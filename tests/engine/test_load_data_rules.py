"""What a load accepts and how it refuses: an empty ``@key`` value is refused, every bad line is
counted and the first 100 are reported, Arrow tables may carry whole-number floats for integer
properties, and ``export`` writes Date and DateTime as queries print them and loads back.

Local only, in process (the CLI through click's runner): nothing here depends on the storage
backend.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import omnigraph
from tests.support.graph_helpers import OMNIGRAPH, invoke

SCHEMA = """
node Person { name: String @key  age: I32?  scores: [I64]?  born: Date?  seen: DateTime? }
node Slot { tenant: String  slot: U32  @key(tenant, slot) }
edge Knows: Person -> Person { since: Date? }
"""


@pytest.fixture
def graph(tmp_path: Path) -> omnigraph.Graph:
    created = omnigraph.init(str(tmp_path / "rules"), SCHEMA)
    created.load([{"type": "Person", "data": {"name": "Ann"}}], mode="append")
    return created


def _lines(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("record", "prop"),
    [({"type": "Person", "data": {"name": ""}}, "name"), ({"type": "Slot", "data": {"tenant": "", "slot": 1}}, "tenant")],
)
def test_an_empty_key_value_is_refused_naming_line_and_property(graph: omnigraph.Graph, record: dict[str, object], prop: str) -> None:
    head = graph.commits()[0]
    for mode in ("append", "merge", "overwrite"):
        with pytest.raises(
            omnigraph.BadRequest, match=rf"line 2: \w+\.{prop} is empty: a @key value must be a non-empty string"
        ) as refused:
            graph.load([{"type": "Person", "data": {"name": "Bo"}}, record], mode=mode)  # type: ignore[arg-type]
        assert refused.value.details == {"line": 2, "type_name": record["type"], "property": prop}
    with pytest.raises(omnigraph.BadRequest, match=r"line 1: Person\.name is empty"):
        graph.mutate('query q() { insert Person { name: "" } }')
    assert graph.commits()[0] == head


def test_every_bad_line_is_counted_and_the_first_hundred_reported(graph: omnigraph.Graph, tmp_path: Path) -> None:
    records: list[dict[str, object]] = [{"type": "Person", "data": {"name": f"P{i}", "age": "old"}} for i in range(150)]
    records.insert(3, {"type": "Person", "data": {"name": "Fine", "age": 3}})
    records.append({"type": "Person", "data": {"name": ""}})
    data = _lines(tmp_path / "bad.jsonl", records)
    refused = invoke(OMNIGRAPH, "load", "--mode", "merge", "--data", data, "--json", graph.uri)
    error = refused.json()["error"]
    assert refused.returncode == 1 and error["code"] == "bad_request"
    assert error["details"]["line"] == 1 and error["details"]["error_count"] == 151
    listed = error["details"]["errors"]
    assert len(listed) == 100 and [e["line"] for e in listed[:4]] == [1, 2, 3, 5]
    assert listed[0] == {"line": 1, "message": "line 1: property 'age' of Person: expected I32, got 'old'"}
    assert error["message"].endswith("(and 150 more bad line(s), 151 in all; the first 100 listed in details.errors)")
    text = invoke(OMNIGRAPH, "load", "--mode", "merge", "--data", data, graph.uri).stderr.splitlines()
    assert text[0] == f"error [bad_request]: {error['message']}" and len(text) == 101
    assert text[1:3] == [
        "  line 1: property 'age' of Person: expected I32, got 'old'",
        "  line 2: property 'age' of Person: expected I32, got 'old'",
    ]
    two = _lines(tmp_path / "two.jsonl", records[:2])
    with pytest.raises(omnigraph.BadRequest, match=r"\(and 1 more bad line\(s\), 2 in all; each listed in details.errors\)") as few:
        graph.load(two, mode="append")
    assert few.value.details["errors"][1]["line"] == 2
    with pytest.raises(omnigraph.BadRequest) as one:  # one bad line: its own error, as before
        graph.load(records[:1], mode="append")
    assert "errors" not in one.value.details and "error_count" not in one.value.details
    assert [r["data"]["name"] for r in graph.export(types=["Person"])] == ["Ann"]


def test_arrow_loads_take_whole_number_floats_for_integers(graph: omnigraph.Graph) -> None:
    """A pandas round trip turns an integer column with a null into floats: ``31.0`` loads as 31."""
    people = pa.table({"name": ["Cy", "Di"], "age": [31.0, None], "scores": [[1.0, 2.0], None]})
    assert graph.load({"Person": people}, mode="merge").changes["node:Person"]["inserted"] == 2
    cy = next(r for r in graph.export(types=["Person"]) if r["data"]["name"] == "Cy")
    assert cy["data"] == {"id": "Cy", "name": "Cy", "age": 31, "scores": [1, 2]}
    for bad in (pa.table({"name": ["Ed"], "age": [31.5]}), pa.table({"name": ["Ed"], "scores": [[1.0, 2.5]]})):
        with pytest.raises(omnigraph.BadRequest, match=r"expected I(32|64), got (31\.5|2\.5)"):
            graph.load({"Person": bad}, mode="merge")


def test_export_writes_dates_as_queries_print_them_and_loads_back(graph: omnigraph.Graph, tmp_path: Path) -> None:
    graph.load(
        [
            {"type": "Person", "data": {"name": "Fay", "born": "1990-05-17", "seen": "2024-01-31T10:00:00.250Z"}},
            {"type": "Person", "data": {"name": "Gus", "born": 7000, "seen": 1}},
            {"edge": "Knows", "from": "Fay", "to": "Gus", "data": {"id": "fg", "since": "0099-12-31"}},
        ],
        mode="merge",
    )
    exported = list(graph.export_jsonl())
    people = {r["data"]["name"]: r["data"] for r in map(json.loads, exported) if r.get("type") == "Person"}
    fay, gus = people["Fay"], people["Gus"]
    assert fay["born"] == "1990-05-17" and fay["seen"] == "2024-01-31T10:00:00.250Z"
    assert json.loads(next(line for line in exported if '"fg"' in line))["data"]["since"] == "0099-12-31"
    printed = graph.query('query q() { match { $p: Person { name: "Gus" } } return { $p.born, $p.seen } }').to_pylist()
    assert printed == [{"p.born": gus["born"], "p.seen": gus["seen"]}] == [{"p.born": "1989-03-02", "p.seen": "1970-01-01T00:00:00.001Z"}]
    data = tmp_path / "export.jsonl"
    data.write_text("".join(line + "\n" for line in exported), encoding="utf-8")
    with omnigraph.init(str(tmp_path / "copy"), SCHEMA) as copy:
        copy.load(data, mode="append")
        assert list(copy.export_jsonl()) == exported


@pytest.mark.parametrize("mode", ["append", "merge", "overwrite"])
def test_a_file_repeating_an_id_is_bad_request_in_every_mode(graph: omnigraph.Graph, mode: str) -> None:
    """A deliberate difference from upstream (``docs/loading.md``): upstream answers ``key_conflict``,
    and a merge there keeps one of two rows with the same edge id."""
    edge = {"edge": "Knows", "from": "Ann", "to": "Ann", "data": {"id": "e1"}}
    for records, line in (([{"type": "Person", "data": {"name": "Bo"}}] * 2, 2), ([edge, {**edge, "data": {"id": "e1", "since": 3}}], 2)):
        with pytest.raises(
            omnigraph.BadRequest, match=rf"line {line}: duplicate (@key value|id) '(Bo|e1)' for (Person|Knows) \(first at line 1\)"
        ):
            graph.load(records, mode=mode)  # type: ignore[arg-type]
    assert [r["data"]["name"] for r in graph.export()] == ["Ann"]
