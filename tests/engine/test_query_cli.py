"""``omnigraph query`` as a real process: every output format, ``--at``, and the refusals with their
exit codes (a syntax error is refused before the graph is even opened; each of ``mutate`` and
``query`` refuses the other kind naming the command to use)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import omnigraph
from tests.conftest import new_root
from tests.support.graph_helpers import DATA_PATH, OMNIGRAPH, OMNIGRAPH_V4, SCHEMA_PATH, Cli, invoke, make_example_graph, run_cli

QUERIES = """
query writers($min: I32?) {
  match {
    $p: Person
    $p wrote $d
    $p.age >= $min
  }
  return {
    $p.name
    $p.age
    $d.tags
  }
  order { $p.age desc }
}
query onboard($name: String) { insert Person { name: $name } }
"""


def _query(root: str, tmp_path: Path, *args: str, program: Path = OMNIGRAPH, source: str = QUERIES) -> Cli:
    path = tmp_path / "q.gq"
    path.write_text(source, encoding="utf-8")
    return run_cli(program, "query", "--query", path, *args, root)


@pytest.fixture
def social(backend: str, tmp_path: Path) -> str:
    root = new_root(backend, tmp_path)
    make_example_graph(root)
    return root


def test_every_output_format(social: str, tmp_path: Path) -> None:
    args = ("--name", "writers", "--params", '{"min": 30}')
    printed = _query(social, tmp_path, *args, "--json").ok()
    document = printed.json()
    assert document["columns"] == ["p.name", "p.age", "d.tags"] and document["types"] == ["String", "I32", "[String]"]
    assert list(document) == sorted(document)  # the document's keys sorted, as every --json prints them
    assert [list(row) for row in document["rows"]] == [document["columns"]] * 3  # a row's keys in column order
    assert document["rows"] == [
        {"p.name": "Grace", "p.age": 52, "d.tags": ["finance"]},
        {"p.name": "Carol", "p.age": 41, "d.tags": []},
        {"p.name": "Alice", "p.age": 34, "d.tags": ["graphs", "tutorial"]},
    ]
    assert (document["query"], document["branch"]) == ("writers", "main")
    assert _query(social, tmp_path, *args, "--format", "json").ok().json() == document
    table = _query(social, tmp_path, *args).ok()
    assert table.stdout.splitlines() == [
        "p.name  p.age  d.tags",
        "------  -----  ----------------------",
        'Grace   52     ["finance"]',
        "Carol   41     []",
        'Alice   34     ["graphs", "tutorial"]',
        "(3 rows)",
    ]
    assert table.stderr == ""
    lines = _query(social, tmp_path, *args, "--format", "jsonl").ok().stdout.splitlines()
    assert [json.loads(line) for line in lines] == document["rows"]
    assert lines[0] == '{"p.name": "Grace", "p.age": 52, "d.tags": ["finance"]}'  # column order
    csv_lines = _query(social, tmp_path, "--name", "writers", "--params", '{"min": 0}', "--format", "csv").ok().stdout.splitlines()
    assert csv_lines[0] == "p.name,p.age,d.tags"
    assert csv_lines[-1] == "Eve,25,"  # Eve's Doc has no tags: NULL is an empty field
    assert 'Alice,34,"[""graphs"", ""tutorial""]"' in csv_lines


def test_at_reads_an_older_commit(social: str, tmp_path: Path) -> None:
    args = ("--name", "writers", "--params", '{"min": 0}', "--json")
    before = _query(social, tmp_path, *args).ok().json()
    mutation = tmp_path / "m.gq"
    mutation.write_text('query m() { update Person set { age: 99 } where name = "Eve" }', encoding="utf-8")
    run_cli(OMNIGRAPH, "mutate", "--query", mutation, social).ok()
    after = _query(social, tmp_path, *args).ok().json()
    assert after["rows"] != before["rows"] and after["commit"] != before["commit"]
    assert _query(social, tmp_path, *args, "--at", before["commit"]).ok().json() == before
    missing = _query(social, tmp_path, *args, "--at", "01UNKNOWN")
    assert missing.returncode == 1 and missing.json()["error"]["code"] == "not_found"


def test_refusals_and_exit_codes(tmp_path: Path) -> None:
    absent = str(tmp_path / "no-graph")
    syntax = _query(absent, tmp_path, "--json", source="query q() {\n  match { $p: Person }\n  return { $p. }\n}")
    assert syntax.returncode == 1
    error = syntax.json()["error"]
    assert error["code"] == "bad_request" and error["details"] == {"line": 3, "column": 16, "token": "}"}
    wrong_kind = _query(absent, tmp_path, "--name", "onboard")
    assert wrong_kind.returncode == 1 and "omnigraph mutate" in wrong_kind.stderr
    both = _query(absent, tmp_path, "--name", "writers", "--json", "--format", "csv")
    assert both.returncode == 2
    root = str(tmp_path / "graph")
    make_example_graph(root)
    path = tmp_path / "q.gq"
    mutate = run_cli(OMNIGRAPH, "mutate", "--query", path, "--name", "writers", root)
    assert mutate.returncode == 1 and "omnigraph query" in mutate.stderr
    bad_param = _query(root, tmp_path, "--name", "writers", "--params", '{"min": "old"}', "--json")
    assert bad_param.returncode == 1 and bad_param.json()["error"]["details"]["line"] == 2


def test_a_format_4_graph_answers(tmp_path: Path) -> None:
    root = str(tmp_path / "v4")
    run_cli(OMNIGRAPH_V4, "init", "--schema", SCHEMA_PATH, root).ok()
    run_cli(OMNIGRAPH_V4, "load", "--mode", "append", "--data", DATA_PATH, root).ok()
    document = _query(root, tmp_path, "--name", "writers", "--params", '{"min": 50}', "--json").ok().json()
    assert document["rows"] == [{"p.name": "Grace", "p.age": 52, "d.tags": ["finance"]}]


CIRCLE = """
query circle($name: String) {
  match { $p: Person { name: $name }  $p knows{1,3} $f  $f worksAt $c  $f.age > 30  not { $f <knows> $_ } }
  return { $f.name }
}
"""


FRIENDS = """
query friends($name: String) {
  match { $p: Person { name: $name }  $p knows $f  $f.age > 30 }
  return { $f.name }
  order { $f.name desc }
}
"""
"""A direct query (:mod:`omnigraph.engine.query.direct`): a key, one hop, a comparison with a constant."""


def test_explain_prints_the_plan_without_running_it(tmp_path: Path) -> None:
    """``--explain`` names each table's version and indexes, each scan, hop mode and filter.

    ``--json`` prints ``Graph.explain_query``'s document.
    """
    root = str(tmp_path / "graph")
    make_example_graph(root)
    run_cli(OMNIGRAPH, "optimize", "--index", "age", root).ok()
    args = ("--params", '{"name": "Alice"}', "--explain")
    text = _query(root, tmp_path, *args, source=CIRCLE).ok().stdout.splitlines()
    assert '  $p: node:Person, id lookup "Alice" served by id_idx, at most 1 rows' in text
    assert "  $p Knows{1,3} $f: breadth_first, from sources, frontier served by src_idx, direction out, at most 6 edges per hop" in text
    assert "  $f Knows{1,1} $_1: join, direction both, at most 6 edges per hop" in text
    assert "  filter $f.age > 30: pushed into the scan, served by age_idx" in text
    plan = _query(root, tmp_path, *args, "--json", source=CIRCLE).ok().json()
    with omnigraph.open(root, read_only=True) as graph:
        assert graph.explain_query(CIRCLE, params={"name": "Alice"}).to_dict() == plan
        assert plan["commit"] == graph.commits()[0].commit_id
    person = next(table for table in plan["tables"] if table["table"] == "node:Person")
    assert person["rows"] == 8 and [index["columns"] for index in person["indexes"]] == [["age"], ["id"]]  # id: the key index
    refused = _query(root, tmp_path, *args, "--format", "csv", source=CIRCLE)
    assert refused.returncode == 2 and "--explain" in refused.stderr
    assert "  answered by one DuckDB statement" in text and plan["executor"] == "statement"
    direct = _query(root, tmp_path, *args, source=FRIENDS).ok().stdout.splitlines()
    assert direct[1] == (
        "  answered directly from the rows its keys reach, without a DuckDB statement (unless a probe passes its bound,"
        " or a variable-length traversal's adjacency does not fit the bound on adjacencies)"
    )
    assert _query(root, tmp_path, *args, "--json", source=FRIENDS).ok().json()["executor"] == "direct"
    degrees = "query degrees() { match { $p: Person  $p knows $f } return { $p.name, count($f) as n } }"
    assert _query(root, tmp_path, "--explain", source=degrees).ok().stdout.splitlines()[1] == (
        "  counted without DuckDB, from the edge table's adjacency if this process holds it, else from its columns"
        " when they fit the bound on adjacencies (else by one DuckDB statement)"
    )


EDGES = """
query since($after: Date) {
  match { $a $k:knows $b  $k.since > $after }
  return { $a.name, $b.name, $k.since }
  order { $k.since desc }
}
query some() {
  match { $a: Person { name: "Alice" }  $a knows{1,3} $b }
  return { $b.name }
  limit 2
}
"""


def test_an_edge_binding_answers_explains_and_refuses_bounds(tmp_path: Path) -> None:
    """``$a $k:knows $b`` through the command (in-process): the edge's property filtered, printed and ordered, the
    binding in the plan, and a multi-hop binding refused with its place; an unordered ``limit`` answers any N rows."""
    root = str(tmp_path / "graph")
    make_example_graph(root)
    path = tmp_path / "e.gq"
    path.write_text(EDGES, encoding="utf-8")
    args = ("query", "--query", path, "--name", "since", "--params", '{"after": "2020-01-01"}')
    assert invoke(OMNIGRAPH, *args, root).ok().stdout.splitlines() == [
        "a.name  b.name  k.since",
        "------  ------  ----------",
        "Eve     Frank   2024-01-01",
        "Carol   Dave    2021-11-15",
        "(2 rows)",
    ]
    with omnigraph.open(root, read_only=True) as graph:  # the Python API answers the same rows
        answer = graph.query(EDGES, name="since", params={"after": "2020-01-01"}).to_pylist()
        assert [row["k.since"] for row in answer] == ["2024-01-01", "2021-11-15"]
        assert len(graph.query(EDGES, name="some").to_pylist()) == 2
    some = invoke(OMNIGRAPH, "query", "--query", path, "--name", "some", "--format", "jsonl", root).ok().stdout.splitlines()
    assert sorted(some) == ['{"b.name": "Bob"}', '{"b.name": "Carol"}']  # any 2 rows: hop 1 reports both
    stops = invoke(OMNIGRAPH, "query", "--query", path, "--name", "some", "--explain", root).ok().stdout.splitlines()
    assert (
        "  $a Knows{1,3} $b: breadth_first, from sources, stops after 2 pairs, frontier served by src_idx, direction out, "
        "at most 6 edges per hop"
    ) in stops
    plan = invoke(OMNIGRAPH, *args, "--explain", root).ok().stdout.splitlines()
    assert "  $k: edge:Knows, scan, at most 6 rows" in plan
    assert "  $a $k:Knows{1,1} $b: join, direction out, at most 6 edges per hop" in plan
    assert '  filter $k.since > "2020-01-01": pushed into the scan' in plan
    path.write_text("query path() {\n  match { $a $k:knows{1,3} $b }\n  return { $b.name }\n}\n", encoding="utf-8")
    refused = invoke(OMNIGRAPH, "query", "--query", path, "--json", root)
    assert refused.returncode == 1 and refused.json()["error"]["details"] == {"line": 2, "column": 22, "token": "{"}
    assert "takes a single hop" in refused.json()["error"]["message"]
