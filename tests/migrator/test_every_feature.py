"""``examples/features.pg`` (every feature of the schema language) through both binaries and the
upgrade: both initialise and load it, read the same catalog (``schema show``), refuse the same
constraint breaks, and after ``omnigraph-migrate run`` the format-5 engine still enforces every
constraint on load and mutate; ``check`` is clean throughout.

The CLI runs in-process (:func:`invoke`) except the migration, a real ``omnigraph-migrate``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.check_helpers import assert_check_clean
from tests.support.graph_helpers import OMNIGRAPH, OMNIGRAPH_V4, invoke
from tests.support.migration_cli import migrate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCHEMA, DATA = EXAMPLES / "features.pg", EXAMPLES / "features.jsonl"
BREAKS = {
    # a load that breaks one constraint -> what its refusal names
    "range": ({"type": "Person", "data": {"name": "Dee", "age": 151}}, "Person.age value 151 is outside @range(age, 0..150)"),
    "float-range": (
        {"type": "Company", "data": {"name": "Gamma", "tenant": "t2", "slot": 1, "rating": -1.6}},
        "Company.rating value -1.6 is outside @range(rating, -1.5..5)",
    ),
    "check": ({"type": "Person", "data": {"name": "Dee", "code": "abc"}}, "Person.code value 'abc' does not match"),
    "unique": ({"type": "Company", "data": {"name": "Gamma", "tenant": "t1", "slot": 1}}, "(tenant, slot) value ['t1', 1]"),
    "single-unique": ({"type": "Person", "data": {"name": "Dee", "email": "alice@example.com"}}, "already used by id 'Alice'"),
    "card-max": ({"edge": "WorksAt", "from": "Alice", "to": "Beta"}, "Person 'Alice': would be the source of 2 WorksAt"),
    "card-min": ({"type": "Team", "data": {"name": "Ops"}}, "Team 'Ops': would be the source of 0 Lead edge(s), outside @card(1..2)"),
    "edge-unique": ({"edge": "Lead", "from": "Core", "to": "Alice"}, "(src, dst) value ['Core', 'Alice']"),
}
DELETE_LEAD = 'query d() { delete Lead where id = "lead-alice" }'


def _refuses_every_break(program: Path, root: Path, tmp_path: Path) -> None:
    for name, (record, fragment) in sorted(BREAKS.items()):
        data = tmp_path / f"{name}.jsonl"
        data.write_text(json.dumps(record) + "\n")
        for mode in ("append", "merge"):
            refused = invoke(program, "load", "--mode", mode, "--data", data, root)
            if name == "edge-unique" and mode == "merge":  # an id-less edge upserts on its @unique(src, dst) pair
                assert refused.returncode == 0 and "edge:Lead                    0 inserted, 0 updated, 1 unchanged" in refused.stdout
                continue
            assert refused.returncode == 1 and fragment in refused.stderr, (name, mode, refused.describe())


def test_every_feature_on_both_binaries_and_after_the_upgrade(tmp_path: Path) -> None:
    roots = {OMNIGRAPH: tmp_path / "five", OMNIGRAPH_V4: tmp_path / "four"}
    for program, root in roots.items():
        created = invoke(program, "init", "--schema", SCHEMA, root)
        assert created.returncode == 0, created.describe()
        assert "unknown annotation '@x_owner' is kept as metadata" in created.stderr
        assert invoke(program, "load", "--mode", "append", "--data", DATA, root).returncode == 0
        _refuses_every_break(program, root, tmp_path)
    shown = {program.name: invoke(OMNIGRAPH, "schema", "show", "--json", root).json() for program, root in roots.items()}
    five, four = shown[OMNIGRAPH.name], shown[OMNIGRAPH_V4.name]
    assert (five["format"], four["format"]) == ("5", "4")
    assert five["catalog"] == four["catalog"] and five["source"] == four["source"] == SCHEMA.read_text()
    assert five["fingerprint"] == four["fingerprint"]

    four_root = roots[OMNIGRAPH_V4]
    upgraded = migrate("run", str(four_root), "--owner", "ci", "--json")
    assert upgraded.returncode == 0, upgraded.stderr
    assert invoke(OMNIGRAPH, "schema", "show", "--json", four_root).json()["catalog"] == five["catalog"]
    for root in roots.values():
        _refuses_every_break(OMNIGRAPH, root, tmp_path)
        query = tmp_path / "delete.gq"
        query.write_text(DELETE_LEAD)
        refused = invoke(OMNIGRAPH, "mutate", "--query", query, root)
        assert refused.returncode == 1 and "Team 'Core': would be the source of 0 Lead edge(s)" in refused.stderr
        logo = invoke(OMNIGRAPH, "blob", "get", "--type", "Team", "--id", "Core", "--property", "logo", root)
        assert logo.returncode == 0 and logo.stdout_bytes == b"\x89PNG\r\n\x1a\n", logo.describe()
        assert_check_clean(str(root))


def test_schema_show_prints_the_catalog_with_its_metadata(tmp_path: Path) -> None:
    root = tmp_path / "g"
    assert invoke(OMNIGRAPH, "init", "--schema", SCHEMA, root).returncode == 0
    document = invoke(OMNIGRAPH, "schema", "show", "--json", root).json()
    assert document["warnings"] == [
        {"message": "unknown annotation '@x_owner' is kept as metadata and not enforced", "line": 29, "column": 23}
    ]
    tables = {table["table_key"]: table for table in document["catalog"]["tables"]}
    assert list(tables) == ["edge:Knows", "edge:Lead", "edge:WorksAt", "node:Company", "node:Person", "node:Team"]
    person = tables["node:Person"]
    assert person["implements"] == ["Named", "Aged"] and person["key"] == ["name"]
    assert [p["name"] for p in person["properties"]] == ["name", "age", "email", "code", "bio"]
    assert person["checks"] == [{"property": "code", "pattern": "[A-Z]{3}"}]
    assert person["metadata"] == [{"name": "instruction", "args": ["Look people up by name"], "known": True}]
    assert tables["edge:Lead"]["cardinality"] == {"min": 1, "max": 2} and tables["edge:Lead"]["unique"] == [["src", "dst"]]
    assert tables["node:Company"]["ranges"] == [{"property": "rating", "low": -1.5, "high": 5}]
    assert [(i["name"], i["key"]) for i in document["catalog"]["interfaces"]] == [("Aged", []), ("Named", ["name"])]
    team = tables["node:Team"]["properties"][0]
    assert team["metadata"] == [{"name": "x_owner", "args": ["platform"], "known": False}]
    human = invoke(OMNIGRAPH, "schema", "show", root)
    assert human.returncode == 0 and human.stdout == invoke(OMNIGRAPH, "schema", "show", root).stdout
    lines = human.stdout.splitlines()
    assert "edge:Lead  Team -> Person  @card(1..2)" in lines
    assert 'interface Named  key (name)  @description("Something with a name")' in lines
    assert '    bio: String?  @embed("name")' in lines
    assert '    @check(code, "[A-Z]{3}")' in lines
    assert lines[lines.index("--- accepted source ---") + 1 :] == SCHEMA.read_text().rstrip("\n").split("\n")
