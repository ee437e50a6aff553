"""Probes (``omnigraph.engine.query.probe``): a match that starts at known nodes reads only what it reaches.

On a small social graph with a self-loop, parallel edges, a node and a company sharing an id, an
edge whose endpoint is not a node, and a hub with more edges than the probe bound (set low), every
query is answered twice in the same process, with probes and with probes switched off (the bound
on known ids set to 0: every table scanned, the statement as it was before probes), and the
answers must be identical. The probes that ran are recorded, so the test fails if none did
where they should, and ``--explain`` names each probed hop's mode and start.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import omnigraph
from omnigraph.engine.query import probe, run
from tests.support.graph_helpers import init, knows, load_lines, person

LINES = [
    *(person(f"p{i:02d}", i) for i in range(12)),
    person("Ann", 40),
    '{"type": "Company", "data": {"name": "Ann"}}',
    '{"type": "Company", "data": {"name": "Acme"}}',
    *(knows(f"p{i:02d}", f"p{(i + 1) % 12:02d}", f"k{i}", since=2000 + i) for i in range(12)),
    knows("p00", "p01", "k-parallel", since=1999),
    knows("p05", "p05", "k-loop"),
    knows("p03", "p00", "k-back"),
    *(knows("p07", f"p{i:02d}", f"k-hub-{i}") for i in range(12)),
    '{"edge": "WorksAt", "from": "Ann", "to": "Ann"}',
    '{"edge": "WorksAt", "from": "p01", "to": "Acme"}',
]

QUERIES = {
    "one hop": ('$p: Person { name: "p00" }  $p knows $f', "$f.name"),
    "two hops": ('$p: Person { name: "p00" }  $p knows $f  $f knows $g', "$g.name"),
    "backwards": ('$f: Person { name: "p01" }  $p knows $f', "$p.name"),
    "edge binding": ('$p: Person { name: "p00" }  $p $k:knows $f', "$f.name, $k.since"),
    "across types": ('$p: Person { name: "Ann" }  $p worksAt $c', "$c.name"),
    "to a company": ('$c: Company { name: "Ann" }  $p worksAt $c', "$p.name"),
    "both ends": ('$p: Person { name: "p00" }  $f: Person { name: "p01" }  $p knows $f', "count($f) as n"),
    "self-loop": ('$p: Person { name: "p05" }  $p knows $p', "$p.name"),
    "no such key": ('$p: Person { name: "nobody" }  $p knows $f', "$f.name"),
    "negation": ('$p: Person { name: "p00" }  $p knows $f  not { $f knows $p }', "$f.name"),
    "then a search": ('$p: Person { name: "p00" }  $p knows $f  $f knows{1,2} $g', "count($g) as n"),
    "a hub": ('$h: Person { name: "p07" }  $h knows $f  $f knows $g', "$f.name, $g.name"),
    "a comparison": ('$p: Person { name: "p03" }  $p knows $f  $f.age < $p.age', "$f.name"),
    "a repeated hop": ('$p: Person { name: "p01" }  $p knows $f  $p knows $f  $p worksAt $c', "$f.name, $c.name"),
}
UNPROBED_EDGES = {"a hub"}  # its first hop finds more edges than the test's bound


@pytest.fixture(autouse=True)
def no_direct_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every query here runs its statement (a direct answer, :mod:`omnigraph.engine.query.direct`, would not probe)."""
    monkeypatch.setattr(run, "direct_plan", lambda bound: None)


@pytest.fixture(scope="module")
def social(tmp_path_factory: pytest.TempPathFactory) -> Iterator[omnigraph.Graph]:
    root = str(tmp_path_factory.mktemp("probe") / "social")
    init(root)
    load_lines(root, LINES)
    with omnigraph.open(root, read_only=True) as graph:
        yield graph


def _query(match: str, returned: str) -> str:
    return f"query q() {{ match {{ {match} }} return {{ {returned} }} }}"


def _answer(graph: omnigraph.Graph, source: str) -> list[dict[str, Any]]:
    return [dict(row) for row in graph.query(source).rows]


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_probed_answers_are_the_scanned_answers(social: omnigraph.Graph, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _query(*QUERIES[name])
    seen: list[probe.Probed] = []

    def spy(*args: Any, **kwargs: Any) -> probe.Probed:
        seen.append(probe.probe(*args, **kwargs))
        return seen[-1]

    read_by_id: list[list[str]] = []
    read = probe.node_rows

    def counted(image: Any, columns: list[str], ids: list[str], cache_limit: int) -> Any:
        read_by_id.append(list(ids))
        return read(image, columns, ids, cache_limit)

    monkeypatch.setattr(run, "probe", spy)
    monkeypatch.setattr(probe, "node_rows", counted)
    monkeypatch.setattr(probe, "PROBED_EDGES", 8)  # the hub's 12 edges are scanned instead
    probed = _answer(social, source)
    assert seen[-1].nodes and bool(seen[-1].edges) == (name not in UNPROBED_EDGES), seen[-1]
    assert len(read_by_id) == len(set(seen[-1].nodes.values()))  # one read per node table, for all its known variables
    if name == "two hops":  # $p, $f and $g are people: one read of the ids they may bind
        assert len(seen[-1].nodes) == 3 and len(read_by_id) == 1 and read_by_id[0] == sorted(set(read_by_id[0]))
    monkeypatch.setattr(probe, "PROBED_IDS", 0)
    scanned = _answer(social, source)
    assert not seen[-1].edges and not seen[-1].nodes
    assert probed == scanned
    if name != "no such key":
        assert probed


def test_a_probe_past_its_edge_bound_scans_and_leaves_the_far_end_unknown(social: omnigraph.Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[probe.Probed] = []

    def spy(*args: Any, **kwargs: Any) -> probe.Probed:
        seen.append(probe.probe(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(run, "probe", spy)
    monkeypatch.setattr(probe, "PROBED_EDGES", 8)
    rows = _answer(social, _query(*QUERIES["a hub"]))
    assert not seen[-1].edges and sorted(seen[-1].nodes) == [0]  # only the hub itself was read by id
    pairs = {(line["from"], line["to"]) for line in map(json.loads, LINES) if line.get("edge") == "Knows"}
    expected = sorted({(f, g) for h, f in pairs if h == "p07" for f2, g in pairs if f2 == f})
    assert sorted((row["f.name"], row["g.name"]) for row in rows) == expected and len(expected) > 12
    monkeypatch.setattr(probe, "PROBED_EDGES", 64)
    assert _answer(social, _query(*QUERIES["a hub"])) == rows
    assert len(seen[-1].edges) == 2


def test_a_traversal_end_past_the_id_bound_leaves_no_unread_rows_behind(social: omnigraph.Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    """An end with more ids than the bound is left unknown after reading one id past it; the next search still runs.

    (The rows of that read were left unread, and DuckDB refused the next search's seed query: 500.)
    """
    source = _query(
        '$p: Person { name: "p00" }  $p knows{1,2} $f  $g: Person { name: "p03" }  $g knows{1,2} $h',
        "count($h) as n",
    )
    monkeypatch.setattr(probe, "PROBED_IDS", 2)  # each search reaches more ids than that
    bounded = _answer(social, source)
    monkeypatch.setattr(probe, "PROBED_IDS", 0)
    assert bounded == _answer(social, source) == [{"n": 2 * 4}]  # p00 reaches p01, p02; p03 reaches p04, p00 (k-back), p05, p01


def test_explain_names_the_probed_hops(social: omnigraph.Graph) -> None:
    plan = social.explain_query(_query(*QUERIES["two hops"]))
    assert [(hop["from"], hop["to"], hop["mode"], hop["start"]) for hop in plan.hops] == [
        ("$p", "$f", "probe", "sources"),
        ("$f", "$g", "probe", "sources"),
    ]
    backwards = social.explain_query(_query(*QUERIES["backwards"]))
    assert [(hop["mode"], hop["start"]) for hop in backwards.hops] == [("probe", "destinations")]
    unknown = social.explain_query(_query("$p: Person  $p knows $f", "$f.name"))
    assert [(hop["mode"], hop["start"]) for hop in unknown.hops] == [("join", None)]
