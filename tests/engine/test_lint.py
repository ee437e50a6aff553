"""``omnigraph lint --schema S.pg --query Q.gq [--json]``: every query of a file checked without a graph.

In-process (click's ``CliRunner``): no graph is involved, so no process or storage is needed.

* A clean file exits 0 with one ``ok`` line per query; its ``--json`` report is the document of
  ``docs/queries.md`` (the console example there is run as printed).
* A file with several refused queries, reads and mutations, reports every one of them with its
  ``gq error at LINE:COLUMN`` and exits 1 (``bad_request``), the report in the error's details.
* The ``operation`` descriptors: result kinds (list, vector, ``count``), reads of bindings,
  traversals and ``not { }``, mutation reads/writes (edge insert endpoints, node delete cascade).
* The Python call ``omnigraph.lint.lint`` returns the report the CLI prints.
* A parse error is one ``Q000`` finding; a missing or refused schema file is ``bad_request``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import omnigraph
from omnigraph.cli.omnigraph import cli

PROJECT = Path(__file__).resolve().parents[2]

SCHEMA = """\
node Person {
    name: String @key
    age: I32?
    tags: [String]?
    emb: Vector(3)?
    nick: String?
}
node Company {
    name: String @key
}
edge Knows: Person -> Person
edge WorksAt: Person -> Company {
    since: Date?
}
"""

QUERIES = """\
query lonely($name: String) {
    match {
        $p: Person { name: $name }
        not { $p knows $_ }
    }
    return { $p.name, $p.tags, $p.emb, count($p) as n }
}

query bad_prop() {
    match { $p: Person }
    return { $p.salary }
}

query bump($name: String, $age: I32) {
    update Person set { age: $age } where name = $name
}

query bad_value($name: String) {
    update Person set { age: "old" } where name = $name
}

query hire($p: String, $c: String) {
    insert WorksAt { from: $p, to: $c }
}

query mixed($name: String) {
    insert Company { name: $name }
    delete Person where name = $name
}

query fire($name: String) {
    delete Person where name = $name
}
"""


def _lint(tmp_path: Path, schema: str, queries: str, *extra: str) -> Result:
    (tmp_path / "s.pg").write_text(schema, encoding="utf-8")
    (tmp_path / "q.gq").write_text(queries, encoding="utf-8")
    return CliRunner().invoke(cli, ["lint", "--schema", str(tmp_path / "s.pg"), "--query", str(tmp_path / "q.gq"), *extra])


def _report(result: Result) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(result.stdout)
    return document["error"]["details"] if "error" in document else document


def test_the_console_example_of_the_docs_runs_as_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (PROJECT / "docs/queries.md").read_text(encoding="utf-8").split("## Linting: `omnigraph lint`", 1)[1]
    console = re.search(r"```console\n\$ omnigraph (.+?)\n(.*?)```", text, re.S)
    assert console is not None
    monkeypatch.chdir(PROJECT)
    result = CliRunner().invoke(cli, console[1].split())
    assert result.exit_code == 0, result.output
    assert result.stdout == console[2]
    documented = json.loads(re.search(r"```json\n(.*?)```", text, re.S)[1])  # type: ignore[index]
    report = _report(CliRunner().invoke(cli, [*console[1].split(), "--json"]))
    assert report["status"] == "ok" and report["errors"] == 0 and report["queries_processed"] == 5
    assert report["schema_source"] == {"kind": "file", "path": "examples/social.pg"}
    assert report["results"][0] == documented


def test_every_refused_query_is_reported_with_its_line_and_column(tmp_path: Path) -> None:
    result = _lint(tmp_path, SCHEMA, QUERIES)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert "error read     bad_prop: gq error at 11:17 near 'salary': node type Person has no property 'salary'" in lines
    assert any(line.startswith("error mutation bad_value: gq error at 19:30 near '\"old\"'") for line in lines)
    assert any(line.startswith("error mutation mixed: gq error at 28:5 near 'delete': mutation 'mixed'") for line in lines)
    assert [line.split()[0] for line in lines[:7]] == ["ok", "error", "ok", "error", "ok", "error", "ok"]
    assert "error [bad_request]:" in result.stderr and "7 query(ies), 3 error(s)" in result.stderr

    as_json = _lint(tmp_path, SCHEMA, QUERIES, "--json")
    assert as_json.exit_code == 1
    document = json.loads(as_json.stdout)
    assert document["error"]["code"] == "bad_request"
    report = document["error"]["details"]
    assert report["status"] == "error" and report["errors"] == 3
    refused = {r["name"]: (r["line"], r["column"]) for r in report["results"] if r["status"] == "error"}
    assert refused == {"bad_prop": (11, 17), "bad_value": (19, 30), "mixed": (28, 5)}
    assert all("operation" not in r for r in report["results"] if r["status"] == "error")
    assert [(f["code"], f["property"], f["query_names"]) for f in report["findings"]] == [
        ("L201", "emb", ["bump"]),
        ("L201", "nick", ["bump"]),
        ("L201", "tags", ["bump"]),
    ]


def test_the_operation_descriptors(tmp_path: Path) -> None:
    report = _report(_lint(tmp_path, SCHEMA, QUERIES, "--json"))
    operations = {r["name"]: r.get("operation") for r in report["results"]}
    assert operations["lonely"] == {
        "result": [
            {"name": "p.name", "kind": "string", "nullable": False},
            {"name": "p.tags", "kind": "list", "item_kind": "string", "nullable": True},
            {"name": "p.emb", "kind": "vector", "vector_dim": 3, "nullable": True},
            {"name": "n", "kind": "bigint", "nullable": False},
        ],
        "reads": [{"kind": "node", "type_name": "Person"}, {"kind": "edge", "type_name": "Knows"}],
        "writes": [],
    }
    person, company = {"kind": "node", "type_name": "Person"}, {"kind": "node", "type_name": "Company"}
    knows, works_at = {"kind": "edge", "type_name": "Knows"}, {"kind": "edge", "type_name": "WorksAt"}
    assert operations["bump"] == {"result": [], "reads": [person], "writes": [person]}
    assert operations["hire"] == {"result": [], "reads": [company, person, works_at], "writes": [works_at]}
    assert operations["fire"] == {"result": [], "reads": [person, knows, works_at], "writes": [person, knows, works_at]}
    from_python = omnigraph.lint.lint(SCHEMA, QUERIES, schema_path=str(tmp_path / "s.pg"), query_path=str(tmp_path / "q.gq"))
    assert from_python == report


def test_a_clean_file_exits_0_and_warns_of_a_hardcoded_mutation(tmp_path: Path) -> None:
    source = 'query seed() {\n    insert Company { name: "Acme" }\n}\n'
    result = _lint(tmp_path, SCHEMA, source)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:2] == [
        "ok    mutation seed",
        "warning seed: mutation declares no params; hardcoded mutations are easy to miss",
    ]
    report = _report(_lint(tmp_path, SCHEMA, source, "--json"))
    assert (report["status"], report["errors"], report["warnings"]) == ("ok", 0, 1)


def test_a_source_that_does_not_parse_is_one_q000_finding(tmp_path: Path) -> None:
    result = _lint(tmp_path, SCHEMA, "query broken( {\n}\n", "--json")
    assert result.exit_code == 1
    report = _report(result)
    assert report["queries_processed"] == 0 and report["results"] == []
    [finding] = report["findings"]
    assert finding["code"] == "Q000" and finding["severity"] == "error"
    assert finding["message"].startswith("gq error at 1:")


def test_a_missing_or_refused_schema_is_bad_request(tmp_path: Path) -> None:
    (tmp_path / "q.gq").write_text(QUERIES, encoding="utf-8")
    missing = CliRunner().invoke(cli, ["lint", "--schema", str(tmp_path / "nope.pg"), "--query", str(tmp_path / "q.gq"), "--json"])
    assert missing.exit_code == 1
    assert json.loads(missing.stdout)["error"]["code"] == "bad_request"
    assert "cannot read schema file" in missing.stderr

    refused = _lint(tmp_path, "node Person {\n    name: Strin\n}\n", QUERIES)
    assert refused.exit_code == 1
    assert "error [bad_request]: schema error at 2:" in refused.stderr
    assert refused.stdout == ""


def test_a_bound_edge_reads_its_edge_type_and_describes_its_property() -> None:
    """``$p $w:worksAt $c`` reads the edge type (not a node type of that name); ``$w.since`` is its nullable Date."""
    source = "query tenure() {\n match { $p $w:worksAt $c }\n return { $p.name, $w.since, count($w) as n }\n}\n"
    operation = omnigraph.lint.lint(SCHEMA, source)["results"][0]["operation"]
    assert operation["reads"] == [
        {"kind": "node", "type_name": "Company"},
        {"kind": "node", "type_name": "Person"},
        {"kind": "edge", "type_name": "WorksAt"},
    ]
    assert operation["result"] == [
        {"name": "p.name", "kind": "string", "nullable": False},
        {"name": "w.since", "kind": "date", "nullable": True},
        {"name": "n", "kind": "bigint", "nullable": False},
    ]
