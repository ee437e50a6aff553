"""``omnigraph mutate --chunk-rows N`` for an update or delete that matches more rows than one commit
may carry, with real processes: the refusal names the exact chunked command, which is run as
printed; a chunked run killed between chunks names its ``--resume`` command, which finishes it
with every row updated exactly once and no row lost or duplicated.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from omnigraph.engine.failpoints import FAILPOINT_EXIT_STATUS
from tests.conftest import new_root
from tests.support.advice import first_command, run_printed
from tests.support.check_helpers import assert_check_clean
from tests.support.graph_helpers import OMNIGRAPH, run_cli
from tests.support.many_people import PEOPLE
from tests.support.many_people import ages as _ages
from tests.support.many_people import many_people as _graph


@pytest.mark.parametrize("backend", ["local", "s3"], indirect=True)
def test_a_refused_large_update_names_the_chunked_command_which_applies_it(backend: str, tmp_path: Path) -> None:
    uri = new_root(backend, tmp_path)
    _graph(uri)
    query = tmp_path / "q.gq"
    query.write_text("query older($age: I32) { update Person set { age: $age } where age < 50 }\n")
    refused = run_cli(OMNIGRAPH, "mutate", "--query", query, "--params", '{"age": 1}', "--json", uri)
    assert refused.returncode == 1, refused.describe()
    error = refused.json()["error"]
    assert (error["code"], error["details"]["actual"]) == ("resource_limit", PEOPLE)
    command = first_command(error["message"])
    assert command == error["details"]["next"] and "--chunk-rows 8192" in command
    assert set(_ages(uri).values()) == {30}

    applied = run_printed(command + " --json")
    assert applied.returncode == 0, applied.describe()
    document = applied.json()
    assert [c["nodes"] for c in document["chunks"]] == [8192, PEOPLE - 8192]
    assert document["affected_nodes"] == PEOPLE and len(document["commits"]) == 2
    ages = _ages(uri)
    assert len(ages) == PEOPLE and set(ages.values()) == {1}
    assert_check_clean(uri)


@pytest.mark.parametrize("backend", ["local"], indirect=True)  # storage-independent: local only
def test_a_chunked_delete_killed_between_chunks_is_finished_by_its_resume_command(backend: str, tmp_path: Path) -> None:
    uri = new_root(backend, tmp_path)
    _graph(uri)
    query = tmp_path / "q.gq"
    query.write_text('query thin() { delete Person where name >= "p04000" }\n')
    killed = run_cli(OMNIGRAPH, "mutate", "--query", query, "--chunk-rows", "1500", uri, env={"OMNIGRAPH_FAILPOINTS": "mutate.after_chunk"})
    assert killed.returncode == FAILPOINT_EXIT_STATUS, killed.describe()
    assert len(_ages(uri)) == PEOPLE - 1500  # one chunk committed and recorded
    command = first_command(killed.stderr)
    assert command.startswith("omnigraph mutate --resume ")
    resumed = run_printed(command + " --json")
    assert resumed.returncode == 0, resumed.describe()
    document = resumed.json()
    assert sum(c["nodes"] for c in document["chunks"]) == PEOPLE - 4000
    assert [c["nodes"] for c in document["chunks"]] == [1500, 1500, 1300]
    ages = _ages(uri)
    assert sorted(ages) == [f"p{i:05d}" for i in range(4000)]
    assert_check_clean(uri)
    again = run_printed(command + " --json").ok().json()  # a finished operation: nothing more to do
    assert again["chunks"] == document["chunks"]


def test_chunking_refuses_an_insert_query_and_writes_nothing(tmp_path: Path) -> None:
    uri = new_root("local", tmp_path)
    _graph(uri)
    query = tmp_path / "q.gq"
    query.write_text('query add() { insert Person { name: "New" } }\n')
    refused = run_cli(OMNIGRAPH, "mutate", "--query", query, "--chunk-rows", "10", "--json", uri)
    assert refused.returncode == 1 and "update-only and delete-only" in refused.json()["error"]["message"]
    assert not (Path(uri) / "__recovery" / "chunked").exists()
