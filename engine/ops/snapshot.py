"""``snapshot`` and ``schema show``: what a branch pins, and the accepted schema of a graph.

``snapshot`` (:func:`snapshot_document`) is what a branch pins, as the JSON document of DESIGN
section 6.

``schema show`` is the accepted schema of a graph and the catalog derived from it. The document
(``schema show --json``, :func:`schema_document`) is ``{graph, format, fingerprint, source,
warnings, catalog}``: ``source`` is the stored ``_schema.pg`` verbatim, ``warnings`` what it was
accepted with (``{message, line, column}``), and ``catalog``
:meth:`omnigraph.engine.schema.catalog.Catalog.describe`: ``tables`` in table-key order
(properties with their types, nullability, ``unique``/``index`` flags and metadata annotations;
the key, implemented interfaces, composite ``unique``, ``indexes``, ``ranges``, ``checks``,
``cardinality`` and type metadata) and ``interfaces`` by name (each with its ``key``, properties
and metadata). :func:`render_schema` is the human rendering. Everything is deterministic: the
same graph gives the same document. Reading needs no write access and works at every stamp the
program reads.
"""

from __future__ import annotations

from typing import Any

from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.commit_graph import read_point
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.parser import quote
from omnigraph.engine.schema.tables import CheckRule, RangeRule, TableDef
from omnigraph.engine.storage.lance_io import primary_key


def snapshot_document(graph: Graph, branch: str) -> dict[str, Any]:
    """``{branch, manifest_version, format, tables: [{table_key, path, table_branch, version, rows, pk}]}``."""
    point = read_point(graph.manifest, branch, None)
    snapshot = point.snapshot
    tables = []
    with point.reading(graph.manifest):
        datasets = point.open_images(graph.manifest, snapshot.tables)
        for table_key, entry in snapshot.tables.items():
            dataset = datasets[table_key]
            tables.append(
                {
                    "table_key": table_key,
                    "path": entry.table_path,
                    "table_branch": entry.table_branch,
                    "version": entry.table_version,
                    "rows": entry.row_count,
                    "pk": primary_key(dataset.schema),
                }
            )
    return {
        "branch": branch,
        "manifest_version": snapshot.manifest_version,
        "format": graph.stamp,
        "tables": tables,
    }


def schema_document(graph: Graph) -> dict[str, Any]:
    """The ``schema show --json`` document of an open graph."""
    catalog = graph.catalog
    return {
        "graph": graph.store.uri,
        "format": graph.stamp,
        "fingerprint": catalog.fingerprint(),
        "source": catalog.source,
        "warnings": [{"message": w.message, "line": w.line, "column": w.column} for w in catalog.warnings],
        "catalog": catalog.describe(),
    }


def _arg_text(arg: Any) -> str:
    """A kept argument as the language writes it (names are kept as strings)."""
    if isinstance(arg, str):
        return quote(arg)
    if isinstance(arg, dict):
        return f"{'' if arg['low'] is None else arg['low']}..{'' if arg['high'] is None else arg['high']}"
    return str(arg)


def _metadata(items: list[dict[str, Any]]) -> str:
    parts = []
    for item in items:
        args = "" if item["args"] is None else "(" + ", ".join(_arg_text(a) for a in item["args"]) + ")"
        parts.append(f"@{item['name']}{args}")
    return "".join(f"  {part}" for part in parts)


def _table_lines(table: TableDef) -> list[str]:
    described = table.describe()
    header = table.table_key
    if table.kind == "edge":
        header += f"  {table.from_type} -> {table.to_type}  @card({table.cardinality.describe()})"
    if table.implements:
        header += f"  implements {', '.join(table.implements)}"
    if table.key:
        header += f"  key ({', '.join(table.key)})"
    lines = [header + _metadata(described["metadata"])]
    for prop in described["properties"]:
        flags = "".join(f"  @{flag}" for flag in ("unique", "index") if prop[flag])
        nullable = "?" if prop["nullable"] else ""
        lines.append(f"    {prop['name']}: {prop['type']}{nullable}{flags}{_metadata(prop['metadata'])}")
    lines += [f"    @unique({', '.join(members)})" for members in table.composite_unique]
    lines += [f"    @index({', '.join(members)})" for members in table.indexes]
    rules: tuple[RangeRule | CheckRule, ...] = (*table.ranges, *table.checks)
    lines += [f"    {rule.describe()}" for rule in rules]
    return lines


def render_schema(graph: Graph) -> list[str]:
    """The human rendering of ``schema show``, as lines.

    A summary line, the catalog (one block per table and interface), the warnings, then the
    accepted source.
    """
    catalog: Catalog = graph.catalog
    lines = [f"{graph.store.uri}: format {graph.stamp}, {len(catalog.table_keys())} table(s), fingerprint {catalog.fingerprint()}"]
    for interface in catalog.interfaces():
        described = interface.describe()
        key = f"  key ({', '.join(interface.key)})" if interface.key else ""
        lines.append(f"interface {interface.name}{key}{_metadata(described['metadata'])}")
        for prop in interface.properties:
            lines.append(f"    {prop.name}: {prop.type}{'?' if prop.nullable else ''}{_metadata([m.describe() for m in prop.metadata])}")
    for table in catalog.tables():
        lines += _table_lines(table)
    lines += [f"warning: {warning}" for warning in catalog.warnings]
    lines.append("--- accepted source ---")
    lines += catalog.source.rstrip("\n").split("\n")
    return lines
