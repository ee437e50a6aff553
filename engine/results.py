"""The typed results of the engine's operations: frozen dataclasses, one per answer, defined once.

The engine returns them, :class:`omnigraph.Graph` hands them to applications (``omnigraph.results``
names them publicly), the console scripts print their documents and the HTTP server's response
models are these classes. Each result has the field names of the document the ``omnigraph`` CLI
prints with ``--json`` for the same operation (and the HTTP server answers), and :meth:`to_dict`
gives that document back exactly, so a script can move between the CLI, HTTP and Python without
renaming anything. Sequences are tuples and mappings are read-only (values given as lists and
dicts are frozen on construction), so a result can be shared between threads. Field docstrings
are the descriptions of the HTTP API's schema (``__pydantic_config__``).

This module imports nothing heavy (no Lance, Arrow or DuckDB): :class:`QueryResult` imports
``pyarrow`` and ``pandas`` only inside :meth:`QueryResult.to_arrow` and
:meth:`QueryResult.to_pandas`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NoReturn, Self

from omnigraph.engine.errors import BadRequest

if TYPE_CHECKING:
    import pandas
    import pyarrow

__all__ = [
    "Branch",
    "ChunkedMutationResult",
    "Commit",
    "CreatedBranch",
    "DeletedBranch",
    "InitResult",
    "LoadResult",
    "MergeResult",
    "MutationResult",
    "QueryPlan",
    "QueryResult",
    "Readiness",
    "Snapshot",
    "SnapshotTable",
]


class FrozenMapping(dict[str, Any]):
    """A read-only dict: every change raises ``TypeError``.

    A dict, so that JSON encoders and pydantic (the server's response models) take it as one.
    """

    def _refuse(self, *_args: Any, **_kwargs: Any) -> NoReturn:
        raise TypeError(f"a result's mapping is read-only: {type(self).__name__}")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __reduce__(self) -> tuple[type[FrozenMapping], tuple[dict[str, Any]]]:
        """Pickled and copied as its items (a plain dict's way would set them one by one)."""
        return type(self), (dict(self),)


def _frozen(value: Any) -> Any:
    """``value`` with every list turned into a tuple and every dict into a read-only mapping."""
    if isinstance(value, Mapping):
        return FrozenMapping({key: _frozen(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_frozen(item) for item in value)
    return value


def _plain(value: Any) -> Any:
    """The JSON shape of a result value: tuples become lists, mappings dicts, results documents."""
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


class Result:
    """The shared behaviour of the result dataclasses (a mixin: every subclass is a frozen dataclass)."""

    NESTED: ClassVar[dict[str, type[Result]]] = {}
    """Fields that hold a sequence of another result type (built from their documents)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"use_attribute_docstrings": True}
    """How pydantic (the HTTP server's response models) reads a result: field docstrings describe fields."""

    if TYPE_CHECKING:
        # Every subclass is a dataclass, which sets this: it lets ``dataclasses.fields`` take a Result.
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def __post_init__(self) -> None:
        """Freeze the values given: lists become tuples and dicts read-only mappings."""
        for item in dataclasses.fields(self):
            object.__setattr__(self, item.name, _frozen(getattr(self, item.name)))

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Self:
        """The result for ``document`` (a ``--json`` or HTTP document of this operation).

        Raises:
            BadRequest: the document's keys are not exactly this result's fields.
        """
        names = [f.name for f in dataclasses.fields(cls)]
        if set(document) != set(names):
            raise BadRequest(
                f"not a {cls.__name__} document: keys {sorted(document)}, expected {sorted(names)}",
                {"keys": sorted(document), "expected": sorted(names)},
            )
        values = {}
        for name in names:
            nested = cls.NESTED.get(name)
            value = document[name]
            values[name] = tuple(nested.from_document(item) for item in value) if nested else value
        return cls(**values)  # frozen by __post_init__

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document of this result (lists and dicts, ready for ``json.dumps``)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class InitResult(Result):
    """``omnigraph init --json``: the graph's root, its format stamp and its table keys."""

    graph: str
    format: str
    tables: tuple[str, ...]


@dataclass(frozen=True)
class LoadResult(Result):
    """``omnigraph load --json``: the commits a load published, the rows per table key and what they changed."""

    branch: str
    mode: Literal["append", "merge", "overwrite"]
    commits: tuple[str, ...]
    manifest_version: int | None
    rows: Mapping[str, int]
    """The input rows per table key."""
    changes: Mapping[str, Mapping[str, int]]
    """Per table key: ``{inserted, updated, unchanged, deleted}`` rows (``deleted``: overwrite only)."""


@dataclass(frozen=True)
class MutationResult(Result):
    """``omnigraph mutate --json``: the rows a mutation touched and the commit it published.

    ``affected_*`` are counted per statement, ``distinct_*`` each row once; ``commit`` is None when
    nothing matched (no commit was published).
    """

    affected_nodes: int
    """Node rows touched, counted per statement."""
    affected_edges: int
    """Edge rows touched, counted per statement."""
    distinct_nodes: int
    """Distinct node rows the commit changed."""
    distinct_edges: int
    """Distinct edge rows the commit changed."""
    commit: str | None
    """The published commit; null when the mutation matched nothing."""


@dataclass(frozen=True)
class ChunkedMutationResult(Result):
    """``omnigraph mutate --chunk-rows N --json``: every chunk committed, in order."""

    operation_id: str
    query: str
    branch: str
    affected_nodes: int
    affected_edges: int
    commits: tuple[str, ...]
    chunks: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class Branch(Result):
    """One entry of ``omnigraph branch list --json``."""

    name: str
    parent_branch: str | None
    parent_manifest_version: int | None
    incarnation: str
    manifest_version: int
    head: str


@dataclass(frozen=True)
class CreatedBranch(Result):
    """``omnigraph branch create --json``."""

    name: str
    parent_branch: str | None
    incarnation: str


@dataclass(frozen=True)
class DeletedBranch(Result):
    """``omnigraph branch delete --json``."""

    deleted: str


@dataclass(frozen=True)
class MergeResult(Result):
    """``omnigraph branch merge --json``: how a merge ended and what it changed.

    ``outcome`` is ``up_to_date``, ``fast_forward`` or ``merged``; ``changes`` counts inserted,
    updated and deleted rows per table key.
    """

    outcome: Literal["up_to_date", "fast_forward", "merged"]
    source: str
    into: str
    base: str
    source_head: str
    target_head: str
    commit: str | None
    parents: tuple[str, ...]
    changes: Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class SnapshotTable(Result):
    """One table of a :class:`Snapshot`: the pinned image, its rows and its primary key."""

    table_key: str
    path: str
    table_branch: str | None
    version: int
    rows: int
    pk: tuple[str, ...]


@dataclass(frozen=True)
class Snapshot(Result):
    """``omnigraph snapshot --json``: what a branch pins."""

    NESTED: ClassVar[dict[str, type[Result]]] = {"tables": SnapshotTable}

    branch: str
    manifest_version: int
    format: str
    tables: tuple[SnapshotTable, ...]


@dataclass(frozen=True)
class Commit(Result):
    """One entry of ``omnigraph commit list --json`` (``committed_at`` in epoch milliseconds)."""

    commit_id: str
    parents: tuple[str, ...]
    actor: str
    message: str
    committed_at: int


@dataclass(frozen=True)
class Readiness(Result):
    """``GET /readyz``: the stamp, whether this program may write now, and why."""

    format: str | None
    writable: bool
    reason: str


SCALAR_ARROW_ALIASES: dict[str, str] = {
    "String": "string",
    "Bool": "bool",
    "I32": "int32",
    "I64": "int64",
    "U32": "uint32",
    "U64": "uint64",
    "F32": "float",
    "F64": "double",
    "Date": "date32",
    "DateTime": "timestamp[ms]",
}
"""Every scalar type name of the schema language, mapped to the ``pyarrow`` alias of its Arrow type
(``pyarrow.type_for_alias``): the types a table column of the name is stored as, and a query
column of the name is given by :meth:`QueryResult.to_arrow`."""


def _iso_datetime(text: str) -> dt.datetime:
    """A rendered DateTime (``2024-01-31T09:30:00.000Z``) as the naive UTC datetime a table stores."""
    return dt.datetime.fromisoformat(text).astimezone(dt.UTC).replace(tzinfo=None)


def _column_value(spelling: str) -> Callable[[Any], Any]:
    """The function that turns a rendered non-null value of the type ``spelling`` into what Arrow takes."""
    if spelling.startswith("["):
        item = _column_value(spelling[1:-1])
        return lambda value: [None if v is None else item(v) for v in value]
    if spelling == "Date":
        return dt.date.fromisoformat
    if spelling == "DateTime":
        return _iso_datetime
    return lambda value: value


def _column_type(spelling: str) -> pyarrow.DataType:
    """The Arrow type of a query column of the schema type ``spelling`` (as tables store it)."""
    import pyarrow as pa

    if spelling.startswith("["):
        return pa.list_(_column_type(spelling[1:-1]))
    if spelling.startswith("Vector("):
        return pa.list_(pa.float32(), int(spelling[len("Vector(") : -1]))
    if spelling.startswith("enum("):
        return pa.string()
    return pa.type_for_alias(SCALAR_ARROW_ALIASES[spelling])


@dataclass(frozen=True)
class QueryResult(Result):
    """``omnigraph query --json``: the answer of one read query, all rows read.

    ``rows`` are mappings from column name to a JSON value (as the CLI prints them), in the
    answer's order; ``columns`` is there even when there is no row, and ``types`` gives each
    column's schema type in the same order.
    """

    query: str
    branch: str
    commit: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    """The schema type of each column, in column order: ``I64``, ``Date``, ``[String]``,
    ``Vector(3)``, ``enum(a, b)``; ``count`` is ``I64``, ``avg`` ``F64``, ``sum`` its property's
    type widened to ``I64`` or ``F64``."""
    rows: tuple[Mapping[str, Any], ...]

    def to_pylist(self) -> list[dict[str, Any]]:
        """The rows as a list of plain dicts (keys in column order), values as JSON values."""
        return [{column: _plain(row[column]) for column in self.columns} for row in self.rows]

    def to_arrow(self) -> pyarrow.Table:
        """The rows as a ``pyarrow.Table``: one column per answer column, in order, of its type's Arrow type.

        The types are those the tables store (``export_tables`` gives the same): a Date is
        ``date32``, a DateTime ``timestamp[ms]`` (UTC), an F32 ``float``, an I32 ``int32``, a list
        a list, a vector a fixed-size list of ``float``, an enum a string. An integer ``sum`` beyond
        the I64 range is ``decimal128(38, 0)``.
        """
        import pyarrow as pa

        rows = self.to_pylist()
        arrays = {}
        for column, spelling in zip(self.columns, self.types, strict=True):
            convert = _column_value(spelling)
            values = [None if row[column] is None else convert(row[column]) for row in rows]
            try:
                arrays[column] = pa.array(values, type=_column_type(spelling))
            except OverflowError:  # an integer sum beyond I64
                arrays[column] = pa.array(values, type=pa.decimal128(38, 0))
        return pa.table(arrays)

    def to_pandas(self) -> pandas.DataFrame:
        """The rows as a ``pandas.DataFrame`` (columns in order), from :meth:`to_arrow`'s types.

        Raises:
            BadRequest: pandas is not installed (it is not a dependency of this package).
        """
        try:
            import pandas  # noqa: F401 - only to say clearly that it is missing
        except ImportError:
            raise BadRequest("QueryResult.to_pandas needs pandas, which is not installed (pip install pandas)") from None
        return self.to_arrow().to_pandas()


@dataclass(frozen=True)
class QueryPlan(Result):
    """``omnigraph query --explain --json``: how a read query would run, without running it.

    ``tables``: ``{table, table_branch, version, rows, indexes: [{name, columns, type}]}`` per table read;
    ``variables``: ``{variable, table, estimated_rows, id_lookup, id_index}``; ``hops``: ``{edge, from, to,
    edge_variable, direction, bounds, mode, start, stops_after, frontier_index, estimated_rows}``; ``filters``: ``{filter, table,
    pushed_into_scan, index}``; ``searches``: ``{function, column, table, ordering, index,
    candidates}`` per search function (``index`` None: an exact scan). Row figures come from the
    manifest's row counts. ``executor``: ``direct`` when the answer is computed from the rows its
    keyed variables reach, without a DuckDB statement (one runs instead if a probe passes its
    bound, or if a variable-length traversal's adjacency does not fit the cache's bound);
    ``degrees`` when it counts a one-hop match over the whole graph without DuckDB, from the edge
    table's adjacency if the process holds it, else from its columns up to 1,048,576 rows within
    the bound on adjacencies (else the statement runs); else ``statement``.
    """

    query: str
    branch: str
    commit: str
    tables: tuple[Mapping[str, Any], ...]
    variables: tuple[Mapping[str, Any], ...]
    hops: tuple[Mapping[str, Any], ...]
    filters: tuple[Mapping[str, Any], ...]
    searches: tuple[Mapping[str, Any], ...] = ()
    executor: str = "statement"


def documents(result_type: type[Result], items: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    """One ``result_type`` per document of ``items``, in order."""
    return tuple(result_type.from_document(item) for item in items)
