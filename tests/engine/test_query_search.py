"""Search on Lance's own indexes: ``nearest`` against brute force, exact and index-served.

One graph is built once for the module (local disk) and only read: commit A holds 600 documents
with 8-dimensional vectors (5 of them null, two identical) and no index; ``omnigraph optimize
--declared-indexes`` (run through the CLI) then builds the declared vector index (commit B); one
more document is inserted after it (commit C, a fragment the index does not cover). Every answer
is compared with numpy's brute force over the same float32 vectors: at A the exact scan, at B and
C the index-served candidates (recall printed and held to a floor).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from click.testing import CliRunner

import omnigraph
from omnigraph.cli.omnigraph import cli
from omnigraph.engine.gq.lint import lint
from omnigraph.engine.gq.parser import parse
from omnigraph.engine.gq.read_checker import check_read_types
from omnigraph.engine.gq.syntax import GqError
from omnigraph.engine.query import run, search
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.maintenance import optimize
from omnigraph.server.app import create_app
from omnigraph.server.grants import Grant
from omnigraph.server.settings import ServeSettings
from tests.server.test_serve_routes import serving
from tests.support.serve_helpers import write_tokens

SCHEMA = """
node Doc { slug: String @key  kind: String  embedding: Vector(8)? @index  rank: I32 @index }
"""
DIM = 8
DOCS = 600
NULLS = {f"d{i:03d}" for i in (3, 77, 150, 301, 599)}
TWIN = ("d010", "d020")  # the same vector: their tie is broken by id
NEAREST = """
query near($q: Vector(8)) {
  match { $d: Doc }
  return { $d.slug, nearest($d.embedding, $q) as dist }
  order { nearest($d.embedding, $q) }
  limit 10
}
query rare($q: Vector(8)) {
  match { $d: Doc  $d.kind = "rare" }
  return { $d.slug, nearest($d.embedding, $q) as dist }
  order { nearest($d.embedding, $q) }
  limit 5
}
query every($q: Vector(8)) {
  match { $d: Doc }
  return { $d.slug, nearest($d.embedding, $q) as dist }
  order { nearest($d.embedding, $q) }
  limit 1000
}
"""
NEW_DOC = "zz-new"
NEW_VECTOR = [9.0] * DIM


@dataclass(frozen=True)
class Built:
    uri: str
    vectors: dict[str, np.ndarray]
    kinds: dict[str, str]
    exact_commit: str
    indexed_commit: str


def _vector(rng: np.random.Generator) -> list[float]:
    return [float(x) for x in rng.standard_normal(DIM).round(3)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    rng = np.random.default_rng(39)
    uri = str(tmp_path_factory.mktemp("search") / "graph")
    records: list[dict[str, Any]] = []
    vectors: dict[str, np.ndarray] = {}
    kinds: dict[str, str] = {}
    for i in range(DOCS):
        slug = f"d{i:03d}"
        kinds[slug] = "rare" if i % 50 == 7 else "common"
        data: dict[str, Any] = {"slug": slug, "kind": kinds[slug], "rank": i % 17}
        if slug not in NULLS:
            data["embedding"] = _vector(rng) if slug != TWIN[1] else records[int(TWIN[0][1:])]["data"]["embedding"]
            vectors[slug] = np.asarray(data["embedding"], dtype=np.float32).astype(np.float64)
        records.append({"type": "Doc", "data": data})
    with omnigraph.init(uri, SCHEMA) as graph:
        exact_commit = graph.load(records, mode="append").commits[-1]
    optimized = CliRunner().invoke(cli, ["optimize", "--declared-indexes", "--json", uri], catch_exceptions=False)
    assert optimized.exit_code == 0, optimized.output
    report = json.loads(optimized.output)
    assert report["tables"] == [
        {
            "table_key": "node:Doc",
            "actions": ["IVF_FLAT index embedding", "BTREE index rank", "refresh key index id"],
            "fragments_before": 1,
        }
    ]
    with omnigraph.open(uri) as graph:
        indexed_commit = graph.commits()[0].commit_id
        graph.mutate(
            'query add($v: Vector(8)) { insert Doc { slug: "zz-new", kind: "common", rank: 0, embedding: $v } }', params={"v": NEW_VECTOR}
        )
    yield Built(uri, vectors, kinds, exact_commit, indexed_commit)


def brute_force(built: Built, query: list[float], limit: int, kind: str | None = None) -> list[tuple[str, float]]:
    """The ``limit`` nearest documents (of ``kind``) by L2 distance in float64, ties by slug."""
    q = np.asarray(query, dtype=np.float32).astype(np.float64)  # a Vector(8) parameter is float32
    scored = [(slug, float(np.linalg.norm(v - q))) for slug, v in built.vectors.items() if kind is None or built.kinds[slug] == kind]
    return sorted(scored, key=lambda item: (item[1], item[0]))[:limit]


def answer(built: Built, name: str, query: list[float], at: str | None = None) -> list[tuple[str, float | None]]:
    with omnigraph.open(built.uri, read_only=True) as graph:
        result = graph.query(NEAREST, name=name, params={"q": query}, at=at)
    return [(row["d.slug"], row["dist"]) for row in result.rows]


def _queries(count: int) -> list[list[float]]:
    rng = np.random.default_rng(7)
    return [_vector(rng) for _ in range(count)]


def _same(found: list[tuple[str, float | None]], expected: list[tuple[str, float]]) -> None:
    assert [slug for slug, _ in found] == [slug for slug, _ in expected]
    for (_, distance), (_, truth) in zip(found, expected, strict=True):
        assert distance == pytest.approx(truth, rel=1e-9, abs=1e-12)


def test_nearest_without_an_index_is_the_exact_brute_force_answer(built: Built) -> None:
    for query in _queries(5):
        _same(answer(built, "near", query, at=built.exact_commit), brute_force(built, query, 10))
    # a query at the twins: both at distance 0, the lower id first
    twin = [float(x) for x in built.vectors[TWIN[0]]]
    assert [slug for slug, _ in answer(built, "near", twin, at=built.exact_commit)[:2]] == list(TWIN)
    # null vectors have no distance and come last, by id
    rows = answer(built, "every", _queries(1)[0], at=built.exact_commit)
    assert rows[-len(NULLS) :] == [(slug, None) for slug in sorted(NULLS)]


def test_nearest_served_by_the_vector_index_has_high_recall_and_exact_distances(built: Built) -> None:
    queries = _queries(20)
    hits = 0
    for query in queries:
        found = answer(built, "near", query, at=built.indexed_commit)
        expected = brute_force(built, query, 10)
        hits += len({slug for slug, _ in found} & {slug for slug, _ in expected})
        q = np.asarray(query, dtype=np.float32).astype(np.float64)
        truth = {slug: float(np.linalg.norm(built.vectors[slug] - q)) for slug, _ in found}
        assert [d for _, d in found] == sorted(d for _, d in found if d is not None)  # nearest first
        assert all(d == pytest.approx(truth[slug], rel=1e-9) for slug, d in found)  # the returned distances are exact
    recall = hits / (10 * len(queries))
    print(f"nearest recall@10 over {len(queries)} queries with the IVF_FLAT index: {recall:.3f}")
    assert recall >= 0.9


def test_match_filters_apply_before_ranking_and_the_limit_is_filled(built: Built) -> None:
    # the index's candidates hold too few rare documents: the query runs again exactly
    for query in _queries(3):
        for at in (built.exact_commit, built.indexed_commit):
            _same(answer(built, "rare", query, at=at), brute_force(built, query, 5, kind="rare"))


def test_rows_written_after_the_index_are_searched_too(built: Built) -> None:
    assert answer(built, "near", NEW_VECTOR)[0] == (NEW_DOC, 0.0)


def test_explain_names_the_index_or_the_exact_scan_through_python_cli_and_http(built: Built, tmp_path: Path) -> None:
    params = {"q": _queries(1)[0]}
    with omnigraph.open(built.uri, read_only=True) as graph:
        exact = graph.explain_query(NEAREST, name="near", params=params, at=built.exact_commit).searches
        indexed = graph.explain_query(NEAREST, name="near", params=params).searches
    assert [dict(s) for s in exact] == [
        {"function": "nearest", "column": "$d.embedding", "table": "node:Doc", "ordering": True, "index": None, "candidates": None}
    ]
    assert [dict(s) for s in indexed] == [{**exact[0], "index": "embedding_idx", "candidates": 40}]

    source = tmp_path / "q.gq"
    source.write_text(NEAREST, encoding="utf-8")
    args = ["query", "--query", str(source), "--name", "near", "--params", json.dumps(params)]
    shown = CliRunner().invoke(cli, [*args, "--explain", built.uri], catch_exceptions=False)
    assert "nearest($d.embedding, ...) ordering: the 40 nearest candidates from embedding_idx, then exact distances" in shown.output
    ran = CliRunner().invoke(cli, [*args, "--json", built.uri], catch_exceptions=False)
    assert [row["d.slug"] for row in json.loads(ran.output)["rows"]] == [slug for slug, _ in answer(built, "near", params["q"])]

    tokens = write_tokens(tmp_path, {"reader": [Grant.READ]})
    settings = ServeSettings(graph=built.uri, program="omnigraph", tokens_file=str(tokens.path), allowed_hosts=["127.0.0.1"])
    headers = {"Authorization": f"Bearer {tokens.by_actor['reader']}"}
    with serving(create_app(settings)) as base, httpx.Client(base_url=base) as client:
        body = {"query": NEAREST, "name": "near", "params": params}
        plan = client.post("/branches/main/explain", json=body, headers=headers)
        assert plan.status_code == 200, plan.text
        assert plan.json()["searches"][0]["index"] == "embedding_idx"
        rows = client.post("/branches/main/query", json=body, headers=headers)
        assert rows.status_code == 200, rows.text
        assert [(row["d.slug"], row["dist"]) for row in rows.json()["rows"]] == answer(built, "near", params["q"])


REFUSALS = [
    ("return { $d.slug } order { nearest($d.embedding, $q) }", "needs a limit", "nearest"),
    ("return { $d.slug } order { nearest($d.kind, $q) } limit 3", "nearest takes a Vector property; $d.kind is String", "kind"),
    ("return { $d.slug } order { nearest($d.embedding, $s) } limit 3", "takes a Vector(8) query; $s is String", "$s"),
    ("return { $d.slug } order { nearest($d.embedding, $short) } limit 3", "takes a Vector(8) query; $short is Vector(3)", "$short"),
    (
        "return { $d.slug } order { nearest($d.embedding, [1, 2]) } limit 3",
        "nearest's query vector: expected Vector(8) (a list of 8 numbers)",
        "[",
    ),
    ('return { $d.slug } order { nearest($d.embedding, [1, 2, 3, 4, 5, 6, 7, "x"]) } limit 3', "expected F32, got 'x'", "["),
    ("return { count($d), nearest($d.embedding, $q) } limit 3", "grouped query", "nearest"),
    ("return { $d.slug } order { nearest($d.embedding, $q) desc } limit 3", "takes no asc or desc", "desc"),
]


def _docs_example(heading: str) -> str:
    text = (Path(__file__).resolve().parents[2] / "docs/queries.md").read_text(encoding="utf-8")
    return text.split(heading, 1)[1].split("```gq\n", 1)[1].split("```", 1)[0]


def test_the_nearest_example_of_the_docs_runs_as_written(built: Built) -> None:
    query = _queries(1)[0]
    with omnigraph.open(built.uri, read_only=True) as graph:
        result = graph.query(_docs_example("### Search: `nearest`"), params={"q": query})
    _same([(row["d.slug"], row["distance"]) for row in result.rows], brute_force(built, query, 5, kind="rare"))


def test_lint_describes_the_distance_as_a_nullable_float() -> None:
    report = lint(SCHEMA, NEAREST, schema_path="s.pg", query_path="q.gq")
    assert report["status"] == "ok"
    assert report["results"][0]["operation"]["result"] == [
        {"name": "d.slug", "kind": "string", "nullable": False},
        {"name": "dist", "kind": "float", "nullable": True},
    ]


# ---------------------------------------------------------------------------------------------
# full text: search, match_text, fuzzy and bm25 against brute force, without and with the index

TEXT_SCHEMA = "node Note { slug: String @key  body: String? @index  stars: I32  embedding: Vector(3)? }\n"
WORDS = ["graph", "lance", "vector", "Über", "café", "index", "query", "search", "fox", "fuzzy", "brown", "quick", "a", "of"]
TEXTS = """
query hits($q: String) { match { $n: Note  search($n.body, $q) } return { $n.slug } }
query any($q: String) { match { $n: Note  match_text($n.body, $q) } return { $n.slug } }
query near($q: String) { match { $n: Note  fuzzy($n.body, $q) } return { $n.slug } }
query nearer($q: String, $e: I64) { match { $n: Note  fuzzy($n.body, $q, $e) } return { $n.slug } }
query fused($v: Vector(3), $q: String) {
  match { $n: Note }
  return { $n.slug, rrf(nearest($n.embedding, $v), bm25($n.body, $q), 10) as score }
  order { rrf(nearest($n.embedding, $v), bm25($n.body, $q), 10) desc }
  limit 12
}
query fused_matching($v: Vector(3), $q: String) {
  match { $n: Note  match_text($n.body, "graph") }
  return { $n.slug, rrf(nearest($n.embedding, $v), bm25($n.body, $q)) as score }
  order { score desc }
  limit 12
}
query ranked($q: String) {
  match { $n: Note }
  return { $n.slug, bm25($n.body, $q) as score }
  order { bm25($n.body, $q) }
  limit 15
}
"""


@dataclass(frozen=True)
class Texts:
    uri: str
    bodies: dict[str, str | None]
    vectors: dict[str, np.ndarray]
    exact_commit: str
    indexed_commit: str


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Texts:
    rng = np.random.default_rng(5)
    uri = str(tmp_path_factory.mktemp("texts") / "graph")
    bodies: dict[str, str | None] = {}
    for i in range(300):
        words = [str(w) for w in rng.choice(WORDS, size=int(rng.integers(1, 9)))]
        punctuation = [", ", " ", "-", "! "]
        bodies[f"n{i:03d}"] = None if i % 37 == 0 else "".join(w + punctuation[j % 4] for j, w in enumerate(words)).strip()
    vectors = {slug: rng.standard_normal(3).round(3) for i, slug in enumerate(bodies) if i % 29 != 1}
    records = [
        {"type": "Note", "data": {"slug": slug, "body": body, "stars": 1, "embedding": vectors[slug].tolist() if slug in vectors else None}}
        for slug, body in bodies.items()
    ]
    with omnigraph.init(uri, TEXT_SCHEMA) as graph:
        exact_commit = graph.load(records, mode="append").commits[-1]
    report = optimize(uri, declared_indexes=True)
    assert report.tables[0]["actions"] == ["NGRAM index body", "INVERTED index body", "refresh key index id"]
    with omnigraph.open(uri) as graph:
        indexed_commit = graph.commits()[0].commit_id
        graph.mutate('query add() { insert Note { slug: "zz", body: "graph graph lance", stars: 2 } }')  # not in the index
        graph.mutate('query drop() { delete Note where slug = "n004" }')  # still counted by the index
    return Texts(uri, bodies, {slug: v.astype(np.float32).astype(np.float64) for slug, v in vectors.items()}, exact_commit, indexed_commit)


def _tokens(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text.lower())


def _levenshtein(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def _brute_match(texts: Texts, func: str, query: str, edits: int | None = None) -> list[str]:
    wanted = set(_tokens(query))
    found = []
    for slug, body in texts.bodies.items():
        have = set(_tokens(body)) if body is not None else None
        if not wanted or have is None:
            continue
        limit = {t: edits if edits is not None else (0 if len(t) <= 2 else 1 if len(t) <= 5 else 2) for t in wanted}
        if (
            (func == "search" and wanted <= have)
            or (func == "match_text" and wanted & have)
            or (func == "fuzzy" and all(any(_levenshtein(t, h) <= limit[t] for h in have) for t in wanted))
        ):
            found.append(slug)
    return found


def _brute_bm25(bodies: dict[str, str | None], query: str, limit: int | None = 15) -> list[tuple[str, float]]:
    documents = {slug: _tokens(body) for slug, body in bodies.items() if body is not None}
    average = sum(len(d) for d in documents.values()) / len(documents)
    scored = []
    for slug, doc in documents.items():
        score = 0.0
        for term in set(_tokens(query)):
            frequency = sum(term in d for d in documents.values())
            tf = doc.count(term)
            if tf:
                idf = math.log(1 + (len(documents) - frequency + 0.5) / (frequency + 0.5))
                score += idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * len(doc) / average))
        scored.append((slug, score))
    return sorted(scored, key=lambda item: (-item[1], item[0]))[:limit]


def _text_rows(texts: Texts, name: str, at: str | None, **params: Any) -> list[dict[str, Any]]:
    with omnigraph.open(texts.uri, read_only=True) as graph:
        return list(graph.query(TEXTS, name=name, params=params, at=at).rows)


@pytest.mark.parametrize("query", ["graph lance", "ÜBER-café", "quick, fox!", "of a", "zzz", ""])
def test_full_text_matches_are_the_brute_force_answer_with_and_without_the_index(texts: Texts, query: str) -> None:
    for at in (texts.exact_commit, texts.indexed_commit):
        for name, func in (("hits", "search"), ("any", "match_text"), ("near", "fuzzy")):
            assert [row["n.slug"] for row in _text_rows(texts, name, at, q=query)] == _brute_match(texts, func, query)
        assert [row["n.slug"] for row in _text_rows(texts, "nearer", at, q="qiuck lnce", e=2)] == _brute_match(
            texts, "fuzzy", "qiuck lnce", 2
        )


@pytest.mark.parametrize("query", ["graph", "vector search index", "Über fox fox"])
def test_bm25_ranks_like_brute_force_computed_or_read_from_the_index(texts: Texts, query: str) -> None:
    expected = _brute_bm25(texts.bodies, query)
    exact = [(row["n.slug"], row["score"]) for row in _text_rows(texts, "ranked", texts.exact_commit, q=query)]
    _same(exact, expected)
    indexed = [(row["n.slug"], row["score"]) for row in _text_rows(texts, "ranked", texts.indexed_commit, q=query)]
    assert [slug for slug, _ in indexed] == [slug for slug, _ in expected]
    assert [score for _, score in indexed] == pytest.approx([score for _, score in expected], rel=1e-5)  # Lance scores in float32
    # a row written and one deleted since the index was built: the scores are computed from the text again
    later = [(row["n.slug"], row["score"]) for row in _text_rows(texts, "ranked", None, q=query)]
    now = {slug: body for slug, body in texts.bodies.items() if slug != "n004"}
    _same(later, _brute_bm25({**now, "zz": "graph graph lance"}, query))
    with omnigraph.open(texts.uri, read_only=True) as graph:
        plans = [
            graph.explain_query(TEXTS, name="ranked", params={"q": query}, at=at).searches
            for at in (texts.exact_commit, texts.indexed_commit, None)
        ]
    assert [[(s["function"], s["index"], s["ordering"]) for s in plan] for plan in plans] == [
        [("bm25", None, True)],
        [("bm25", "body_idx", True)],
        [("bm25", None, True)],
    ]


TEXT_REFUSALS = [
    ("match { $n: Note  search($n.stars, $q) } return { $n.slug }", "search takes a String property; $n.stars is I32", "stars"),
    ("match { $n: Note  match_text($n.body, $v) } return { $n.slug }", "match_text takes a String query; $v is Vector(2)", "$v"),
    ("match { $n: Note  fuzzy($n.body, $q, -1) } return { $n.slug }", "fuzzy's max_edits is an integer of 0 or more", "-1"),
    ("match { $n: Note  fuzzy($n.body, $q, $q) } return { $n.slug }", "fuzzy's max_edits is an integer; $q is String", "$q"),
    ("match { $n: Note } return { $n.slug } order { bm25($n.body, $q) asc }", "highest first: write no asc", "asc"),
    ("match { $n: Note } return { count($n), bm25($n.body, $q) }", "bm25(...) cannot be used in a grouped query", "bm25"),
    (
        "match { $n: Note } return { rrf(search($n.body, $q), bm25($n.body, $q)) }",
        "its first argument is nearest(...) or bm25(...)",
        "search",
    ),
    ("match { $n: Note } return { rrf(bm25($n.body, $q), bm25($n.body, $q), 0) }", "rrf's k is an integer of 1 or more", "0"),
    ("match { $n: Note } return { $n.slug } order { rrf(bm25($n.body, $q), bm25($n.body, $q)) asc }", "rrf(...) orders by", "asc"),
]


@pytest.mark.parametrize(
    ("schema", "params", "body", "message", "token"),
    [
        (SCHEMA, "$q: Vector(8), $s: String, $short: Vector(3)", "match { $d: Doc } " + body, message, token)
        for body, message, token in REFUSALS
    ]
    + [(TEXT_SCHEMA, "$q: String, $v: Vector(2)", body, message, token) for body, message, token in TEXT_REFUSALS],
)
def test_search_refusals_name_the_function_at_line_and_column(schema: str, params: str, body: str, message: str, token: str) -> None:
    source = f"query q({params}) {{\n  {body}\n}}"
    with pytest.raises(GqError) as refused:
        check_read_types(parse(source)[0], Catalog.from_source(schema))
    assert message in str(refused.value)
    assert refused.value.token == token
    assert str(refused.value).startswith(f"gq error at 2:{body.rindex(token) + 3} ")


def test_the_full_text_example_of_the_docs_runs_as_written(texts: Texts) -> None:
    with omnigraph.open(texts.uri, read_only=True) as graph:
        result = graph.query(_docs_example("### Search: full text"), params={"q": "graph lance"}, at=texts.indexed_commit)
    matching = set(_brute_match(texts, "match_text", "graph lance"))
    expected = [(slug, score) for slug, score in _brute_bm25(texts.bodies, "graph lance") if slug in matching][:5]
    found = [(row["n.slug"], row["score"]) for row in result.rows]
    assert [slug for slug, _ in found] == [slug for slug, _ in expected]
    assert [score for _, score in found] == pytest.approx([score for _, score in expected], rel=1e-5)


def _brute_rrf(texts: Texts, vector: list[float], query: str, k: int, eligible: set[str]) -> list[tuple[str, float]]:
    """rrf over the ``eligible`` notes: nearest ranks those with a vector, bm25 those scoring above 0; ties by slug."""
    q = np.asarray(vector, dtype=np.float32).astype(np.float64)
    near = sorted((float(np.linalg.norm(v - q)), slug) for slug, v in texts.vectors.items() if slug in eligible)
    relevance = {slug: score for slug, score in _brute_bm25(texts.bodies, query, None)}
    relevant = sorted((-score, slug) for slug, score in relevance.items() if slug in eligible and score > 0)
    fused = dict.fromkeys(sorted(eligible), 0.0)
    for ranking in (near, relevant):
        for rank, (_, slug) in enumerate(ranking, 1):
            fused[slug] += 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:12]


def test_rrf_fuses_the_two_rankings_over_the_matching_rows_like_brute_force(texts: Texts) -> None:
    vector, query = [0.3, -0.2, 1.0], "graph search"
    for at in (texts.exact_commit, texts.indexed_commit):
        every = [(row["n.slug"], row["score"]) for row in _text_rows(texts, "fused", at, v=vector, q=query)]
        _same(every, _brute_rrf(texts, vector, query, 10, set(texts.bodies)))
        matching = [(row["n.slug"], row["score"]) for row in _text_rows(texts, "fused_matching", at, v=vector, q=query)]
        _same(matching, _brute_rrf(texts, vector, query, 60, set(_brute_match(texts, "match_text", "graph"))))
    with omnigraph.open(texts.uri, read_only=True) as graph:
        plan = graph.explain_query(TEXTS, name="fused_matching", params={"v": vector, "q": query}, at=texts.indexed_commit)
    assert [(s["function"], s["column"], s["ordering"], s["index"]) for s in plan.searches] == [
        ("nearest", "$n.embedding", False, None),
        ("bm25", "$n.body", False, "body_idx"),
        ("rrf", "$n.embedding, $n.body", True, None),
        ("match_text", "$n.body", False, None),
    ]


def test_the_rrf_example_of_the_docs_runs_as_written(texts: Texts) -> None:
    vector, query = [1.0, 0.0, -0.5], "vector index"
    with omnigraph.open(texts.uri, read_only=True) as graph:
        rows = graph.query(_docs_example("### Search: fusion with `rrf`"), params={"v": vector, "q": query}, at=texts.exact_commit).rows
    _same([(row["n.slug"], row["score"]) for row in rows], _brute_rrf(texts, vector, query, 60, set(texts.bodies))[:10])


SUBSTRING = """
query has($t: String) { match { $n: Note  $n.body contains $t } return { $n.slug } }
query lacks($t: String) { match { $n: Note  not ($n.body contains $t) } return { $n.slug } }
"""


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The rows each n-gram-served contains of the test found (None: past the bound), recorded as they are read."""
    found: list[int | None] = []

    def spy(substring: search.IndexedSubstring, dataset: Any, columns: list[str]) -> Any:
        rows = search.substring_rows(substring, dataset, columns)
        found.append(None if rows is None else rows.num_rows)
        return rows

    monkeypatch.setattr(run, "substring_rows", spy)
    return found


@pytest.mark.parametrize("needle", ["graph", "aph la", "Über", "x! q", "e-café", "o", "zz-none", "'s"])
def test_contains_is_the_exact_answer_served_by_the_ngram_index_or_not(texts: Texts, needle: str, served: list[int | None]) -> None:
    """At the head (index built, then a note inserted outside it and one deleted) and before the index."""
    head = {slug: body for slug, body in texts.bodies.items() if slug != "n004"} | {"zz": "graph graph lance"}
    expected = sorted(slug for slug, body in head.items() if body is not None and needle in body)
    with omnigraph.open(texts.uri, read_only=True) as graph:
        assert [row["n.slug"] for row in graph.query(SUBSTRING, name="has", params={"t": needle}).rows] == expected
        assert served == ([len(expected)] if len(needle) >= search.MIN_SUBSTRING else [])
        lacking = sorted(slug for slug, body in head.items() if body is not None and needle not in body)
        assert [row["n.slug"] for row in graph.query(SUBSTRING, name="lacks", params={"t": needle}).rows] == lacking
        plan = graph.explain_query(SUBSTRING, name="has", params={"t": needle})
        assert plan.filters[0]["index"] == ("body:ngram" if len(needle) >= search.MIN_SUBSTRING else None)
        before = sorted(slug for slug, body in texts.bodies.items() if body is not None and needle in body)
        rows = graph.query(SUBSTRING, name="has", params={"t": needle}, at=texts.exact_commit).rows
        assert [row["n.slug"] for row in rows] == before
        assert graph.explain_query(SUBSTRING, name="has", params={"t": needle}, at=texts.exact_commit).filters[0]["index"] is None
    assert len(served) == (1 if len(needle) >= search.MIN_SUBSTRING else 0)  # not at the commit before the index


def test_contains_finding_more_rows_than_the_bound_scans_the_table(
    texts: Texts, served: list[int | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "SUBSTRING_ROWS", 5)
    head = {slug: body for slug, body in texts.bodies.items() if slug != "n004"} | {"zz": "graph graph lance"}
    expected = sorted(slug for slug, body in head.items() if body is not None and "graph" in body)
    with omnigraph.open(texts.uri, read_only=True) as graph:
        assert [row["n.slug"] for row in graph.query(SUBSTRING, name="has", params={"t": "graph"}).rows] == expected
    assert served == [None] and len(expected) > 5


def test_the_ngram_index_serves_contains_through_the_cli(texts: Texts, tmp_path: Path) -> None:
    source = tmp_path / "q.gq"
    source.write_text(SUBSTRING, encoding="utf-8")
    args = ["query", "--query", str(source), "--name", "has", "--params", json.dumps({"t": "lance"})]
    shown = CliRunner().invoke(cli, [*args, "--explain", texts.uri], catch_exceptions=False)
    assert 'filter $n.body contains "lance": applied after the scan, served by body:ngram' in shown.output
    ran = CliRunner().invoke(cli, [*args, "--json", texts.uri], catch_exceptions=False)
    head = {slug: body for slug, body in texts.bodies.items() if slug != "n004"} | {"zz": "graph graph lance"}
    assert [row["n.slug"] for row in json.loads(ran.output)["rows"]] == sorted(s for s, b in head.items() if b and "lance" in b)


def test_nodes_tied_at_the_index_cut_are_ranked_by_id_as_without_it(tmp_path: Path) -> None:
    """40 documents at one vector: the index gives 32 of them in its own order, and the answer must
    still be the lowest ids (the candidates stop short of the farthest distance the index gave)."""
    uri = str(tmp_path / "tied")
    with omnigraph.init(uri, "node Doc { slug: String @key  embedding: Vector(2) @index }") as graph:
        graph.load([{"type": "Doc", "data": {"slug": f"d{i:02d}", "embedding": [1.0, 1.0]}} for i in reversed(range(40))], mode="append")
    optimized = CliRunner().invoke(cli, ["optimize", "--declared-indexes", "--json", uri], catch_exceptions=False)
    assert optimized.exit_code == 0, optimized.output
    source = "query q() { match { $d: Doc } return { $d.slug } order { nearest($d.embedding, [1.0, 1.0]) } limit 2 }"
    with omnigraph.open(uri, read_only=True) as graph:
        assert [dict(search)["index"] for search in graph.explain_query(source).searches] == ["embedding_idx"]
        assert [row["d.slug"] for row in graph.query(source).rows] == ["d00", "d01"]


def test_a_text_matches_a_search_for_itself_whatever_its_case_mapping(tmp_path: Path) -> None:
    """``İ`` and a word-final ``Σ`` lower-case to other characters through ``str.lower`` than through
    DuckDB's ``lower``: the query's tokens and the stored texts' tokens must be lower-cased alike."""
    uri = str(tmp_path / "cases")
    bodies = {"n1": "İstanbul", "n2": "istanbul", "n3": "ΣΊΣΥΦΟΣ", "n4": "σίσυφος"}
    with omnigraph.init(uri, "node Note { slug: String @key  body: String? }") as graph:
        graph.load([{"type": "Note", "data": {"slug": slug, "body": body}} for slug, body in bodies.items()], mode="append")
        found = {}
        for text in ("İstanbul", "istanbul", "ΣΊΣΥΦΟΣ"):
            source = f'query q() {{ match {{ $n: Note  search($n.body, "{text}") }} return {{ $n.slug }} order {{ $n.slug }} }}'
            found[text] = [row["n.slug"] for row in graph.query(source).rows]
        scored = graph.query('query q() { match { $n: Note } return { $n.slug, bm25($n.body, "İstanbul") as s } order { $n.slug } }')
    assert found == {"İstanbul": ["n1", "n2"], "istanbul": ["n1", "n2"], "ΣΊΣΥΦΟΣ": ["n3"]}
    scores = {row["n.slug"]: row["s"] for row in scored.rows}
    assert scores["n1"] == scores["n2"] > 0 and scores["n3"] == scores["n4"] == 0
