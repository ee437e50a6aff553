"""``query --explain``: how a read query would run, without running it.

The query is parsed and checked exactly as :func:`omnigraph.engine.query.run.open_answer` does,
against the commit it would read; then, instead of executing, the plan is described from the
folded manifest and the pinned images' index lists (no table data is scanned, no traversal is
built):

- ``tables``: every table the query reads, with the Lance version it is pinned at, its row count
  from the manifest and the scalar indexes the image holds;
- ``variables``: per match variable, its table, the rows the manifest counts for it (the most the
  scan can give) and, when its ``@key`` members all equal constants, the single id it is looked
  up by (``id_lookup``: the scan is filtered on ``id``) and the BTREE on ``id`` that serves
  that filter (``id_index``: the engine's key index, None if the image has none);
- ``filters``: per comparison, whether it is pushed into the Lance scan (a column compared with a
  constant by ``= != < <= > >=``, not on an unsigned column, at most
  :data:`~omnigraph.engine.query.plan.MAX_PUSHED_PER_VARIABLE` per variable:
  :func:`~omnigraph.engine.query.plan.scan_pushed`) and the index that serves it (a BTREE on the
  column, for every operator but ``!=``); then each other condition (and/or/not, is null,
  a ``Bool`` operand, ``exists``/``count``), pushed when it reads the columns of one variable by
  such comparisons and null tests only (no unsigned or vector column; DuckDB hands all of it to
  the scan) and its columns still fit the variable's bound, never with a serving index,
  ``exists``/``count`` written with their blocks' clauses; ``after_joins`` when it compares two
  variables of the match and is applied once the joins that bind them are done
  (:func:`~omnigraph.engine.query.plan.crossing`);
- ``hops``: per traversal, the edge table, the direction (``out``, or ``both`` for
  ``$a <edge> $b``), the bounds, and the mode: ``join`` (bounds ``{1,1}``: the edge rows joined with
  both variables), ``probe`` (bounds ``{1,1}`` from a known end, ``start`` ``sources`` or
  ``destinations``: :mod:`omnigraph.engine.query.probe`) or ``breadth_first`` (a search over the
  table's adjacency, or in DuckDB one scan of the edges per hop filtered on the frontier,
  :mod:`omnigraph.engine.query.session`), starting from ``sources``, ``destinations`` or
  ``every source`` (:func:`omnigraph.engine.query.session.search_start`); ``estimated_rows`` is the edge table's
  row count, the most pairs one hop can give; ``edge_variable`` is the variable that binds each
  edge (``$a $k:edge $b``), else None. A bound edge is also listed in ``variables`` (its table is
  the edge table). ``stops_after``: for a breadth-first hop of a query that asks for any ``N``
  rows, the pair count after which the search stops
  (:func:`omnigraph.engine.query.session.stop_after`), else None. ``frontier_index``: the BTREE
  on the edge table's ``src`` or ``dst`` (the engine's key index,
  :mod:`omnigraph.engine.storage.key_indexes`) that serves the edge scan filtered on the ids a hop
  starts from: a probe's probed end, or for a directed breadth-first hop ``src`` (``dst`` when
  the search runs backwards), whose frontier is handed to each hop's edge scan; else None.
- ``searches``: per search function the query returns or orders by (``nearest``, ``bm25``) and
  per full-text match clause (``search``, ``match_text``, ``fuzzy``), the column it reads, whether
  the answer is ordered by it first (``ordering``) and the index that serves it
  (:mod:`omnigraph.engine.query.search`): for a ``nearest`` ordering the vector index that picks
  ``candidates`` rows (both None: every row's distance is computed, an exact scan); for ``bm25``
  the full-text index whose scores are read (None: the scores are computed from the text); a match
  clause is always evaluated on the rows scanned (``index`` None); an ``rrf`` names the columns
  of its two rankings (each listed on its own too) and is computed from them (``index`` None);
- ``executor``: ``direct`` when the query is answered from the rows its keyed variables reach,
  without a DuckDB statement (:func:`omnigraph.engine.query.direct.direct_plan`; the statement
  runs instead when a probe passes its bound, or when a variable-length traversal's adjacency
  does not fit the cache's bound); ``degrees`` when it counts a one-hop match over the whole
  graph without DuckDB, from the edge table's adjacency or its columns
  (:func:`omnigraph.engine.query.degrees.degree_plan`; the statement runs when the process
  holds no adjacency and the table is past ``COUNTED_EDGES`` rows); else ``statement``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import lance

from omnigraph.engine.gq.read_checker import (
    Block,
    BoundRead,
    Column,
    Compare,
    Condition,
    Const,
    Hop,
    Inverse,
    Junction,
    NullCheck,
    Operand,
    SubQuery,
    Truth,
)
from omnigraph.engine.gq.search import NearestScore, RrfScore, tokens
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import MAIN, BranchSnapshot
from omnigraph.engine.query.degrees import degree_plan
from omnigraph.engine.query.direct import direct_plan
from omnigraph.engine.query.plan import PUSHED_OPS, crossing, implied_ids, key_score, scan_columns, scan_pushed, scores
from omnigraph.engine.query.probe import End, probe_order
from omnigraph.engine.query.run import bind_read, tables_read
from omnigraph.engine.query.search import ranked_by, serving_index, substring_searches, text_index
from omnigraph.engine.query.session import SearchStart, search_start, stop_after
from omnigraph.engine.results import QueryPlan

INDEXED_OPS = PUSHED_OPS - {"!="}


def _blocks(block: Block) -> list[Block]:
    return [block, *(inner for nested in block.nested for inner in _blocks(nested))]


def _operand_text(bound: BoundRead, operand: Operand) -> str:
    if isinstance(operand, Const):
        return json.dumps(operand.value, default=str)
    return f"${bound.variables[operand.var].name}.{operand.column}"


def _indexes(dataset: lance.LanceDataset) -> list[dict[str, Any]]:
    found = [
        {"name": index.name, "columns": list(index.field_names), "type": index_type(index.type_url)} for index in dataset.describe_indices()
    ]
    return sorted(found, key=lambda index: index["name"])


def index_type(type_url: str) -> str:
    """The index kind a Lance index description's ``type_url`` names (``/lance.table.BTreeIndexDetails`` -> ``BTree``)."""
    return type_url.rsplit(".", 1)[-1].removesuffix("IndexDetails")


_PROBE_START: dict[End, SearchStart] = {"src": "sources", "dst": "destinations"}


def _filter(
    bound: BoundRead, compare: Compare, pushed: bool, indexes: dict[str, list[dict[str, Any]]], after_joins: bool, substring: str | None
) -> dict[str, Any]:
    """The plan entry of a comparison; ``substring`` names the n-gram index that serves it, if one does."""
    column = next((side for side in (compare.left, compare.right) if isinstance(side, Column)), None)
    table = bound.variables[column.var].table.table_key if column is not None else None
    serving = substring
    if pushed and column is not None and table is not None and compare.op in INDEXED_OPS:
        serving = _btree(indexes[table], column.column)
    text = f"{_operand_text(bound, compare.left)} {compare.op} {_operand_text(bound, compare.right)}"
    return {"filter": text, "table": table, "pushed_into_scan": pushed, "index": serving, "after_joins": after_joins}


def _frontier_index(bound: BoundRead, hop: Hop, mode: str, probed: End | None, indexes: dict[str, list[dict[str, Any]]]) -> str | None:
    """The BTREE that serves the edge scan of a hop filtered on the ids it starts from, if any.

    A probe reads the edges whose probed end (``src`` or ``dst``) is a known id; a directed
    breadth-first hop reads, per hop, the edges whose ``src`` (``dst`` backwards) is in the frontier.
    """
    if mode == "probe" and probed is not None:
        return _btree(indexes[hop.edge.table_key], probed)
    if mode != "breadth_first" or hop.undirected:
        return None
    near = "dst" if search_start(bound, hop) == "destinations" else "src"
    return _btree(indexes[hop.edge.table_key], near)


def _btree(indexes: list[dict[str, Any]], column: str) -> str | None:
    """The name of a BTREE among a table's ``indexes`` on ``column`` alone, None if there is none."""
    return next((i["name"] for i in indexes if i["columns"] == [column] and i["type"] == "BTree"), None)


def _condition(bound: BoundRead, condition: Condition, pushed: bool, after_joins: bool) -> dict[str, Any]:
    """The plan entry of a condition beyond a plain comparison (and/or/not, is null, a Bool, exists, count)."""
    columns = scan_columns(condition) if pushed else None
    table = bound.variables[columns[0].var].table.table_key if columns else None
    text = _condition_text(bound, condition)
    return {"filter": text, "table": table, "pushed_into_scan": pushed, "index": None, "after_joins": after_joins}


def _condition_text(bound: BoundRead, condition: Condition) -> str:
    if isinstance(condition, Compare):
        return f"{_operand_text(bound, condition.left)} {condition.op} {_operand_text(bound, condition.right)}"
    if isinstance(condition, Junction):
        return f"({_condition_text(bound, condition.left)} {condition.op} {_condition_text(bound, condition.right)})"
    if isinstance(condition, Inverse):
        return f"not {_condition_text(bound, condition.part)}"
    if isinstance(condition, NullCheck):
        return f"{_operand_text(bound, condition.operand)} is {'not ' if condition.negated else ''}null"
    if isinstance(condition, Truth):
        return _operand_text(bound, condition.operand)
    assert isinstance(condition, SubQuery)
    inner = _block_text(bound, condition.block)
    if condition.op is None:
        return f"exists {{ {inner} }}"
    assert condition.right is not None
    return f"count {{ {inner} }} {condition.op} {_operand_text(bound, condition.right)}"


def _block_text(bound: BoundRead, block: Block) -> str:
    """``block``'s clauses, roughly as written: bindings, traversals, comparisons, conditions, negations."""
    name = bound.variables
    parts = [f"${var.name}: {var.table.type_name}" for var in block.variables]
    parts += [
        f"${name[hop.src].name} {'<' if hop.undirected else ''}{hop.edge.type_name}{'>' if hop.undirected else ''}"
        f"{{{hop.min_hops},{hop.max_hops}}} ${name[hop.dst].name}"
        for hop in block.hops
    ]
    parts += [_condition_text(bound, part) for part in (*block.compares, *block.conditions)]
    parts += [f"not {{ {_block_text(bound, negation)} }}" for negation in block.negations]
    return "  ".join(parts)


def _searches(datasets: Mapping[str, lance.LanceDataset], snapshot: BranchSnapshot, bound: BoundRead) -> list[dict[str, Any]]:
    """Each search function of ``bound`` as ``explain`` shows it; ``datasets`` holds the opened image of every table the query reads."""
    ranked = ranked_by(bound)
    first = key_score(bound, bound.order[0]) if bound.order else None
    found = []
    for score in scores(bound):
        if isinstance(score, RrfScore):
            parts = [score.first, score.second]
            columns = ", ".join(f"${bound.variables[part.var].name}.{part.column}" for part in parts)
            found.append(_search("rrf", columns, bound.variables[score.first.var].table.table_key, score == first, None, None))
            continue
        var = bound.variables[score.var]
        key = var.table.table_key
        dataset = datasets[key]
        index, count = None, None
        if isinstance(score, NearestScore):
            indexed = serving_index(bound, {key: dataset}, {key: snapshot.table(key).row_count}) if score == ranked else None
            if indexed is not None:
                index, count = indexed.index, indexed.candidates
        elif score.query is not None and tokens(score.query):
            index = text_index(dataset, score.column)
        function = "nearest" if isinstance(score, NearestScore) else "bm25"
        found.append(_search(function, f"${var.name}.{score.column}", key, score == first, index, count))
    for block in _blocks(bound.block):
        for match in block.text_matches:
            var = bound.variables[match.var]
            found.append(_search(match.func, f"${var.name}.{match.column}", var.table.table_key, False, None, None))
    return found


def _search(function: str, column: str, table: str, ordering: bool, index: str | None, candidates: int | None) -> dict[str, Any]:
    return {"function": function, "column": column, "table": table, "ordering": ordering, "index": index, "candidates": candidates}


def explain_query(
    graph: Graph,
    query: str,
    *,
    name: str | None = None,
    params: dict[str, Any] | None = None,
    branch: str = MAIN,
    at: str | None = None,
) -> QueryPlan:
    """The plan of the read query ``name`` of ``query`` on ``branch`` (or its commit ``at``), not run (module docstring).

    Raises what :func:`omnigraph.engine.query.run.open_answer` raises before it executes: a syntax,
    type or parameter error, a mutation, an unknown branch or commit.
    """
    point, bound = bind_read(graph, query, name, params, branch, at)
    blocks = _blocks(bound.block)
    keys = sorted(tables_read(bound.block))
    with point.reading(graph.manifest):
        datasets = point.open_images(graph.manifest, keys)
        indexes = {key: _indexes(datasets[key]) for key in keys}
        searches = _searches(datasets, point.snapshot, bound)
    tables = []
    for key in keys:
        entry = point.snapshot.table(key)
        tables.append(
            {
                "table": key,
                "table_branch": entry.table_branch,
                "version": entry.table_version,
                "rows": entry.row_count,
                "indexes": indexes[key],
            }
        )
    looked_up = {var: node_id for block in blocks for var, node_id in implied_ids(block)}
    variables = [
        {
            "variable": f"${var.name}",
            "table": var.table.table_key,
            "estimated_rows": 1 if var.index in looked_up else point.snapshot.table(var.table.table_key).row_count,
            "id_lookup": looked_up.get(var.index),
            "id_index": _btree(indexes[var.table.table_key], "id") if var.index in looked_up else None,
        }
        for var in bound.variables
    ]

    def ngram_of(table_key: str, column: str) -> str | None:
        return next((i["name"] for i in indexes[table_key] if i["columns"] == [column] and i["type"] == "NGram"), None)

    substrings = substring_searches(bound, ngram_of)
    known = {var for var, _ in implied_ids(bound.block)} | {served.var for served in substrings}
    probes = {id(hop): end for hop, end in probe_order(bound, known)}
    hops = []
    for block in blocks:
        for hop in block.hops:
            single = hop.min_hops == hop.max_hops == 1
            probed = probes.get(id(hop))
            mode = "breadth_first" if not single else "join" if probed is None else "probe"
            start = search_start(bound, hop) if not single else None if probed is None else _PROBE_START[probed]
            hops.append(
                {
                    "edge": hop.edge.type_name,
                    "from": f"${bound.variables[hop.src].name}",
                    "to": f"${bound.variables[hop.dst].name}",
                    "edge_variable": None if hop.edge_var is None else f"${bound.variables[hop.edge_var].name}",
                    "direction": "both" if hop.undirected else "out",
                    "bounds": [hop.min_hops, hop.max_hops],
                    "mode": mode,
                    "start": start,
                    "stops_after": None if single else stop_after(bound, hop),
                    "frontier_index": _frontier_index(bound, hop, mode, probed, indexes),
                    "estimated_rows": point.snapshot.table(hop.edge.table_key).row_count,
                }
            )

    served: dict[tuple[int, str, Any], str] = {(s.var, s.column, s.text): s.index for s in substrings}
    filters: list[dict[str, Any]] = []
    for block in blocks:
        compares_pushed, conditions_pushed = scan_pushed(block)
        top = block is bound.block
        for compare, pushed in zip(block.compares, compares_pushed, strict=True):
            left, right = compare.left, compare.right
            text = (left.var, left.column, right.value) if isinstance(left, Column) and isinstance(right, Const) else None
            substring = served.get(text) if top and compare.op == "contains" and text is not None else None
            filters.append(_filter(bound, compare, pushed, indexes, top and crossing(compare) is not None, substring))
        for condition, pushed in zip(block.conditions, conditions_pushed, strict=True):
            filters.append(_condition(bound, condition, pushed, top and crossing(condition) is not None))
    executor = "direct" if direct_plan(bound) is not None else "degrees" if degree_plan(bound) is not None else "statement"
    return QueryPlan(
        bound.name, branch, point.commit, tuple(tables), tuple(variables), tuple(hops), tuple(filters), tuple(searches), executor
    )
