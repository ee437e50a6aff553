"""What bounds a read query, in process: the parser's bounds (``limit``, ``not`` nesting) cover
what the executor runs; many filters on one variable stay cheap; the time limit and a
:class:`omnigraph.QueryCancel` stop a query (``timeout``, exit 1 from the CLI; ``cancelled``), its
traversal searched in DuckDB or over the cached adjacency; an
answer collected whole is capped while a streamed one is not; so is the spill disk; and a DuckDB failure never carries
its SQL into a message. (The same limits through a real server: ``tests/server/test_query_limits.py``.)"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

import omnigraph
from omnigraph.engine.query import adjacency
from omnigraph.engine.query.adjacency import ADJACENCY_ENV
from omnigraph.engine.query.limits import Guard
from omnigraph.engine.query.plan import MAX_PUSHED_PER_VARIABLE
from omnigraph.errors import BadRequest, QueryCancelled, QueryTimeout, ResourceLimit
from tests.support.graph_helpers import OMNIGRAPH, invoke, make_chain_graph, run_cli

PEOPLE = 160
WALK = "query walk() { match { $a: Person  $a knows{1,1000000000} $b } return { count($b) as n } }"


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[omnigraph.Graph]:
    """A chain of :data:`PEOPLE` Person nodes aged 0.., each knowing the next."""
    uri = str(tmp_path_factory.mktemp("bounds") / "graph")
    make_chain_graph(uri, PEOPLE)
    with omnigraph.open(uri, read_only=True) as graph:
        yield graph


def _nested_negations(depth: int) -> str:
    """The costliest shape per level: a new variable joined to the previous one and compared with it."""
    body = ""
    for level in range(depth, 0, -1):
        outer = "p" if level == 1 else f"x{level - 1}"
        body = f"not {{ $x{level}: Person ${outer} knows $x{level} $x{level}.age > ${outer}.age {body} }}"
    return f"query q() {{ match {{ $p: Person {body} }} return {{ count($p) as n }} }}"


def _passing(depth: int) -> int:
    """How many people of the chain pass :func:`_nested_negations` (person ``i`` knows ``i + 1``, who is older)."""
    # found[i]: some friend of i is older and fails the next level's test; None below the deepest level
    found = [False] * PEOPLE
    for _ in range(depth):
        found = [i + 1 < PEOPLE and not found[i + 1] for i in range(PEOPLE)]
    return sum(not passed for passed in found)


def test_the_parser_bounds_cover_what_the_executor_runs(chain: omnigraph.Graph) -> None:
    assert chain.query(_nested_negations(64)).rows == ({"n": _passing(64)},)
    with pytest.raises(BadRequest) as deep:
        chain.query(_nested_negations(65))
    assert "not, exists and count blocks nest at most 64 deep" in deep.value.message
    assert deep.value.details["line"] == 1 and deep.value.details["token"] == "not"
    top = "query q() { match { $p: Person } return { $p.name } order { $p.age desc } limit 9223372036854775807 }"
    assert chain.query(top).rows[0] == {"p.name": f"p{PEOPLE - 1:04d}"}
    with pytest.raises(BadRequest, match="limit is at most 9223372036854775807"):
        chain.query(top.replace("9223372036854775807", "9223372036854775808"))


def test_many_filters_on_one_variable_stay_cheap(chain: omnigraph.Graph) -> None:
    filters = " ".join(f"$p.age != {age}" for age in range(22))
    query = f"query q() {{ match {{ $p: Person {filters} }} return {{ count($p) as n }} }}"
    started = time.monotonic()
    assert chain.query(query).rows == ({"n": PEOPLE - 22},)
    assert time.monotonic() - started < 5  # 41 s and 3 GB before the cap on pushed comparisons
    pushed = [item["pushed_into_scan"] for item in chain.explain_query(query).filters]
    assert pushed == [True] * MAX_PUSHED_PER_VARIABLE + [False] * (22 - MAX_PUSHED_PER_VARIABLE)


def test_conditions_share_the_pushed_bound_and_are_bounded_in_size(chain: omnigraph.Graph) -> None:
    """One ``or`` of 22 comparisons is not pushed whole (3.6 s on 300 nodes when it was, doubling with
    each term); a condition's and/or joins, its not/parentheses nesting and sub-pattern nesting are
    bounded at parse time at sizes the executor runs."""
    any_of = " or ".join(f"$p.age = {age}" for age in range(22))
    query = f"query q() {{ match {{ $p: Person  $p.age != 0  {any_of} }} return {{ count($p) as n }} }}"
    started = time.monotonic()
    assert chain.query(query).rows == ({"n": 21},)
    assert time.monotonic() - started < 5
    assert [item["pushed_into_scan"] for item in chain.explain_query(query).filters] == [True, False]
    small = "query q() { match { $p: Person  ($p.age = 1 or $p.age = 2) } return { count($p) as n } }"
    assert [item["pushed_into_scan"] for item in chain.explain_query(small).filters] == [True]
    widest = " or ".join(f"$p.age = {age}" for age in range(256))
    assert chain.query(f"query q() {{ match {{ $p: Person {widest} }} return {{ count($p) as n }} }}").rows == ({"n": PEOPLE},)
    with pytest.raises(BadRequest, match="one condition joins at most 256 parts with and/or"):
        chain.query(f"query q() {{ match {{ $p: Person {widest} or $p.age = 999 }} return {{ count($p) as n }} }}")
    deepest = "not " * 64 + "$p.age = 1"
    assert chain.query(f"query q() {{ match {{ $p: Person {deepest} }} return {{ count($p) as n }} }}").rows == ({"n": 1},)
    with pytest.raises(BadRequest, match="not and parentheses nest at most 64 deep"):
        chain.query(f"query q() {{ match {{ $p: Person ({deepest}) }} return {{ count($p) as n }} }}")
    exists = "exists { $p knows $f " * 65 + "}" * 65
    with pytest.raises(BadRequest, match="not, exists and count blocks nest at most 64 deep"):
        chain.query(f"query q() {{ match {{ $p: Person {exists} }} return {{ count($p) as n }} }}")


def test_an_unordered_limit_counts_only_rows_that_pass_every_clause(chain: omnigraph.Graph) -> None:
    """A search that stops early counts pairs; a text match on the far end drops pairs after it, so
    such a query runs its search to the end and still answers ``limit`` rows while they exist."""
    query = 'query q() { match { $a: Person  $a knows{1,3} $b  search($b.name, "p0010") } return { $a.name, $b.name } limit 2 }'
    rows = chain.query(query).rows
    assert len(rows) == 2 and {row["b.name"] for row in rows} == {"p0010"}
    assert {row["a.name"] for row in rows} <= {"p0007", "p0008", "p0009"}


def test_the_time_limit_stops_a_traversal_and_the_cli_exits_1(
    chain: omnigraph.Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search in DuckDB (no adjacency cache), one edge scan per hop: 160 hops take seconds."""
    monkeypatch.setenv(ADJACENCY_ENV, "0")
    monkeypatch.setenv("OMNIGRAPH_QUERY_TIMEOUT_S", "0.3")
    started = time.monotonic()
    with pytest.raises(QueryTimeout) as stopped:
        chain.query(WALK)
    assert time.monotonic() - started < 3
    assert stopped.value.code == "timeout" and stopped.value.http_status == 408
    assert stopped.value.details == {"timeout_seconds": 0.3}
    source = tmp_path / "walk.gq"
    source.write_text(WALK)
    cli = invoke(OMNIGRAPH, "query", "--query", source, chain.uri)
    assert cli.returncode == 1 and "error [timeout]" in cli.stderr and "OMNIGRAPH_QUERY_TIMEOUT_S" in cli.stderr
    monkeypatch.setenv("OMNIGRAPH_QUERY_TIMEOUT_S", "soon")
    with pytest.raises(BadRequest, match="OMNIGRAPH_QUERY_TIMEOUT_S='soon'"):
        chain.query(WALK)


def test_a_cancel_token_stops_a_query_from_another_thread(chain: omnigraph.Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ADJACENCY_ENV, "0")  # the search in DuckDB, whose 160 hops take seconds
    cancel = omnigraph.QueryCancel()
    threading.Timer(0.2, cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(QueryCancelled):
        chain.query(WALK, cancel=cancel)
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("stop", ["timeout", "cancel"])
def test_a_search_over_the_adjacency_stops_between_hops(chain: omnigraph.Graph, stop: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same stops for the search over the cached adjacency, which checks them before every
    hop: each hop made to last 20 ms, the 160 hops would take 3 s; the query stops after a few."""
    expand = adjacency._expand
    hops = 0

    def slow(*args: Any) -> Any:
        nonlocal hops
        hops += 1
        time.sleep(0.02)
        return expand(*args)

    monkeypatch.setattr(adjacency, "_expand", slow)
    assert chain.query(WALK.replace("1000000000", "3")).rows == ({"n": 3 * PEOPLE - 6},)  # the adjacency answers
    hops = 0
    cancel = omnigraph.QueryCancel()
    if stop == "timeout":
        monkeypatch.setenv("OMNIGRAPH_QUERY_TIMEOUT_S", "0.3")
    else:
        threading.Timer(0.3, cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(QueryTimeout if stop == "timeout" else QueryCancelled):
        chain.query(WALK, cancel=cancel)
    assert time.monotonic() - started < 1.5
    assert 0 < hops < PEOPLE // 2


def test_an_answer_collected_whole_is_capped_and_a_streamed_one_is_not(chain: omnigraph.Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNIGRAPH_QUERY_MEMORY_MB", "16")  # the cap: 1/32 of it, 512 KiB of JSON
    pairs = "query q() { match { $p: Person  $q: Person } return { $p.name, $q.name, $p.age, $q.age } }"  # about 700 KB of JSON
    with pytest.raises(ResourceLimit) as capped:
        chain.query(pairs)
    assert capped.value.details["resource"] == "answer_bytes" and capped.value.details["limit"] == 512 * 1024
    with chain.open_query(pairs) as answer:
        assert sum(1 for _ in answer.rows()) == PEOPLE * PEOPLE


def test_spill_disk_is_capped(chain: omnigraph.Graph, tmp_path: Path) -> None:
    source = tmp_path / "cube.gq"  # 4M rows sorted: spills past 48 MiB of memory
    source.write_text(
        "query q() { match { $a: Person $b: Person $c: Person } return { $a.name, $b.name, $c.name } order { $c.name desc } limit 3 }"
    )
    env = {"OMNIGRAPH_QUERY_MEMORY_MB": "48", "OMNIGRAPH_QUERY_SPILL_MB": "1"}  # read once per process: a process of its own
    cli = run_cli(OMNIGRAPH, "query", "--json", "--query", source, chain.uri, env=env)
    assert cli.returncode == 1, cli.describe()
    assert cli.json()["error"]["details"] == {"resource": "query_spill", "limit": 1024 * 1024, "actual": 1024 * 1024}


IDLE_RELEASE = """
import json, os, time
from omnigraph.engine.query.session import open_session
def resident() -> int:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
with open_session() as session:
    before = resident()
    session.execute("SELECT count(*) FROM (SELECT DISTINCT 'node-' || i::VARCHAR FROM range(4000000) AS t(i))").fetchall()
peak = resident()
waited = 0.0
while resident() - before >= (peak - before) / 2 and waited < 15:  # idle: no allocation wakes a purge
    time.sleep(0.25)
    waited += 0.25
print(json.dumps({"before": before, "peak": peak, "idle": resident(), "waited": waited}))
"""


def test_memory_a_query_freed_returns_to_the_system_while_idle() -> None:
    child = subprocess.run([sys.executable, "-c", IDLE_RELEASE], capture_output=True, text=True, timeout=120, check=True)
    sizes = json.loads(child.stdout)
    grown = sizes["peak"] - sizes["before"]
    assert grown > 64 * 1024 * 1024, sizes  # the distinct strings were held in memory
    assert sizes["idle"] - sizes["before"] < grown / 2, sizes  # without the allocator's purge it stays resident past 15 s


def test_a_duckdb_failure_never_carries_its_sql() -> None:
    connection = duckdb.connect()
    guard = Guard(connection, None, None)
    try:
        connection.execute("SELECT 1 LIMIT 99999999999999999999999999")
    except duckdb.Error as error:
        typed = guard.typed(error, ResourceLimit("query_memory", 1, 1, "memory"), 1)
    guard.close()
    assert isinstance(typed, OSError) and "ConversionException" in str(typed)
    assert "SELECT" not in str(typed) and "LINE" not in str(typed)
