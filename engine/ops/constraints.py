"""The schema's row constraints on a write's result, and probes of the ids a table already holds.

Row constraints (:func:`constraint_problems`). A write is described as a merge describes it: per
table the ids it inserts, updates (replaces) and deletes
(:class:`~omnigraph.engine.ops.merge_diff.TableChanges`) and the rows it brings in
(``incoming``, physical schema), put into the target snapshot's images. Checked before anything
is armed (every caller runs this in its ``prepare``):

* every incoming row keeps its type's ``@range``/``@check`` rules (nulls exempt);
* every composite ``@unique(p, q)`` value an incoming row has (no member null) is used by no other
  row of the resulting table: neither another incoming row nor a committed row the write keeps;
* for every edge type ``E: A -> B @card(min..max)``, every ``A`` node the write touches (an
  incoming ``A`` row, the source of an incoming ``E`` edge, or of a committed ``E`` edge it replaces
  or deletes) that the result keeps is the source of between ``min`` and ``max`` ``E`` edges of the
  result (committed edges kept plus incoming ones). A deleted source node is exempt.

Each failure is one problem document ``{table_key, id, kind, ..., fix}``, ``kind`` one of
``range_violation``, ``check_violation``, ``unique_violation`` (``property`` names the members,
``value`` their values) and ``cardinality_violation`` (``table_key``/``id`` the source node,
``edge``, ``count``, ``cardinality`` and ``via``: the edge ids of the write that touch it); each
also has ``what``, the problem in words after its type and id. Reads: per constrained table, the
committed rows that share a first member value with an incoming one, and per constrained edge
type the committed ``id``/``src`` of the touched sources.

A load's checks, inside ``prepare``. The value rules (``@range``/``@check``) and in-file
duplicates of composite ``@unique`` values are refused while the file is read
(:mod:`omnigraph.engine.records`). What needs committed state is checked here, per commit:

* strict insert / upsert chunks (:func:`check_chunk_constraints`): composite ``@unique`` against
  the committed rows the chunk keeps and ``@card`` of every source node the chunk touches (the
  row constraints above; an upsert's ids count as replacing committed rows of the same id);
* overwrite (:func:`check_overwrite_constraints`): ``@card`` of every source node of the result,
  when the file replaces the edge type's table or its source node table (the other side is read
  from the snapshot).

A load's refusal is ``bad_request`` "line N: ...; nothing was written" naming the type, the
property (or edge type), the id and the input line (for a ``@card`` problem of a node the file
does not hold: the line of the first of its edges in the file), with every problem in
``details["problems"]``.

Id probes: :func:`present_ids` answers which of a handful of ids a pinned table holds with one
filtered Lance scan. A chunked strict insert (``load --mode append --chunk-rows N``) must ask
before every chunk, and the table grows with every chunk, so asking chunk by chunk reads the
whole table once per chunk. :class:`ChunkProbe` asks once per table for every id the load has
left to insert there, and reuses that answer for the next chunk while the table has changed by
the load's own commit only: its pin is exactly one version past the one the previous chunk was
prepared on, on the same branch. Lance versions are consecutive, so no other commit landed in
between, and the load's own rows are none of the ids it has left (the file holds each id once).
Any other pin (a concurrent commit, a fork, an adopted out-of-band commit) is probed again, and
so is every retried attempt of a chunk. Either way the answer is what :func:`present_ids` on the
chunk's ids would return at that pin.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import BranchSnapshot, TableEntry
from omnigraph.engine.ops.merge_diff import TableChanges
from omnigraph.engine.records.record_set import RecordSet
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.values import table_violations
from omnigraph.engine.storage.lance_io import open_pinned

Problem = dict[str, Any]


def read_matching(graph: Graph, entry: TableEntry, columns: list[str], column: str, values: list[Any]) -> pa.Table:
    """The ``columns`` of the committed rows of ``entry`` whose ``column`` is one of ``values``."""
    dataset = open_pinned(graph.store, entry.image)
    wanted = pa.array(values, dataset.schema.field(column).type)
    return dataset.to_table(columns=columns, filter=pc.field(column).isin(wanted))


def _value_rules(graph: Graph, incoming: dict[str, pa.Table], source: str, target: str) -> list[Problem]:
    problems: list[Problem] = []
    for table_key, rows in incoming.items():
        table = graph.catalog.table(table_key)
        if not table.has_value_rules or rows.num_rows == 0:
            continue
        ids = rows.column("id").to_pylist()
        for violation in table_violations(table, rows):
            row_id = ids[violation.index]
            problems.append(
                {
                    "table_key": table_key,
                    "id": row_id,
                    "kind": violation.kind,
                    "property": violation.rule.property,
                    "value": violation.value,
                    "rule": violation.rule.describe(),
                    "what": violation.describe(),
                    "fix": f"{violation.describe()}: change {violation.rule.property} of {row_id!r} on {source} before it reaches {target}",
                }
            )
    return problems


def _normal(value: Any) -> Any:
    """Numerically equal floats (``-0.0`` and ``0.0``) are one value, as in ``@key`` ids."""
    return value + 0.0 if isinstance(value, float) else value


def _unique_problem(table_key: str, row_id: str, members: tuple[str, ...], values: tuple[Any, ...], other: str, source: str) -> Problem:
    names = ", ".join(members)
    return {
        "table_key": table_key,
        "id": row_id,
        "kind": "unique_violation",
        "property": names,
        "value": list(values),
        "existing_id": other,
        "what": f"({names}) value {list(values)!r} is already used by id {other!r} (@unique)",
        "fix": f"{table_key} {row_id!r} from {source} and {other!r} would both have ({names}) = {list(values)!r}: change one of them",
    }


def _composite_unique(
    graph: Graph, target: BranchSnapshot, changes: dict[str, TableChanges], incoming: dict[str, pa.Table], source: str
) -> list[Problem]:
    problems: list[Problem] = []
    for table_key, rows in incoming.items():
        table = graph.catalog.table(table_key)
        if not table.composite_unique or rows.num_rows == 0:
            continue
        ids = rows.column("id").to_pylist()
        change = changes.get(table_key)
        replaced = set(ids) | (set(change.deletes) if change else set())
        for members in table.composite_unique:
            owners: dict[tuple[Any, ...], str] = {}
            columns = [rows.column(name).to_pylist() for name in members]
            for row_id, values in sorted(zip(ids, zip(*columns, strict=True), strict=True), key=lambda pair: pair[0]):
                if any(value is None for value in values):
                    continue
                normal = tuple(_normal(value) for value in values)
                if normal in owners:
                    problems.append(_unique_problem(table_key, row_id, members, values, owners[normal], source))
                else:
                    owners[normal] = row_id
            if not owners:
                continue
            firsts = sorted({key[0] for key in owners}, key=repr)
            hits = read_matching(graph, target.table(table_key), ["id", *members], members[0], firsts)
            stored = zip(hits.column("id").to_pylist(), zip(*(hits.column(m).to_pylist() for m in members), strict=True), strict=True)
            for existing_id, values in sorted(stored, key=lambda pair: pair[0]):
                owner = owners.get(tuple(_normal(value) for value in values))
                if owner is not None and existing_id not in replaced:
                    problems.append(_unique_problem(table_key, owner, members, values, existing_id, source))
    return problems


def _touched_sources(
    graph: Graph, target: BranchSnapshot, edge: TableDef, change: TableChanges | None, rows: pa.Table | None, node_rows: pa.Table | None
) -> tuple[dict[str, list[str]], set[str]]:
    """The source node ids an edge type's write touches, and the committed edges it removes.

    Each source id comes with the write's edge ids from it; the removed edges are the ids of
    committed edges the write replaces or deletes.
    """
    via: dict[str, list[str]] = {}
    removed = set(change.deletes) | set(change.updates) if change else set()
    if rows is not None:
        for edge_id, src in zip(rows.column("id").to_pylist(), rows.column("src").to_pylist(), strict=True):
            via.setdefault(src, []).append(edge_id)
            removed.add(edge_id)
    if change and (change.deletes or change.updates):
        old = read_matching(graph, target.table(edge.table_key), ["id", "src"], "id", sorted(set(change.deletes) | set(change.updates)))
        for edge_id, src in zip(old.column("id").to_pylist(), old.column("src").to_pylist(), strict=True):
            via.setdefault(src, []).append(edge_id)
    if node_rows is not None:
        for node_id in node_rows.column("id").to_pylist():
            via.setdefault(node_id, [])
    return via, removed


def _cardinality(
    graph: Graph, target: BranchSnapshot, changes: dict[str, TableChanges], incoming: dict[str, pa.Table], source: str
) -> list[Problem]:
    problems: list[Problem] = []
    for edge in graph.catalog.tables():
        if edge.kind != "edge" or not edge.cardinality.constrains:
            continue
        node_key = f"node:{edge.from_type}"
        rows = incoming.get(edge.table_key)
        via, removed = _touched_sources(graph, target, edge, changes.get(edge.table_key), rows, incoming.get(node_key))
        node_change = changes.get(node_key)
        for node_id in node_change.deletes if node_change else ():
            via.pop(node_id, None)
        if not via:
            continue
        counts: Counter[str] = Counter()
        kept = read_matching(graph, target.table(edge.table_key), ["id", "src"], "src", sorted(via))
        for edge_id, src in zip(kept.column("id").to_pylist(), kept.column("src").to_pylist(), strict=True):
            if edge_id not in removed:
                counts[src] += 1
        if rows is not None:
            counts.update(src for src in rows.column("src").to_pylist() if src in via)
        for node_id in sorted(via):
            count = counts[node_id]
            if edge.cardinality.allows(count):
                continue
            card = edge.cardinality.describe()
            problems.append(
                {
                    "table_key": node_key,
                    "id": node_id,
                    "kind": "cardinality_violation",
                    "edge": edge.type_name,
                    "count": count,
                    "cardinality": card,
                    "via": sorted(via[node_id]),
                    "what": cardinality_text(edge.type_name, count, card),
                    "fix": f"{edge.from_type} {node_id!r} would be the source of {count} {edge.type_name} edge(s), "
                    f"outside @card({card}): add or remove {edge.type_name} edges from it in {source}",
                }
            )
    return problems


def cardinality_text(edge_type: str, count: int, card: str) -> str:
    """How a ``@card`` problem reads after the source node's type and id."""
    return f"would be the source of {count} {edge_type} edge(s), outside @card({card})"


def constraint_problems(
    graph: Graph, target: BranchSnapshot, changes: dict[str, TableChanges], incoming: dict[str, pa.Table], source: str
) -> list[Problem]:
    """Every value-rule, composite-``@unique`` and ``@card`` problem of a write's result.

    The write puts ``changes`` (with the rows ``incoming``) into ``target`` (see the module
    docstring); ``source`` names the change in the fixes.
    """
    return (
        _value_rules(graph, incoming, source, target.branch)
        + _composite_unique(graph, target, changes, incoming, source)
        + _cardinality(graph, target, changes, incoming, source)
    )


FILTER_IDS = 8192
"""Up to this many ids are probed with a Lance filter; more are matched while streaming ``id``."""
MIN_PROBE_ROWS = 65_536
"""The fewest streamed rows matched at once against a large probe."""


def present_ids(graph: Graph, entry: TableEntry, ids: list[str] | pa.Array) -> set[str]:
    """The subset of ``ids`` present in the pinned image of ``entry``.

    Many ids are matched against the streamed ``id`` column in slices of at least as many rows
    as there are ids (and :data:`MIN_PROBE_ROWS`): each match builds a hash set of the ids, so
    that cost stays proportional to the rows read, and a slice holds no more than the ids do.
    """
    if not len(ids):
        return set()
    wanted = ids if isinstance(ids, pa.Array) else pa.array(ids, pa.utf8())
    dataset = open_pinned(graph.store, entry.image)
    if len(wanted) <= FILTER_IDS:
        found = dataset.to_table(columns=["id"], filter=pc.field("id").isin(wanted))
        return set(found.column("id").to_pylist())
    present: set[str] = set()
    for column in _slices(dataset.to_batches(columns=["id"]), max(len(wanted), MIN_PROBE_ROWS)):
        present.update(column.filter(pc.is_in(column, value_set=wanted)).to_pylist())
    return present


def _slices(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.Array]:
    """The first column of ``batches`` regrouped into arrays of at least ``rows`` rows.

    The last one may be shorter.
    """
    held: list[pa.Array] = []
    count = 0
    for batch in batches:
        held.append(batch.column(0))
        count += batch.num_rows
        if count >= rows:
            yield pa.concat_arrays(held)
            held, count = [], 0
    if held:
        yield pa.concat_arrays(held)


class _Answer(msgspec.Struct, frozen=True):
    """At ``pin`` (table branch, version), the ids from row ``start`` on that the table holds."""

    pin: tuple[str | None, int]
    start: int
    present: frozenset[str]


class ChunkProbe:
    """Existing ids for the chunks of one chunked strict insert (module docstring).

    Call :meth:`existing` from each chunk's prepare step and :meth:`landed` once the chunk's
    commit is published.
    """

    def __init__(self, graph: Graph) -> None:
        self._graph = graph
        self._answers: dict[str, _Answer] = {}
        self._prepared: dict[str, _Answer] = {}

    def existing(self, entry: TableEntry, ids: pa.Array, start: int, remaining: Callable[[], pa.Array]) -> set[str]:
        """The chunk's ``ids`` that the pinned table holds.

        ``start`` is the chunk's first row in the table; ``remaining()`` gives the ids the load
        has left to insert into it from there on, probed only when no answer holds.
        """
        pin = (entry.table_branch, entry.table_version)
        answer = self._answers.get(entry.table_key)
        retried = entry.table_key in self._prepared  # prepared before, never landed: probe afresh
        if answer is None or retried or answer.pin != pin or answer.start > start:
            answer = _Answer(pin, start, frozenset(present_ids(self._graph, entry, remaining())))
        self._prepared[entry.table_key] = answer
        if not answer.present:
            return set()
        mine = pa.array(sorted(answer.present), pa.utf8())
        return set(mine.filter(pc.is_in(mine, value_set=ids)).to_pylist())

    def landed(self, stops: dict[str, int]) -> None:
        """The last prepared chunk was published; ``stops`` is where it ended in each table.

        Each of its tables is expected exactly one version further on the same branch (a
        chunk that forked an inherited table leaves it on another branch: never expected, so
        the fork is probed afresh). None of ``present`` was in the chunk: it would have been
        a key conflict.
        """
        for table_key, answer in self._prepared.items():
            branch, version = answer.pin
            self._answers[table_key] = _Answer((branch, version + 1), stops[table_key], answer.present)
        self._prepared.clear()


_LOAD = "the load"


def _constrained(catalog: Catalog, table_keys: set[str]) -> bool:
    """Whether a write to ``table_keys`` can break a composite ``@unique`` or a ``@card``."""
    for table in catalog.tables():
        if table.table_key in table_keys and table.composite_unique:
            return True
        if table.kind == "edge" and table.cardinality.constrains and {table.table_key, f"node:{table.from_type}"} & table_keys:
            return True
    return False


def check_chunk_constraints(
    graph: Graph,
    snapshot: BranchSnapshot,
    records: RecordSet,
    ranges: dict[str, tuple[int, int]],
    incoming: dict[str, pa.Table],
    *,
    upsert: bool,
) -> None:
    """Refuse a strict-insert or upsert chunk that breaks a composite ``@unique`` or a ``@card``.

    The chunk is rows ``ranges`` of ``records``, as ``incoming`` (see the module docstring).
    """
    if not _constrained(graph.catalog, set(incoming)):
        return
    changes = {}
    for table_key, rows in incoming.items():
        ids = rows.column("id").to_pylist()
        changes[table_key] = TableChanges(table_key, updates=ids) if upsert else TableChanges(table_key, inserts=ids)
    problems = constraint_problems(graph, snapshot, changes, incoming, _LOAD)
    if problems:
        raise _refusal(problems, records, ranges)


def check_overwrite_constraints(graph: Graph, snapshot: BranchSnapshot, records: RecordSet) -> None:
    """Refuse an overwrite whose result leaves a source node outside its edge type's ``@card``."""
    in_file = set(records.table_keys())
    problems: list[Problem] = []
    for edge in graph.catalog.tables():
        node_key = f"node:{edge.from_type}"
        if edge.kind != "edge" or not edge.cardinality.constrains or not {edge.table_key, node_key} & in_file:
            continue
        nodes = _ids(graph, snapshot, records, node_key, "id", in_file)
        sources = _ids(graph, snapshot, records, edge.table_key, "src", in_file)
        counts = Counter(sources)
        card = edge.cardinality.describe()
        for node_id in sorted(nodes):
            if not edge.cardinality.allows(counts[node_id]):
                problems.append(
                    {
                        "table_key": node_key,
                        "id": node_id,
                        "kind": "cardinality_violation",
                        "edge": edge.type_name,
                        "count": counts[node_id],
                        "cardinality": card,
                        "via": [],
                        "what": cardinality_text(edge.type_name, counts[node_id], card),
                    }
                )
    if problems:
        ranges = {key: (0, records.num_rows(key)) for key in records.table_keys()}
        raise _refusal(problems, records, ranges)


def _ids(graph: Graph, snapshot: BranchSnapshot, records: RecordSet, table_key: str, column: str, in_file: set[str]) -> list[str]:
    """One column of a table of the result: the file's when it replaces the table, else the snapshot's."""
    if table_key in in_file:
        return list(records.column(table_key, column).to_pylist())
    dataset = open_pinned(graph.store, snapshot.table(table_key).image)
    return list(dataset.to_table(columns=[column]).column(column).to_pylist())


def _line_of(records: RecordSet, ranges: dict[str, tuple[int, int]], table_key: str, column: str, value: str) -> int | None:
    """The input line of the first row of the loaded span of ``table_key`` whose ``column`` is ``value``."""
    if table_key not in ranges:
        return None
    values = records.column(table_key, column, *ranges[table_key])
    at = pc.index(values, pa.scalar(value, pa.utf8())).as_py()
    if at < 0:
        return None
    return int(records.column(table_key, "line", *ranges[table_key])[at].as_py())


def _line(problem: Problem, records: RecordSet, ranges: dict[str, tuple[int, int]]) -> int | None:
    line = _line_of(records, ranges, problem["table_key"], "id", problem["id"])
    if line is None and problem["kind"] == "cardinality_violation":
        line = _line_of(records, ranges, f"edge:{problem['edge']}", "src", problem["id"])
    return line


def _what(problem: Problem) -> str:
    return f"{problem['table_key'].split(':', 1)[1]} {problem['id']!r}: {problem['what']}"


def _refusal(problems: list[Problem], records: RecordSet, ranges: dict[str, tuple[int, int]]) -> BadRequest:
    documented: list[dict[str, Any]] = []
    for problem in problems:
        kept = {key: value for key, value in problem.items() if key != "fix"}
        documented.append({**kept, "line": _line(problem, records, ranges)})
    documented.sort(key=lambda p: (p["line"] is None, p["line"] or 0, p["table_key"], p["id"]))
    first = documented[0]
    more = f" (and {len(documented) - 1} more problems)" if len(documented) > 1 else ""
    where = f"line {first['line']}: " if first["line"] is not None else ""
    details = {
        "line": first["line"],
        "type_name": first["table_key"].split(":", 1)[1],
        "id": first["id"],
        "kind": first["kind"],
        "property": first.get("property", first.get("edge")),
        "problems": json.loads(json.dumps(documented, default=str)),
    }
    return BadRequest(f"{where}{_what(first)}{more}; nothing was written", details)
