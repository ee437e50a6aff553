"""Schema changes over HTTP: ``POST /schema/plan`` and ``POST /schema/apply`` of a real ``omnigraph serve`` process."""

from __future__ import annotations

from pathlib import Path

from omnigraph.engine.door.legacy import LEGACY_PROFILE
from tests.support.graph_helpers import SCHEMA_PATH, make_example_graph, person
from tests.support.serve_helpers import error_of, start_fenced, stored_state

BASE = SCHEMA_PATH.read_text(encoding="utf-8")
WITH_NICK = BASE.replace("    age: I32?\n", "    age: I32?\n    nick: String?\n")


def test_plan_writes_nothing_and_apply_changes_every_branch(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    server = start_fenced(uri)
    try:
        assert server.client.post("/branches", json={"name": "dev"}).status_code == 201
        before = stored_state(uri)
        plan = server.client.post("/schema/plan", json={"schema": WITH_NICK})
        assert plan.status_code == 200, plan.text
        document = plan.json()
        assert set(document) == {"from_schema_id", "to_schema_id", "steps", "data_loss"}
        assert [(s["kind"], s["table_key"], s["property"]) for s in document["steps"]] == [("add_property", "node:Person", "nick")]
        assert stored_state(uri) == before, "a plan wrote"

        refused = error_of(
            server.client.post("/schema/apply", json={"schema": BASE.replace("age: I32?", "age: String?")}), 400, "bad_request"
        )
        assert [item["code"] for item in refused["details"]["refused"]] == ["type_change"]
        lossy = error_of(server.client.post("/schema/apply", json={"schema": BASE.replace("    age: I32?\n", "")}), 400, "bad_request")
        assert lossy["details"]["data_loss"] == ["drop node:Person.age and its values"]
        assert stored_state(uri) == before, "a refused apply wrote"

        applied = server.client.post("/schema/apply", json={"schema": WITH_NICK})
        assert applied.status_code == 200, applied.text
        result = applied.json()
        assert (result["outcome"], sorted(result["commits"])) == ("applied", ["dev", "main"])
        assert result["to_schema_id"] == document["to_schema_id"]
        for branch in ("main", "dev"):
            loaded = server.load([person(f"Nick-{branch}", 3, nick="n")], branch=branch)
            assert loaded.status_code == 200, loaded.text
            query = {"query": "query n() { match { $p: Person } return { $p.name, $p.nick } order { $p.name } }"}
            rows = server.client.post(f"/branches/{branch}/query", json=query).json()["rows"]
            assert {"p.name": f"Nick-{branch}", "p.nick": "n"} in rows
        again = server.client.post("/schema/apply", json={"schema": WITH_NICK}).json()
        assert (again["outcome"], again["commits"]) == ("unchanged", {})
    finally:
        server.stop()


def test_a_format_4_graph_answers_the_barrier(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    make_example_graph(uri, LEGACY_PROFILE)
    server = start_fenced(uri)
    try:
        before = stored_state(uri)
        error = error_of(server.client.post("/schema/apply", json={"schema": WITH_NICK}), 503, "format_barrier")
        assert "omnigraph-migrate" in error["message"]
        assert stored_state(uri) == before
    finally:
        server.stop()
