"""JSONL graph records (the load input format, also the export output format) as typed rows.

One record per line::

    {"type": "Person", "data": {"name": "Alice", "age": 30}}
    {"edge": "Knows", "from": "Alice", "to": "Bob", "data": {"since": 19723}}

:func:`parse_jsonl` validates everything that does not need committed state and returns typed
rows (:class:`NodeRow`, :class:`EdgeRow`), one line at a time: it is the reference parser, whose
results and errors the load's columnar reader (:mod:`omnigraph.engine.records.read`) reproduces,
and which that reader uses itself (:func:`parse_lines`) for the lines its fast path does not
take. :func:`check_endpoints` checks edge endpoints against the file plus committed state.
Every refusal is a ``BadRequest`` whose message starts ``line N:`` and whose details hold
``{"line": N, ...}``.

:func:`rows_to_arrow` converts rows to physical Arrow tables and :func:`arrow_to_records` stored
Arrow tables back to JSONL records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import msgspec
import pyarrow as pa
from lance.blob import BlobType as LanceBlobType
from lance.blob import blob_array

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.records.jsonl_blocks import BOM
from omnigraph.engine.records.record_set import EdgeEnds, check_edge_endpoints
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.ids import canonical_scalar, derive_node_id, empty_key_member, new_ulid
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import EnumType
from omnigraph.engine.schema.values import InvalidValue, coerce_property, export_value, row_violation

__all__ = ["EdgeRow", "NodeRow", "ParsedFile", "arrow_to_records", "check_endpoints", "parse_jsonl", "parse_lines", "rows_to_arrow"]


class NodeRow(msgspec.Struct, frozen=True):
    """A validated node record: ``values`` holds every declared property, coerced (None = null)."""

    line: int
    type_name: str
    id: str
    values: dict[str, Any]


class EdgeRow(msgspec.Struct, frozen=True):
    """A validated edge record; ``src``/``dst`` are endpoint node ids (checked later).

    ``generated``: the id was minted because the record named none.
    """

    line: int
    type_name: str
    id: str
    src: str
    dst: str
    values: dict[str, Any]
    generated: bool = False


NODE_KEYS = frozenset({"type", "data"})
EDGE_KEYS = frozenset({"edge", "from", "to", "data"})


class ParsedFile(msgspec.Struct, frozen=True):
    """Rows by type name (types in name order, rows in file order) and the file's line count."""

    nodes: dict[str, list[NodeRow]]
    edges: dict[str, list[EdgeRow]]
    line_count: int


def _fail(line: int, message: str, **details: Any) -> BadRequest:
    return BadRequest(f"line {line}: {message}", {"line": line, **details})


class _DuplicateMember(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        if name in result:
            raise _DuplicateMember(name)
        result[name] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _load_line(text: str, line: int) -> dict[str, Any]:
    try:
        record = json.loads(text, object_pairs_hook=_object_without_duplicates, parse_constant=_refuse_constant)
    except _DuplicateMember as error:
        raise _fail(line, f"duplicate JSON member {error.name!r}", member=error.name) from None
    except ValueError as error:
        raise _fail(line, f"malformed JSON: {error}") from None
    except RecursionError:
        raise _fail(line, "malformed JSON: nested too deeply") from None
    if not isinstance(record, dict):
        raise _fail(line, "a record must be a JSON object")
    return record


def parse_jsonl(data: bytes, catalog: Catalog) -> ParsedFile:
    r"""Validate a JSONL file against ``catalog``; bad lines raise ``BadRequest`` (:func:`parse_lines`).

    Lines are split on ``\n`` and numbered from 1; blank lines are skipped but counted, a final
    newline does not start a line, and a UTF-8 byte-order mark at the start is ignored. Within
    the file, a second row with the same id, ``@key`` value or non-null ``@unique`` value (or
    composite ``@unique(p, q)`` value) in one table is refused, naming both lines
    (``details["first_line"]``); so is a value outside the type's ``@range``/``@check`` rules.
    """
    lines = data.removeprefix(BOM).split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return parse_lines(lines, 1, catalog)


MAX_REPORTED_LINES = 100
"""A refused file reports at most this many bad lines (``details["errors"]``), and counts them all."""


def parse_lines(lines: Sequence[bytes], first_line: int, catalog: Catalog) -> ParsedFile:
    r""":func:`parse_jsonl` of lines already split (without their ``\n``), numbered from ``first_line``.

    Duplicates are looked for among these lines only. A BOM is not stripped. Every line is
    checked: a refusal names the first bad line (its message and details), and when more lines
    are bad adds ``error_count`` (all of them) and ``errors`` (the first
    :data:`MAX_REPORTED_LINES`, each ``{line, message}``) to the details (:func:`_refusal`).
    Once a line is refused, the rows of later lines are checked but no longer kept.
    """
    index = _FileIndex()
    nodes: dict[str, list[NodeRow]] = {}
    edges: dict[str, list[EdgeRow]] = {}
    refused: list[BadRequest] = []
    count = 0
    for number, raw in enumerate(lines, start=first_line):
        try:
            _parse_line(raw, number, catalog, index, nodes, edges, keep=not refused)
        except BadRequest as error:
            count += 1
            if len(refused) < MAX_REPORTED_LINES:
                refused.append(error)
    if refused:
        raise _refusal(refused, count)
    return ParsedFile(
        nodes={name: nodes[name] for name in sorted(nodes)},
        edges={name: edges[name] for name in sorted(edges)},
        line_count=len(lines),
    )


def _parse_line(
    raw: bytes,
    number: int,
    catalog: Catalog,
    index: _FileIndex,
    nodes: dict[str, list[NodeRow]],
    edges: dict[str, list[EdgeRow]],
    *,
    keep: bool,
) -> None:
    """Validate one line and (with ``keep``) add its row; a blank line adds nothing, a refusal raises ``BadRequest``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _fail(number, f"invalid UTF-8: {error.reason}") from None
    if not text.strip():
        return
    record = _load_line(text, number)
    if "type" in record and "edge" in record:
        raise _fail(number, "a record has exactly one of 'type' and 'edge', not both")
    if "type" in record:
        node = _node(record, number, catalog)
        index.add(catalog.node(node.type_name), node.id, node.values, number)
        if keep:
            nodes.setdefault(node.type_name, []).append(node)
    elif "edge" in record:
        edge = _edge(record, number, catalog)
        index.add(catalog.edge(edge.type_name), edge.id, edge.values, number, (edge.src, edge.dst))
        if keep:
            edges.setdefault(edge.type_name, []).append(edge)
    else:
        raise _fail(number, "a record needs 'type' (a node) or 'edge' (an edge)")


def _refusal(refused: list[BadRequest], count: int) -> BadRequest:
    """The refusal of a file whose bad lines are ``refused`` (the first ones) out of ``count``."""
    first = refused[0]
    if count == 1:
        return first
    shown = f"the first {len(refused)}" if count > len(refused) else "each"
    return BadRequest(
        f"{first.message} (and {count - 1} more bad line(s), {count} in all; {shown} listed in details.errors)",
        {**first.details, "error_count": count, "errors": [{"line": e.details.get("line"), "message": e.message} for e in refused]},
    )


def _check_members(record: dict[str, Any], allowed: frozenset[str], kind: str, line: int) -> None:
    extra = sorted(set(record) - allowed)
    if extra:
        raise _fail(
            line,
            f"unexpected top-level key {extra[0]!r} in a {kind} record (allowed: {', '.join(sorted(allowed))})",
            member=extra[0],
        )


def _type_name(record: dict[str, Any], member: str, line: int) -> str:
    name = record[member]
    if not isinstance(name, str):
        raise _fail(line, f"{member!r} must be a string")
    return name


def _data(record: dict[str, Any], line: int) -> dict[str, Any]:
    data = record.get("data", {})
    if not isinstance(data, dict):
        raise _fail(line, "'data' must be a JSON object")
    return data


def _node(record: dict[str, Any], line: int, catalog: Catalog) -> NodeRow:
    _check_members(record, NODE_KEYS, "node", line)
    type_name = _type_name(record, "type", line)
    if not catalog.has_node(type_name):
        raise _fail(line, f"unknown node type {type_name!r}", type_name=type_name)
    table = catalog.node(type_name)
    data = _data(record, line)
    values = _values(table, data, line)
    explicit = _explicit_id(table, data, line)
    if table.key is None:
        return _checked(NodeRow(line, type_name, explicit or new_ulid(), values), table)
    empty = empty_key_member(table, values)
    if empty is not None:
        raise _fail(line, f"{type_name}.{empty} is empty: a @key value must be a non-empty string", type_name=type_name, property=empty)
    derived = derive_node_id(table, values)
    if explicit is not None and explicit != derived:
        raise _fail(
            line,
            f"data.id {explicit!r} does not match the id {derived!r} derived from the @key of {type_name}",
            type_name=type_name,
            id=explicit,
            derived_id=derived,
        )
    return _checked(NodeRow(line, type_name, derived, values), table)


_Row = TypeVar("_Row", NodeRow, EdgeRow)


def _checked(row: _Row, table: TableDef) -> _Row:
    """``row``, if its values keep the type's ``@range``/``@check`` rules."""
    violation = row_violation(table, row.values)
    if violation is not None:
        raise _fail(row.line, f"{violation.describe()} (id {row.id!r})", id=row.id, **violation.details())
    return row


def _edge(record: dict[str, Any], line: int, catalog: Catalog) -> EdgeRow:
    _check_members(record, EDGE_KEYS, "edge", line)
    type_name = _type_name(record, "edge", line)
    if not catalog.has_edge(type_name):
        raise _fail(line, f"unknown edge type {type_name!r}", type_name=type_name)
    table = catalog.edge(type_name)
    endpoints = []
    for member in ("from", "to"):
        node_id = record.get(member)
        if not isinstance(node_id, str) or not node_id:
            raise _fail(line, f"{member!r} must be a non-empty string (an endpoint node id)", type_name=type_name)
        endpoints.append(node_id)
    data = _data(record, line)
    values = _values(table, data, line)
    explicit = _explicit_id(table, data, line)
    edge = EdgeRow(line, type_name, explicit or new_ulid(), endpoints[0], endpoints[1], values, generated=explicit is None)
    return _checked(edge, table)


def _explicit_id(table: TableDef, data: dict[str, Any], line: int) -> str | None:
    if "id" not in data:
        return None
    explicit = data["id"]
    if not isinstance(explicit, str) or not explicit:
        raise _fail(line, "data.id must be a non-empty string", type_name=table.type_name)
    return explicit


def _values(table: TableDef, data: dict[str, Any], line: int) -> dict[str, Any]:
    for name in data:
        if name != "id" and not table.has_property(name):
            raise _fail(
                line,
                f"unknown property {name!r} for {table.kind} type {table.type_name}",
                type_name=table.type_name,
                property=name,
            )
    values: dict[str, Any] = {}
    for prop in table.properties:
        try:
            values[prop.name] = coerce_property(prop, data.get(prop.name))
        except InvalidValue as error:
            what = "missing" if prop.name not in data else str(error)
            raise _fail(
                line,
                f"property {prop.name!r} of {table.type_name}: {what}",
                type_name=table.type_name,
                property=prop.name,
            ) from None
    return values


def _canonical(table: TableDef, name: str, values: dict[str, Any], ends: tuple[str, str] | None) -> str | None:
    """The canonical string of one ``@unique`` member of a row (``src``/``dst`` of an edge too)."""
    if name in ("src", "dst") and not table.has_property(name):
        assert ends is not None
        return ends[0] if name == "src" else ends[1]
    value = values[name]
    if value is None:
        return None
    ptype = table.property(name).type
    return canonical_scalar("String" if isinstance(ptype, EnumType) else ptype.describe(), value)


class _FileIndex:
    """Ids and ``@unique`` values seen so far in one file, per table, with their line.

    ``@unique`` values are single and composite; a composite value with a null member is exempt.
    """

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], int] = {}
        self._unique: dict[tuple[str, str, str], int] = {}

    def add(self, table: TableDef, row_id: str, values: dict[str, Any], line: int, ends: tuple[str, str] | None = None) -> None:
        """Record one row; a repeated id or non-null ``@unique`` value raises ``BadRequest``."""
        first = self._ids.setdefault((table.table_key, row_id), line)
        if first != line:
            what = "@key value" if table.key is not None else "id"
            raise _fail(
                line,
                f"duplicate {what} {row_id!r} for {table.type_name} (first at line {first})",
                first_line=first,
                type_name=table.type_name,
                id=row_id,
            )
        for members in [(name,) for name in table.unique] + list(table.composite_unique):
            parts = [_canonical(table, name, values, ends) for name in members]
            if any(part is None for part in parts):
                continue
            canonical = parts[0] if len(parts) == 1 else json.dumps(parts, separators=(",", ":"), ensure_ascii=False)
            assert canonical is not None
            name = ", ".join(members)
            spelled = f"{table.type_name}.{name}" if len(members) == 1 else f"{table.type_name}({name})"
            first = self._unique.setdefault((table.table_key, name, canonical), line)
            if first != line:
                raise _fail(
                    line,
                    f"duplicate @unique value {canonical!r} for {spelled} (first at line {first})",
                    first_line=first,
                    type_name=table.type_name,
                    property=name,
                    value=canonical,
                    id=row_id,
                )


def check_endpoints(
    parsed: ParsedFile,
    catalog: Catalog,
    committed_node_ids: Callable[[str, list[str]], set[str]],
) -> None:
    """Every edge's ``src``/``dst`` must be a node of its ``from_type``/``to_type``.

    A node counts if the file holds it or ``committed_node_ids(type_name, sorted_ids)`` (called
    at most once per node type, in type-name order, only with ids the file does not hold)
    returns it. The first edge (by line) with a missing endpoint raises ``BadRequest``
    "line N: missing endpoint ..."; ``details["missing_count"]`` counts all missing references.
    (:func:`omnigraph.engine.records.record_set.check_edge_endpoints` does the work on columns.)
    """
    node_ids = {name: pa.array([row.id for row in rows], pa.utf8()) for name, rows in parsed.nodes.items()}
    edges = []
    for edge_type, rows in parsed.edges.items():
        table = catalog.edge(edge_type)
        assert table.from_type is not None and table.to_type is not None
        edges.append(
            EdgeEnds(
                edge_type,
                table.from_type,
                table.to_type,
                src=pa.array([row.src for row in rows], pa.utf8()),
                dst=pa.array([row.dst for row in rows], pa.utf8()),
                lines=pa.array([row.line for row in rows], pa.int64()),
            )
        )
    check_edge_endpoints(edges, node_ids, committed_node_ids)


def rows_to_arrow(table: TableDef, rows: Sequence[NodeRow | EdgeRow], with_pk: bool) -> pa.Table:
    """A table with schema ``table.arrow_schema(with_pk)`` holding ``rows`` in the given order.

    The rows are all of ``table``'s type: :class:`EdgeRow` values for an edge table.
    """
    schema = table.arrow_schema(with_pk)
    columns: dict[str, list[Any]] = {"id": [row.id for row in rows]}
    if table.kind == "edge":
        columns["src"] = [cast(EdgeRow, row).src for row in rows]
        columns["dst"] = [cast(EdgeRow, row).dst for row in rows]
    for prop in table.properties:
        columns[prop.name] = [row.values[prop.name] for row in rows]
    arrays = [_array(columns[field.name], field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _array(values: list[Any], arrow_type: pa.DataType) -> pa.Array:
    """One column of coerced values (a Blob column from ``lance.blob.Blob`` values)."""
    return blob_array(values) if isinstance(arrow_type, LanceBlobType) else pa.array(values, type=arrow_type)


def arrow_to_records(table: TableDef, arrow_table: pa.Table) -> list[str]:
    """One JSON line (no newline) per row of ``arrow_table``, in its order.

    Nodes: ``{"type": T, "data": {...}}``; edges: ``{"edge": E, "from": src, "to": dst,
    "data": {...}}``. ``data`` holds ``id`` first, then the non-null properties in declaration
    order, as :func:`omnigraph.engine.schema.values.export_value` spells them (a Blob column holds its
    cells' spellings already, as Utf8). Columns are read by name.
    """
    ids = arrow_table.column("id").to_pylist()
    props = [(prop, arrow_table.column(prop.name).to_pylist()) for prop in table.properties]
    if table.kind == "edge":
        sources = arrow_table.column("src").to_pylist()
        targets = arrow_table.column("dst").to_pylist()
    lines: list[str] = []
    for index, row_id in enumerate(ids):
        data: dict[str, Any] = {"id": row_id}
        for prop, column in props:
            if column[index] is not None:
                data[prop.name] = export_value(prop.type, column[index])
        if table.kind == "node":
            record: dict[str, Any] = {"type": table.type_name, "data": data}
        else:
            record = {"edge": table.type_name, "from": sources[index], "to": targets[index], "data": data}
        lines.append(json.dumps(record, ensure_ascii=False))
    return lines
