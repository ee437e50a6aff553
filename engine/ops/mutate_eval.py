"""One evaluation of a bound ``.gq`` query over one branch snapshot: the rows it stages.

Statements run in order over the committed snapshot plus the query's own pending rows
(read-your-writes: a pending row shadows the committed row with its id, a pending delete hides
it). Per table the evaluation stages strict inserts (unkeyed inserts, by id), upserts (keyed
inserts, updated rows) and deleted ids; a node delete also deletes every edge whose ``src`` or
``dst`` is a deleted node. A write query's result is checked before anything is armed: strict
ids must be absent (``key_conflict``), then edge endpoints, ``@unique`` and the other row
constraints (``@range``, ``@check``, composite ``@unique``, ``@card``, deletes included) on the
merged result (:func:`omnigraph.engine.ops.merge.check_merged`, ``bad_request`` naming the
statement line); a delete-only query is checked against ``@card`` minimums only. The
staged rows of each table are held to the per-commit limits (:mod:`omnigraph.engine.ops.write`; an
update's committed matches count before they are read, Blob cells by their sizes, and an update
rewrites the Blob payloads of the rows it matches, :mod:`omnigraph.engine.ops.blobs`). The
evaluation reads the snapshot only; a re-prepare starts a new one. A chunked evaluation (a :class:`Window`) takes only the next ids
of each statement's committed matches, ids ascending.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
from lance.blob import Blob

from omnigraph.engine.errors import BadRequest, KeyConflict
from omnigraph.engine.gq.checker import BoundQuery, BoundStatement, Condition
from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import BranchSnapshot
from omnigraph.engine.ops.blobs import blob_properties, check_cells, copy_external, plan_staging, split_alone, staged_bytes
from omnigraph.engine.ops.constraints import constraint_problems, present_ids
from omnigraph.engine.ops.merge import check_merged
from omnigraph.engine.ops.merge_diff import TableChanges
from omnigraph.engine.ops.write import MAX_ARROW_BYTES, AloneRow, LimitWording, TableWrite, check_table
from omnigraph.engine.records.parse import EdgeRow, NodeRow, rows_to_arrow
from omnigraph.engine.schema.ids import derive_node_id, empty_key_member
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.storage.blobs import ROW_ID, materialize, stored_sizes, stored_values
from omnigraph.engine.storage.lance_io import open_pinned

Row = NodeRow | EdgeRow


class Affected(msgspec.Struct, frozen=True):
    """What a mutation touched, by kind (a node delete's edges count as edges).

    ``nodes``/``edges`` count per statement, as graph tools do: each statement adds the rows it
    inserted, updated or deleted, so "insert X, then update X" is 2. ``distinct_nodes``/
    ``distinct_edges`` count each row once (the rows the commit writes or deletes).
    """

    nodes: int
    edges: int
    distinct_nodes: int
    distinct_edges: int


class Window(msgspec.Struct, frozen=True):
    """Which committed matches a chunked evaluation takes (:mod:`omnigraph.engine.ops.mutate`).

    The first ``limit`` ids greater than ``after`` (all ids when ``after`` is None), ids
    ascending.
    """

    after: str | None
    limit: int


@dataclass
class _Pending:
    """A table's staged rows: strict inserts and upserts by id (insertion order), deleted ids."""

    table: TableDef
    strict: dict[str, Row] = field(default_factory=dict)
    upserts: dict[str, Row] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    deleted_at: dict[str, int] = field(default_factory=dict)
    """The statement line that deleted each id (the first one)."""

    def delete(self, ids: Iterable[str], line: int) -> None:
        for row_id in ids:
            self.deleted.add(row_id)
            self.deleted_at.setdefault(row_id, line)

    def rows(self) -> Iterable[Row]:
        yield from self.strict.values()
        yield from self.upserts.values()

    def staged(self) -> int:
        return len(self.strict) + len(self.upserts)

    def get(self, row_id: str) -> Row | None:
        return self.strict.get(row_id) or self.upserts.get(row_id)


class Evaluation:
    """One evaluation of a bound query over one snapshot (see the module docstring).

    ``ids`` holds the generated id of each strict insert without an explicit id, by statement
    index: minted once per mutation, so every re-prepare attempts the same ids.
    """

    def __init__(self, graph: Graph, snapshot: BranchSnapshot, ids: dict[int, str], window: Window | None = None) -> None:
        self._graph = graph
        self._snapshot = snapshot
        self._ids = ids
        self._window = window
        self.window_last: str | None = None
        """With a window: the greatest id it took, None if it took none."""
        self._pending: dict[str, _Pending] = {}
        self._per_statement = {"node": 0, "edge": 0}

    def _state(self, table: TableDef) -> _Pending:
        return self._pending.setdefault(table.table_key, _Pending(table))

    def run(self, bound: BoundQuery) -> Evaluation:
        """Run every statement in order, then check a write query's result; returns ``self``."""
        for index, statement in enumerate(bound.statements):
            if statement.verb == "insert":
                self._insert(index, statement)
            elif statement.verb == "update":
                self._update(statement)
            else:
                self._delete(statement)
        if bound.kind == "write":
            self._validate()
        else:
            self._validate_deletes()
        return self

    # -- statements --------------------------------------------------------------------------

    def _insert(self, index: int, statement: BoundStatement) -> None:
        table, values = statement.table, dict(statement.values)
        explicit = values.pop("id", None)
        props = {prop.name: values[prop.name] for prop in table.properties}
        state = self._state(table)
        if table.key is not None:
            empty = empty_key_member(table, props)
            if empty is not None:
                raise BadRequest(
                    f"line {statement.line}: {table.type_name}.{empty} is empty: a @key value must be a non-empty string",
                    {"line": statement.line, "type_name": table.type_name, "property": empty},
                )
            row_id = derive_node_id(table, props)
            if explicit is not None and explicit != row_id:
                raise BadRequest(
                    f"line {statement.line}: id {explicit!r} does not match the id {row_id!r} derived from the @key of {table.type_name}",
                    {"line": statement.line, "type_name": table.type_name, "id": explicit, "derived_id": row_id},
                )
            state.upserts[row_id] = NodeRow(statement.line, table.type_name, row_id, props)
            self._per_statement[table.kind] += 1
            return
        row_id = explicit or self._ids[index]
        if state.get(row_id) is not None:
            raise BadRequest(
                f"line {statement.line}: the query inserts {table.type_name} id {row_id!r} twice",
                {"line": statement.line, "type_name": table.type_name, "id": row_id},
            )
        if table.kind == "node":
            state.strict[row_id] = NodeRow(statement.line, table.type_name, row_id, props)
        else:
            state.strict[row_id] = EdgeRow(statement.line, table.type_name, row_id, values["src"], values["dst"], props)
        self._per_statement[table.kind] += 1

    def _update(self, statement: BoundStatement) -> None:
        table, state = statement.table, self._state(statement.table)
        assert statement.where is not None
        for row in self._matching(statement, state):
            values = {**row.values, **statement.values}
            updated = NodeRow(statement.line, table.type_name, row.id, values)
            if row.id in state.strict:
                state.strict[row.id] = updated
            else:
                state.upserts[row.id] = updated
            self._per_statement[table.kind] += 1

    def _delete(self, statement: BoundStatement) -> None:
        table, state = statement.table, self._state(statement.table)
        ids = sorted(self._committed_ids(statement, state))  # a delete-only query stages no rows
        state.delete(ids, statement.line)
        self._per_statement[table.kind] += len(ids)
        if table.kind != "node" or not ids:
            return
        for edge in self._graph.catalog.tables():
            columns = [c for c, t in (("src", edge.from_type), ("dst", edge.to_type)) if edge.kind == "edge" and t == table.type_name]
            if not columns:
                continue
            edge_state = self._state(edge)
            predicate = None
            for column in columns:
                test = pc.field(column).isin(pa.array(ids, pa.utf8()))
                predicate = test if predicate is None else predicate | test
            hits = set(self._scan(edge, predicate, ["id"]).column("id").to_pylist())
            self._per_statement["edge"] += len(hits - edge_state.deleted)  # read-your-writes: gone already
            edge_state.delete(sorted(hits), statement.line)

    # -- reading -----------------------------------------------------------------------------

    def _scan(self, table: TableDef, predicate: pc.Expression, columns: list[str] | None) -> pa.Table:
        entry = self._snapshot.table(table.table_key)
        dataset = open_pinned(self._graph.store, entry.image)
        return dataset.to_table(columns=columns, filter=predicate)

    def _committed_ids(self, statement: BoundStatement, state: _Pending) -> list[str]:
        """Ids of committed rows that ``where`` matches, less those pending rows shadow or delete.

        A pending row shadows the committed row with its id, a pending delete removes it; only
        the ``id`` column is read.
        """
        condition = statement.where
        assert condition is not None
        shadowed = set(state.strict) | set(state.upserts) | state.deleted
        scanned = self._scan(statement.table, condition.expression(), ["id"]).column("id").to_pylist()
        ids = [row_id for row_id in scanned if row_id not in shadowed]
        if self._window is None:
            return ids
        after = self._window.after
        taken = sorted(row_id for row_id in ids if after is None or row_id > after)[: self._window.limit]
        self.window_last = taken[-1] if taken else None
        return taken

    def _matching(self, statement: BoundStatement, state: _Pending) -> list[Row]:
        """Rows that ``where`` matches: committed ones (see :meth:`_committed_ids`), then pending ones.

        Committed matches would become new staged rows, so they are counted against the table's
        row limit before their rows are read.
        """
        condition = statement.where
        assert condition is not None
        table = statement.table
        ids = self._committed_ids(statement, state)
        wording = _limit_wording(f"line {statement.line}: the update matches too many rows")
        check_table(table.table_key, wording, rows=state.staged() + len(ids))
        committed: list[Row] = []
        if ids:
            committed = self._stored(table, ids, state, wording, statement.line)
        pending = [row for row in state.rows() if _matches(condition, row)]
        return committed + pending

    def _stored(self, table: TableDef, ids: list[str], state: _Pending, wording: LimitWording, line: int) -> list[Row]:
        """The committed rows ``ids`` (ids ascending), each Blob cell as managed bytes, except in rows staged alone.

        Before any payload is read, every stored cell is held to the per-cell limit, and the
        stored sizes of the rows that will not be staged alone, with their other columns and the
        table's pending rows, to the Arrow limit (an update rewrites the payloads of the rows it
        matches, changed or not). A row that counts more than the limit on its own keeps
        :data:`CARRIED` for its Blob cells: they are read when its own commit is written
        (:meth:`_restage`).
        """
        predicate = pc.field("id").isin(pa.array(ids, pa.utf8()))
        names = blob_properties(table)
        if not names:
            return _rows(table, self._scan(table, predicate, None), line)
        dataset = open_pinned(self._graph.store, self._snapshot.table(table.table_key).image)
        stored = dataset.to_table(filter=predicate, with_row_id=True)
        pending = rows_to_arrow(table, list(state.rows()), with_pk=self._graph.profile.router.with_pk)
        per_row = [0] * stored.num_rows
        for name in names:
            sizes = stored_sizes(dataset, stored, name)
            check_cells(table, name, stored, sizes)
            per_row = [total + size for total, size in zip(per_row, sizes, strict=True)]
        others = stored.drop_columns(names)
        total = int(others.nbytes)  # bounds each row's own: a row is sliced only when it may be alone
        together = [
            i
            for i, size in enumerate(per_row)
            if size + total <= MAX_ARROW_BYTES or size + int(others.slice(i, 1).nbytes) <= MAX_ARROW_BYTES
        ]
        budget = plan_staging(self._graph.store, table, pending, MAX_ARROW_BYTES).counted
        budget += int(others.take(pa.array(together, pa.int64())).nbytes) + sum(per_row[i] for i in together)
        check_table(table.table_key, wording, arrow_bytes=budget)
        alone = sorted(set(range(stored.num_rows)) - set(together))
        rows = _rows(table, materialize(dataset, stored.take(pa.array(together, pa.int64())), names), line)
        if alone:
            carried = others.take(pa.array(alone, pa.int64())).drop_columns([ROW_ID])
            rows += _rows(table, carried, line, carried=names)
        return sorted(rows, key=lambda row: row.id)

    def _restage(self, table: TableDef, row: Row) -> pa.Table:
        """``row`` as a table of one row, its :data:`CARRIED` Blob cells read now from the snapshot (one row's payloads)."""
        names = [name for name in blob_properties(table) if row.values[name] is CARRIED]
        dataset = open_pinned(self._graph.store, self._snapshot.table(table.table_key).image)
        stored = dataset.to_table(columns=names, filter=pc.field("id") == row.id, with_row_id=True)
        payloads = materialize(dataset, stored, names)
        staged = rows_to_arrow(table, [row], with_pk=self._graph.profile.router.with_pk)
        for name in names:
            index = staged.schema.get_field_index(name)
            staged = staged.set_column(index, staged.schema.field(name), payloads.column(name))
        return copy_external(self._graph.store, table, staged)

    # -- result ------------------------------------------------------------------------------

    def _validate(self) -> None:
        for key, state in sorted(self._pending.items()):
            if not state.strict:
                continue
            existing = present_ids(self._graph, self._snapshot.table(key), list(state.strict))
            if existing:
                raise KeyConflict(state.table.kind, state.table.type_name, min(existing))
        problems = check_merged(self._graph, self._snapshot, self._changes(), self._arrow())
        if problems:
            raise _invalid(problems, self._lines())

    def _changes(self) -> dict[str, TableChanges]:
        return {
            key: TableChanges(key, inserts=sorted(state.strict), updates=sorted(state.upserts), deletes=sorted(state.deleted))
            for key, state in self._pending.items()
            if state.staged() or state.deleted
        }

    def _lines(self) -> dict[tuple[str, str], int]:
        """The statement line of every staged row and deleted id, by (table key, id)."""
        lines = {(key, row.id): row.line for key, state in self._pending.items() for row in state.rows()}
        lines.update({(key, row_id): line for key, state in self._pending.items() for row_id, line in state.deleted_at.items()})
        return lines

    def _validate_deletes(self) -> None:
        """Check a delete-only query's result against ``@card`` only.

        A delete-only query cascades edges, so it leaves no endpoint missing and repeats no
        value: only ``@card`` minimums of the sources it removes edges from can break.
        """
        problems = constraint_problems(self._graph, self._snapshot, self._changes(), {}, "the mutation")
        if problems:
            stripped = [{key: value for key, value in p.items() if key != "fix"} for p in problems]
            raise _invalid(sorted(stripped, key=lambda p: (p["table_key"], p["id"])), self._lines())

    def _arrow(self) -> dict[str, pa.Table]:
        with_pk = self._graph.profile.router.with_pk
        return {
            key: rows_to_arrow(state.table, list(state.rows()), with_pk=with_pk)
            for key, state in sorted(self._pending.items())
            if state.staged()
        }

    def affected(self) -> Affected:
        """Per statement, and distinct (staged plus deleted rows), nodes and edges."""

        def count(kind: str) -> int:
            return sum(len(s.deleted) + s.staged() for s in self._pending.values() if s.table.kind == kind)

        return Affected(self._per_statement["node"], self._per_statement["edge"], count("node"), count("edge"))

    def writes(self) -> tuple[TableWrite, ...]:
        """One ``merge`` write per table with staged or deleted rows, in table-key order.

        A staged row that counts more than the Arrow limit on its own is staged alone
        (:func:`omnigraph.engine.ops.blobs.plan_staging`); its external objects are copied when
        its own commit is written.
        """
        with_pk = self._graph.profile.router.with_pk
        store = self._graph.store
        writes = []
        for key, state in sorted(self._pending.items()):
            if not (state.staged() or state.deleted):
                continue
            wording = _limit_wording("the query stages too many rows")
            parts: dict[bool, pa.Table] = {}
            alone: list[AloneRow] = []
            counted = 0
            for upsert, rows in ((False, state.strict), (True, state.upserts)):
                carrying = [row for row in rows.values() if any(value is CARRIED for value in row.values.values())]
                alone += [AloneRow(partial(self._restage, state.table, row), upsert) for row in carrying]
                carried_ids = {row.id for row in carrying}
                table = rows_to_arrow(state.table, [row for row in rows.values() if row.id not in carried_ids], with_pk=with_pk)
                staging = plan_staging(store, state.table, table, MAX_ARROW_BYTES)
                together, singles = split_alone(table, staging)
                parts[upsert], counted = together, counted + staging.counted
                alone += [AloneRow(partial(copy_external, store, state.table, row), upsert) for row in singles]
            check_table(key, wording, rows=state.staged(), arrow_bytes=counted)
            strict, upserts = copy_external(store, state.table, parts[False]), copy_external(store, state.table, parts[True])
            check_table(key, wording, arrow_bytes=staged_bytes(store, state.table, strict) + staged_bytes(store, state.table, upserts))
            writes.append(
                TableWrite(key, "merge", strict, delete_ids=tuple(sorted(state.deleted)), upsert_rows=upserts, alone=tuple(alone))
            )
        return tuple(writes)


def _limit_wording(what: str) -> LimitWording:
    """A mutation's wording of the per-commit limits; ``what`` says what staged the rows."""
    return LimitWording(
        rows="{table_key}: " + what + ": {actual} rows in one commit exceed the limit of {limit}; nothing was "
        "written. An update or delete can run in chunks (omnigraph mutate with --chunk-rows {limit}: one commit "
        "per chunk of at most {limit} rows, not atomic as a whole), or narrow its where clause",
        arrow_bytes="{table_key}: {actual} bytes of Arrow data in one commit exceed the limit of {limit}; "
        "split the mutation into smaller ones",
    )


def _matches(condition: Condition, row: Row) -> bool:
    if condition.column == "id":
        return condition.matches(row.id)
    if condition.column in ("src", "dst"):
        return condition.matches(getattr(row, condition.column))
    return condition.matches(row.values.get(condition.column))


CARRIED = Blob.from_bytes(b"")
"""The value of a Blob cell an update carries in a row staged alone: read when the row is written."""


def _rows(table: TableDef, stored: pa.Table, line: int, carried: Sequence[str] = ()) -> list[Row]:
    """The rows of ``stored`` (ids ascending); the Blob properties ``carried`` (absent from ``stored``) hold :data:`CARRIED`."""
    columns = {name: stored_values(stored.column(name)) for name in stored.column_names}
    columns.update({name: [CARRIED] * stored.num_rows for name in carried})
    rows: list[Row] = []
    for index, row_id in enumerate(columns["id"]):
        values = {prop.name: columns[prop.name][index] for prop in table.properties}
        if table.kind == "node":
            rows.append(NodeRow(line, table.type_name, row_id, values))
        else:
            rows.append(EdgeRow(line, table.type_name, row_id, columns["src"][index], columns["dst"][index], values))
    return sorted(rows, key=lambda row: row.id)


def _line(problem: dict[str, Any], lines: dict[tuple[str, str], int]) -> int | None:
    """The statement line of a problem's row.

    For a ``@card`` problem whose node the query did not write, the line of the first of its
    edges the query wrote or deleted.
    """
    line = lines.get((problem["table_key"], problem["id"]))
    if line is None and problem["kind"] == "cardinality_violation":
        edge_key = f"edge:{problem['edge']}"
        found = [lines[(edge_key, edge_id)] for edge_id in problem["via"] if (edge_key, edge_id) in lines]
        line = min(found) if found else None
    return line


def _invalid(problems: list[dict[str, Any]], lines: dict[tuple[str, str], int]) -> BadRequest:
    """``bad_request`` naming the first problem and the statement line of its row.

    Every problem (with its ``line``) is in ``details.problems``.
    """
    problems = [{**problem, "line": _line(problem, lines)} for problem in problems]
    first = problems[0]
    what = f"{first['table_key']} {first['id']!r}: "
    if first["kind"] == "missing_endpoint":
        what += f"{first['column']} {first['node_id']!r} is not a {first['node_type']} node"
    elif first["kind"] == "unique_violation" and "what" not in first:
        what += f"{first['property']} value {first['value']!r} is already used by id {first['existing_id']!r} (@unique)"
    else:
        what += first["what"]
    more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
    safe = json.loads(json.dumps(problems, default=str))
    return BadRequest(f"line {first['line']}: the mutation is invalid: {what}{more}; nothing was written", {"problems": safe})
