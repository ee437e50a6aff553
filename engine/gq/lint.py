"""Linting a ``.gq`` source against a ``.pg`` schema, without any graph (``omnigraph lint``).

:func:`lint` parses the schema (a refused one raises its ``SchemaError``, ``bad_request``), then
the query source, then type-checks every query of it, reads and mutations, each on its own: a
query's refusal does not hide the next query's. Parameters have no values here: each stands
for a value of its declared type (:func:`~omnigraph.engine.gq.read_checker.check_read_types`,
:func:`~omnigraph.engine.gq.checker.check_mutation_types`), so only what a value can break (a
missing one, an enum value that is not a member) is left to the run. A source that does not
parse is one finding (``Q000``): the parser stops at its first error.

The report (field names as upstream OmniGraph's lint output)::

    {"status": "ok" | "error", "schema_source": {"kind": "file", "path"}, "query_path",
     "queries_processed", "errors", "warnings", "infos",
     "results": [{"name", "kind": "read" | "mutation", "status",
                  "warnings": [...]?,                       # only when there are some
                  "error", "line", "column"?,               # a refused query
                  "operation": {"result", "reads", "writes"}?}],  # a checked query
     "findings": [{"severity", "code", "message", "type_name"?, "property"?, "query_names"?,
                   "line"?, "column"?}]}

``results`` is in source order. ``operation.result`` is the return columns in order, each ``{name,
kind, nullable}`` plus ``item_kind`` (lists) or ``vector_dim`` (vectors); ``kind`` is one of
:data:`VALUE_KINDS`; a mutation's is empty. ``reads``/``writes`` are distinct ``{kind: "node" |
"edge", type_name}``, nodes first, each by type name: a read reads every node type it binds (in
``not { }``, ``exists { }`` and ``count { }`` too) and each traversed (or bound) edge with both
endpoint types, writes nothing; a mutation reads and writes each target, an edge insert also reads
both endpoint types, and a node delete reads and
writes every edge type over that node type (the delete removes those edges).

Findings: ``Q000`` (error) a parse error; ``L201`` (warning) a nullable property of a node type
that some update query updates but none assigns (key members excluded). Each mutation that
declares no parameter has the warning :data:`HARDCODED_MUTATION_WARNING`. ``errors`` counts
refused queries and error findings, ``warnings`` every warning; ``status`` is ``error`` when
``errors`` is not 0.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.gq.checker import check_mutation_types
from omnigraph.engine.gq.parser import parse
from omnigraph.engine.gq.read_checker import Block, BoundRead, check_read_types
from omnigraph.engine.gq.syntax import GqError, Query
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import BlobType, EnumType, ListType, PropertyType, ScalarType, VectorType

PARSE_ERROR_CODE = "Q000"
UNSET_PROPERTY_CODE = "L201"
HARDCODED_MUTATION_WARNING = "mutation declares no params; hardcoded mutations are easy to miss"
VALUE_KINDS = ("string", "bool", "int", "bigint", "float", "date", "datetime", "blob", "vector", "list")
_SCALAR_KINDS = {
    "String": "string",
    "Bool": "bool",
    "I32": "int",
    "U32": "int",
    "I64": "bigint",
    "U64": "bigint",
    "F32": "float",
    "F64": "float",
    "Date": "date",
    "DateTime": "datetime",
}
_LINT_NOW = dt.datetime(1970, 1, 1)
"""The ``now()`` instant of a checked mutation: lint checks types only, and never writes."""


def lint(schema_source: str, query_source: str, *, schema_path: str, query_path: str) -> dict[str, Any]:
    """The lint report of ``query_source`` against ``schema_source``; see the module docstring.

    Raises:
        SchemaError: ``schema_source`` is refused (``schema error at LINE:COLUMN``).
    """
    catalog = Catalog.from_source(schema_source)
    report: dict[str, Any] = {"schema_source": {"kind": "file", "path": schema_path}, "query_path": query_path}
    try:
        queries = parse(query_source)
    except GqError as error:
        finding = {"severity": "error", "code": PARSE_ERROR_CODE, "message": str(error), "line": error.line, "column": error.column}
        return {**report, **_totals([], [finding]), "queries_processed": 0, "results": [], "findings": [finding]}
    results = [_lint_query(query, catalog) for query in queries]
    checked = [query for query, result in zip(queries, results, strict=True) if result["status"] == "ok"]
    findings = _unset_properties(checked, catalog)
    return {**report, **_totals(results, findings), "queries_processed": len(queries), "results": results, "findings": findings}


def _totals(results: list[dict[str, Any]], findings: list[dict[str, Any]]) -> dict[str, Any]:
    errors = sum(r["status"] == "error" for r in results) + sum(f["severity"] == "error" for f in findings)
    warnings = sum(len(r.get("warnings", ())) for r in results) + sum(f["severity"] == "warning" for f in findings)
    infos = sum(f["severity"] == "info" for f in findings)
    return {"status": "error" if errors else "ok", "errors": errors, "warnings": warnings, "infos": infos}


def _lint_query(query: Query, catalog: Catalog) -> dict[str, Any]:
    result: dict[str, Any] = {"name": query.name, "kind": "read" if query.is_read else "mutation"}
    if not query.is_read and not query.params:
        result["warnings"] = [HARDCODED_MUTATION_WARNING]
    try:
        operation = _describe_read(check_read_types(query, catalog)) if query.is_read else _describe_mutation(query, catalog)
    except BadRequest as error:
        refusal = _as_gq_error(error, query)
        return {**result, "status": "error", "error": str(refusal), "line": refusal.line, "column": refusal.column}
    return {**result, "status": "ok", "operation": operation}


def _as_gq_error(error: BadRequest, query: Query) -> GqError:
    """``error`` as a ``gq error at LINE:COLUMN``: its own position, else the query's."""
    if isinstance(error, GqError):
        return error
    details = error.details
    if "line" in details and "column" in details:
        return GqError(error.message, details["line"], details["column"], str(details.get("token", "")))
    return GqError(error.message, query.token.line, query.token.column, query.token.text)


def _describe_read(bound: BoundRead) -> dict[str, Any]:
    reads: set[tuple[str, str]] = set()
    pending: list[Block] = [bound.block]
    while pending:
        block = pending.pop()
        reads.update((var.table.kind, var.table.type_name) for var in block.variables)  # a bound edge reads its edge
        for hop in block.hops:
            reads.add(("edge", hop.edge.type_name))
            reads.update(("node", str(end)) for end in (hop.edge.from_type, hop.edge.to_type))
        pending.extend(block.nested)
    result = []
    for output in bound.outputs:
        nullable = output.func != "count" and (output.column is None or _nullable(bound, output.var, output.column.column))
        result.append({"name": output.name, **_value_kind(output.type), "nullable": nullable})
    return {"result": result, "reads": _facts(reads), "writes": []}


def _nullable(bound: BoundRead, var: int, column: str) -> bool:
    table = bound.variables[var].table
    return column != "id" and table.property(column).nullable


def _describe_mutation(query: Query, catalog: Catalog) -> dict[str, Any]:
    reads: set[tuple[str, str]] = set()
    writes: set[tuple[str, str]] = set()
    for statement, table in zip(query.statements, check_mutation_types(query, catalog, _LINT_NOW), strict=True):
        target = (table.kind, table.type_name)
        reads.add(target)
        writes.add(target)
        if table.kind == "edge" and statement.verb == "insert":
            reads.update(("node", str(end)) for end in (table.from_type, table.to_type))
        if table.kind == "node" and statement.verb == "delete":
            incident = {("edge", edge.type_name) for edge in _edges(catalog) if table.type_name in (edge.from_type, edge.to_type)}
            reads |= incident
            writes |= incident
    return {"result": [], "reads": _facts(reads), "writes": _facts(writes)}


def _edges(catalog: Catalog) -> list[TableDef]:
    return [table for table in catalog.tables() if table.kind == "edge"]


def _facts(facts: set[tuple[str, str]]) -> list[dict[str, str]]:
    """Node facts first, then edges, each by type name (upstream's order)."""
    return [{"kind": kind, "type_name": name} for kind, name in sorted(facts, key=lambda fact: (fact[0] != "node", fact[1]))]


def _value_kind(ptype: PropertyType) -> dict[str, Any]:
    """``kind`` of a value of ``ptype``, plus ``item_kind`` for a list and ``vector_dim`` for a vector."""
    if isinstance(ptype, ListType):
        return {"kind": "list", "item_kind": _value_kind(ptype.item)["kind"]}
    if isinstance(ptype, VectorType):
        return {"kind": "vector", "vector_dim": ptype.dim}
    if isinstance(ptype, BlobType):
        return {"kind": "blob"}
    if isinstance(ptype, EnumType):
        return {"kind": "string"}
    assert isinstance(ptype, ScalarType)
    return {"kind": _SCALAR_KINDS[ptype.name]}


def _unset_properties(checked: list[Query], catalog: Catalog) -> list[dict[str, Any]]:
    """``L201``: per node type some checked query updates, each nullable non-key property no update assigns."""
    updaters: dict[str, set[str]] = {}
    assigned: dict[str, set[str]] = {}
    for query in checked:
        for statement in query.statements:
            if statement.verb == "update" and catalog.has_node(statement.type_name):
                updaters.setdefault(statement.type_name, set()).add(query.name)
                assigned.setdefault(statement.type_name, set()).update(a.prop for a in statement.assignments)
    findings = []
    for type_name in sorted(updaters):
        table = catalog.node(type_name)
        for prop in sorted(table.properties, key=lambda p: p.name):
            if prop.nullable and prop.name not in (table.key or ()) and prop.name not in assigned[type_name]:
                findings.append(
                    {
                        "severity": "warning",
                        "code": UNSET_PROPERTY_CODE,
                        "message": f"{type_name}.{prop.name} exists in schema but no update query sets it",
                        "type_name": type_name,
                        "property": prop.name,
                        "query_names": sorted(updaters[type_name]),
                    }
                )
    return findings
