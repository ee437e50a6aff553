"""A bound read query as one DuckDB statement over the registered table views.

Shape (:func:`statement`)::

    WITH m AS (SELECT DISTINCT <ids of the match's variables>, <columns used>
               FROM <node views> , <edges or hop pair tables>
               WHERE <joins> AND <comparisons> AND <conditions> AND NOT EXISTS (<each negation>))
    SELECT <outputs> FROM m [GROUP BY <group keys>] ORDER BY <keys>, <tie-break> [LIMIT n]

A comparison or condition of the match block that reads two or more of its variables
(:func:`crossing`, e.g. ``$p.age > $f.age``) is applied after the joins instead::

    WITH j AS MATERIALIZED (SELECT DISTINCT <ids>, <columns used>, <struct v{i} of the columns it reads>
                            FROM ... WHERE <everything else>),
         m AS (SELECT * EXCLUDE (v{i} ...) FROM j WHERE <crossing conditions>)

Join order. DuckDB estimates a registered Lance image at one row, and with estimates tied its
join order keeps the order of the FROM items: the first is the side that streams through the
joins, each later one a side it builds a hash table on. The FROM items are therefore written
largest first, by the row counts :func:`statement` is given (the manifest's count of each
image, the row count of each registered table); a variable-length traversal's pair table of
unknown size counts as its edge table. (The top-10 by degree over 1M people and 5M edges built
a hash table on a join of all the edges, 1.1 GB at its peak; it builds on the people now, 0.9 GB.)

Written inside the join, it is a join condition between two node scans, and DuckDB, which
estimates every Arrow scan at one row, may join those two scans first: a nested loop over the
product of two node tables (quadratic). The materialized ``j`` is a barrier DuckDB does not push
filters through, so the comparison runs once per joined row. Each struct is named after the
variable's alias, so the condition's SQL is the same text in both places.

``m`` holds one row per binding of the match's variables (``DISTINCT`` over their ids: a
traversal reports a pair at most once, however many edges join it). A traversal of bounds
``{1,1}`` joins the edge view directly (an undirected one, ``$a <edge> $b``, the view and its
mirror, :func:`edge_rows`); a bound edge (``$a $k:edge $b``) is that join with the edge rows as
the variable's alias ``v{k}``, all their columns (:func:`bound_edge_rows`), and its id joins the
``DISTINCT`` ids, so each matching edge is a row of its own (parallel edges too; the mirrored
row of an undirected self-loop is the same row, kept once); any other is the pair table
:mod:`omnigraph.engine.query.session` built (``relation`` returns its name). Order: the
``order`` keys (ascending puts NULL first, descending last), then the bound entities' ids
ascending in the order the variables first appear (a bound edge's id among them); a grouped
query breaks ties by its group keys instead (NULL first). Without ``order`` the tie-break alone orders the rows, so every
answer has one order; but a ``limit`` without ``order`` and without an aggregate
(:func:`any_rows`) asks for any ``N`` rows, and there the statement has no ``ORDER BY`` (unless
``repeatable``: then it is the first ``N`` rows in tie-break order, the same every run).

Operands and comparisons (:func:`operand_sql`, :func:`compare_sql`). Variable ``i`` is the SQL
alias ``v{i}`` of its node table; values travel as numbered parameters (``$1``, ``$2``, ...,
:class:`SqlParams`), each cast to an explicit type so that DuckDB pushes a comparison of a
column with a constant into the Lance scan (and a BTREE on the column serves it). Numbers
compare numerically (the reference's rule): an integer constant takes the type of the integer
column it is compared with when it fits (else both sides are ``HUGEINT``); a comparison between
an integer and a float, or two float types, is made in ``DOUBLE``. NULL on either side makes a
comparison NULL, which never matches (a list's ``contains`` of a NULL item is made NULL too:
DuckDB's ``list_contains`` of an empty list answers FALSE). pylance 14's scanner cannot take a pushed filter on an
unsigned integer column (its Substrait conversion refuses ``U32``/``U64`` fields, and the whole
scan fails). A comparison that reads such a column is therefore written
``coalesce(comparison, FALSE)``: the same rows in a WHERE clause (NULL is not true either way),
but an expression DuckDB does not push, so it filters those rows itself. The same form keeps all
but the first :data:`MAX_PUSHED_PER_VARIABLE` comparisons of a variable out of its scan
(:func:`scan_pushed`): the filter a Lance scan is handed is a tree of ``and``/``or``, and
building it costs twice as much with each more leaf. A condition (below) counts its columns
against the same bound; one past it is written in the ``CASE`` form, which DuckDB does not push.

Conditions (:func:`condition_sql`): ``and``/``or``/``not``, ``IS [NOT] NULL`` and a ``Bool``
operand are SQL's own, whose three-valued logic is the language's (a row is kept when its
condition is TRUE; NOT NULL is NULL). A comparison inside one keeps its NULL (``keep_null``); one
that reads an unsigned column, and a null test of an unsigned or vector column (the Lance scan
refuses both), is written ``CASE c WHEN TRUE THEN TRUE WHEN FALSE THEN FALSE END``: NULL stays
NULL, and DuckDB does not push it. ``exists { }`` is ``EXISTS (SELECT 1 ...)`` over the block's
FROM items and conditions (correlated with the enclosing variables as a negation is); ``count {
} op x`` counts ``SELECT DISTINCT`` of the block's own variables' ids (``1`` when it has none),
compared as ``HUGEINT`` with an integer and ``DOUBLE`` with a float.

Search functions (:mod:`omnigraph.engine.gq.search`). A ``search``/``match_text``/``fuzzy``
clause is a condition over the text's tokens (:func:`text_match_sql`: DuckDB's
``regexp_extract_all`` of letter-and-digit runs of the lower-cased text, ``list_has_all``,
``list_has_any``, ``levenshtein``). Each ``nearest`` distance (:func:`distance_sql`, in double
precision) and ``bm25`` relevance (SQL given by the caller,
:func:`omnigraph.engine.query.search.bm25_sql`) is a column ``s{i}`` of ``m``; an ``rrf`` is a
column of a second step ``f`` over ``m`` (:func:`fusion_sql`: window ranks over the entities of
``m``). As an order key a score keeps NULL last: a distance ascending, a relevance descending.

Implied ids (:func:`implied_ids`): a variable whose ``@key`` members all equal constants also
gets its implied node id as a condition, for the join planner. ``$p: Person { name: "Ann" }``
(``name`` the key) can only bind the node whose id is ``"Ann"``. Stating ``v.id = 'Ann'`` as
well changes no answer, but lets DuckDB carry the constant through the joins on ``id``
(``edge.src = v.id``) into the edge table's Lance scan, so a traversal from one keyed node reads
only that node's edges instead of joining the whole edge table first. Only exact constants of an
exactly matching kind derive an id: strings (and enums), booleans, integers within the key's
type, Dates and DateTimes. Float keys never do (a float constant may equal a stored float
numerically while spelling a different id, or the reverse).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

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
    SortKey,
    SubQuery,
    Truth,
    family,
)
from omnigraph.engine.gq.search import Bm25Score, NearestScore, RrfScore, TextMatch, default_max_edits, tokens
from omnigraph.engine.schema.ids import derive_node_id
from omnigraph.engine.schema.tables import TableDef
from omnigraph.engine.schema.types import FLOAT_SCALARS, INTEGER_RANGES, EnumType, ListType, PropertyType, ScalarType, VectorType

_KINDS: dict[str, type | tuple[type, ...]] = {"String": str, "Bool": bool, "Date": dt.date, "DateTime": dt.datetime}


def _exact(table: TableDef, prop: str, value: Any) -> bool:
    ptype = table.property(prop).type
    if isinstance(ptype, EnumType):
        return isinstance(value, str)
    if not isinstance(ptype, ScalarType):
        return False
    if ptype.name in INTEGER_RANGES:
        low, high = INTEGER_RANGES[ptype.name]
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    kind = _KINDS.get(ptype.name)
    if kind is None:
        return False
    if ptype.name == "Date":
        return isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    return isinstance(value, kind)


def _equality(compare: Compare) -> tuple[Column, Any] | None:
    if compare.op != "=":
        return None
    for column, const in ((compare.left, compare.right), (compare.right, compare.left)):
        if isinstance(column, Column) and isinstance(const, Const) and const.value is not None:
            return column, const.value
    return None


def implied_ids(block: Block) -> list[tuple[int, str]]:
    """(variable index, id) for each variable of ``block`` whose key members all equal constants."""
    found: list[tuple[int, str]] = []
    for var in block.variables:
        key = var.table.key
        if key is None:
            continue
        values: dict[str, Any] = {}
        for compare in block.compares:
            equality = _equality(compare)
            if (
                equality is not None
                and equality[0].var == var.index
                and equality[0].column in key
                and _exact(var.table, equality[0].column, equality[1])
            ):
                values.setdefault(equality[0].column, equality[1])
        if set(values) == set(key):
            found.append((var.index, derive_node_id(var.table, values)))
    return found


SQL_SCALARS = {
    "I32": "INTEGER",
    "I64": "BIGINT",
    "U32": "UINTEGER",
    "U64": "UBIGINT",
    "F32": "FLOAT",
    "F64": "DOUBLE",
    "String": "VARCHAR",
    "Bool": "BOOLEAN",
    "Date": "DATE",
    "DateTime": "TIMESTAMP",
}
_OPS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class SqlParams:
    """The parameter values of one SQL statement, numbered in the order they are added."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def add(self, value: Any, sql_type: str) -> str:
        """Add ``value``; the SQL that reads it: its numbered parameter cast to ``sql_type``."""
        self.values.append(value)
        return f"CAST(${len(self.values)} AS {sql_type})"


def quote(name: str) -> str:
    """A DuckDB identifier (``node:Person``, a property name)."""
    return '"' + name.replace('"', '""') + '"'


def sql_type(ptype: PropertyType) -> str:
    """The DuckDB type a value of ``ptype`` is compared as (an enum as ``VARCHAR``)."""
    if isinstance(ptype, EnumType):
        return "VARCHAR"
    if isinstance(ptype, ListType):
        return f"{sql_type(ptype.item)}[]"
    if isinstance(ptype, VectorType):
        return f"FLOAT[{ptype.dim}]"
    assert isinstance(ptype, ScalarType)
    return SQL_SCALARS[ptype.name]


def column_sql(column: Column) -> str:
    """The SQL of ``$var.column``: the column of the variable's alias ``v{i}``."""
    return f"v{column.var}.{quote(column.column)}"


def _is_float(ptype: PropertyType) -> bool:
    return isinstance(ptype, ScalarType) and ptype.name in FLOAT_SCALARS


def _fits(value: Any, ptype: PropertyType) -> bool:
    if value is None:
        return True
    assert isinstance(ptype, ScalarType)
    low, high = INTEGER_RANGES[ptype.name]
    return isinstance(value, int) and low <= value <= high


def _numeric_types(
    left: PropertyType, right: PropertyType, left_const: Const | None, right_const: Const | None
) -> tuple[str | None, str | None]:
    """The SQL types both sides of a numeric comparison are cast to (None: as they are).

    ``left_const``/``right_const`` is the side when it is a constant.
    """
    if left == right:
        return None, None
    if _is_float(left) or _is_float(right):
        return "DOUBLE", "DOUBLE"
    if right_const is not None and _fits(right_const.value, left):
        return None, sql_type(left)
    if left_const is not None and _fits(left_const.value, right):
        return sql_type(right), None
    return "HUGEINT", "HUGEINT"


def _const(operand: Operand) -> Const | None:
    return operand if isinstance(operand, Const) else None


def operand_sql(operand: Operand, cast: str | None, params: SqlParams) -> str:
    """``operand`` as SQL, cast to ``cast`` when given."""
    if isinstance(operand, Const):
        return params.add(operand.value, cast or sql_type(operand.type))
    text = column_sql(operand)
    return text if cast is None or cast == sql_type(operand.type) else f"CAST({text} AS {cast})"


def unsigned_column(operand: Operand) -> bool:
    """Whether ``operand`` is a ``U32``/``U64`` column: a comparison reading one is not pushed into the Lance scan (module docstring)."""
    return isinstance(operand, Column) and isinstance(operand.type, ScalarType) and operand.type.name in ("U32", "U64")


PUSHED_OPS = frozenset({"=", "!=", "<", "<=", ">", ">="})
MAX_PUSHED_PER_VARIABLE = 8
"""The most comparisons of one variable in one block that are pushed into its Lance scan; the
scan's filter costs twice as much to build with each more (about 1 s at 18, 45 s at 22)."""


def scan_pushed(block: Block) -> tuple[list[bool], list[bool]]:
    """Per comparison, then per other condition of ``block``, whether it is pushed into its variable's Lance scan.

    A comparison: a column compared with a constant by ``= != < <= > >=``, not on an unsigned
    column. A condition: one whose :func:`scan_columns` are one variable's. Each counts its
    columns (a comparison one) against :data:`MAX_PUSHED_PER_VARIABLE` per variable, comparisons
    first, in the order written; one past the bound is applied by DuckDB after the scan (the
    same rows, see :func:`compare_sql` and :func:`condition_sql`).
    """
    counts: dict[int, int] = {}

    def within(var: int, columns: int) -> bool:
        if counts.get(var, 0) + columns > MAX_PUSHED_PER_VARIABLE:
            return False
        counts[var] = counts.get(var, 0) + columns
        return True

    compares: list[bool] = []
    for compare in block.compares:
        sides = (compare.left, compare.right)
        column = next((side for side in sides if isinstance(side, Column)), None)
        pushable = column is not None and any(isinstance(side, Const) for side in sides) and compare.op in PUSHED_OPS
        compares.append(column is not None and pushable and not unsigned_column(column) and within(column.var, 1))
    conditions: list[bool] = []
    for condition in block.conditions:
        columns = scan_columns(condition)
        variables = {column.var for column in columns or ()}
        conditions.append(columns is not None and len(variables) == 1 and within(variables.pop(), len(columns)))
    return compares, conditions


def scan_columns(condition: Condition) -> list[Column] | None:
    """The columns ``condition`` reads when DuckDB can hand all of it to a scan, else None.

    That is: comparisons of a column with a constant by ``= != < <= > >=`` and null tests,
    joined by and/or/not, none on an unsigned or vector column (which the scan refuses).
    """
    if isinstance(condition, Junction):
        left, right = scan_columns(condition.left), scan_columns(condition.right)
        return None if left is None or right is None else left + right
    if isinstance(condition, Inverse):
        return scan_columns(condition.part)
    if isinstance(condition, Compare):
        sides = [condition.left, condition.right]
        if condition.op not in PUSHED_OPS or all(isinstance(side, Column) for side in sides):
            return None
    elif isinstance(condition, (NullCheck, Truth)):
        sides = [condition.operand]
        if isinstance(condition, Truth) and isinstance(condition.operand, Column):
            return None  # DuckDB filters a bare Bool column itself
    else:
        return None
    columns = [side for side in sides if isinstance(side, Column)]
    refused = any(unsigned_column(column) or isinstance(column.type, VectorType) for column in columns)
    return None if refused else columns


def compares_sql(compares: Sequence[Compare], params: SqlParams) -> list[str]:
    """The SQL conditions of ``compares`` (a block's, or a search's seed conditions), each pushed or not as :func:`scan_pushed` says."""
    pushed, _ = scan_pushed(Block((), (), tuple(compares), ()))
    return [compare_sql(compare, params, pushed=flag) for compare, flag in zip(compares, pushed, strict=True)]


def compare_sql(compare: Compare, params: SqlParams, *, pushed: bool = True, keep_null: bool = False) -> str:
    """``compare`` as a SQL condition (never true when a side is NULL).

    ``pushed`` False (or an unsigned column) writes it as ``coalesce(comparison, FALSE)``, which
    DuckDB does not push into the scan (module docstring). ``keep_null``: the condition is NULL,
    not FALSE, when a side is NULL (inside ``not``, the two differ), also when it reads an
    unsigned column.
    """
    text = _compare_sql(compare, params)
    if unsigned_column(compare.left) or unsigned_column(compare.right):
        return _unpushed(text) if keep_null else f"coalesce({text}, FALSE)"
    if not pushed:
        return f"coalesce({text}, FALSE)"
    return text


def _unpushed(condition: str) -> str:
    """``condition`` with its truth value kept (NULL too), in a form DuckDB does not push into the scan."""
    return f"CASE {condition} WHEN TRUE THEN TRUE WHEN FALSE THEN FALSE END"


def condition_sql(condition: Condition, params: SqlParams, block: BlockSql) -> str:
    """``condition`` as a SQL boolean with SQL's three-valued logic (module docstring)."""
    if isinstance(condition, Compare):
        return compare_sql(condition, params, keep_null=True)
    if isinstance(condition, Junction):
        left, right = condition_sql(condition.left, params, block), condition_sql(condition.right, params, block)
        return f"({left} {condition.op.upper()} {right})"
    if isinstance(condition, Inverse):
        return f"(NOT {condition_sql(condition.part, params, block)})"
    if isinstance(condition, NullCheck):
        text = f"({operand_sql(condition.operand, None, params)} IS {'NOT ' if condition.negated else ''}NULL)"
        operand = condition.operand
        refused = unsigned_column(operand) or (isinstance(operand, Column) and isinstance(operand.type, VectorType))
        return _unpushed(text) if refused else text
    if not isinstance(condition, SubQuery):  # a Bool operand
        return operand_sql(condition.operand, None, params)
    froms, conditions = block(condition.block)
    if condition.op is None:
        return f"EXISTS ({select_sql('1', froms, conditions)})"
    assert condition.right is not None
    ids = ", ".join(f"v{var.index}.id" for var in condition.block.variables) or "1"
    cast = "DOUBLE" if _is_float(condition.right.type) else "HUGEINT"
    count = f"CAST((SELECT count(*) FROM ({select_sql(f'DISTINCT {ids}', froms, conditions)})) AS {cast})"
    return f"({count} {_OPS[condition.op]} {operand_sql(condition.right, cast, params)})"


def select_sql(what: str, froms: list[str], conditions: list[str]) -> str:
    """``SELECT what [FROM froms] [WHERE conditions]`` (a sub-block's query)."""
    sql = f"SELECT {what}" + (f" FROM {', '.join(froms)}" if froms else "")
    return sql + (f" WHERE {' AND '.join(conditions)}" if conditions else "")


def _compare_sql(compare: Compare, params: SqlParams) -> str:
    if compare.op == "in":  # x in list: the list contains x
        return _compare_sql(Compare(compare.right, "contains", compare.left), params)
    left, op, right = compare.left, compare.op, compare.right
    if op == "starts_with":
        return f"starts_with({operand_sql(left, None, params)}, {operand_sql(right, None, params)})"
    if op == "contains" and not isinstance(left.type, ListType):
        return f"contains({operand_sql(left, None, params)}, {operand_sql(right, None, params)})"
    if op == "contains":
        assert isinstance(left.type, ListType)
        item = left.type.item
        list_cast: str | None = None
        right_cast: str | None = sql_type(item)
        if family(item) == "number":
            item_cast, right_cast = _numeric_types(item, right.type, None, _const(right))
            list_cast = None if item_cast is None else f"{item_cast}[]"
        member = operand_sql(right, right_cast, params)
        text = f"list_contains({operand_sql(left, list_cast, params)}, {member})"
        if isinstance(right, Const) and right.value is not None:
            return text
        return f"CASE WHEN {member} IS NULL THEN NULL ELSE {text} END"  # list_contains([], NULL) is FALSE
    left_cast = right_cast = None
    if family(left.type) == "number" and family(right.type) == "number":
        left_cast, right_cast = _numeric_types(left.type, right.type, _const(left), _const(right))
    return f"({operand_sql(left, left_cast, params)} {_OPS[op]} {operand_sql(right, right_cast, params)})"


Relation = Callable[[Hop], str | None]
BlockSql = Callable[[Block], tuple[list[str], list[str]]]


def edge_rows(hop: Hop) -> str:
    """The ``(src, dst)`` rows ``hop`` follows: its edge view, and for an undirected hop the view mirrored too."""
    view = quote(hop.edge.table_key)
    if not hop.undirected:
        return view
    return f"(SELECT src, dst FROM {view} UNION ALL SELECT dst AS src, src AS dst FROM {view})"


def bound_edge_rows(hop: Hop) -> str:
    """The edge rows, every column, a bound edge reads: the view, and for an undirected hop the view mirrored too."""
    view = quote(hop.edge.table_key)
    if not hop.undirected:
        return view
    return f"(SELECT * FROM {view} UNION ALL SELECT * REPLACE (dst AS src, src AS dst) FROM {view})"


class _Compiler:
    def __init__(
        self, relation: Relation, params: SqlParams, views: Mapping[int, str], edge_views: Mapping[Hop, str], rows: Mapping[str, int]
    ) -> None:
        self._relation = relation
        self._params = params
        self._views = views
        self._edge_views = edge_views
        self._rows = rows
        self._hops = 0

    def block(self, block: Block) -> tuple[list[str], list[str]]:
        """The FROM items and WHERE conditions of ``block`` (its negations as NOT EXISTS)."""
        froms, conditions, _ = self.split_block(block, split=False)
        return froms, conditions

    def split_block(self, block: Block, *, split: bool = True) -> tuple[list[str], list[str], list[tuple[str, list[Column]]]]:
        """:meth:`block`, with (``split``) its :func:`crossing` comparisons and conditions apart.

        Each of those is its SQL and the columns it reads.
        """
        sized: list[tuple[int, str]] = []
        for var in block.variables:
            if not var.is_edge:
                name = self._views.get(var.index, var.table.table_key)
                sized.append((self._rows.get(name, 0), f"{quote(name)} AS v{var.index}"))
        conditions: list[str] = []
        for hop in block.hops:
            alias = f"h{self._hops}"
            self._hops += 1
            pairs = self._relation(hop)
            view = self._edge_views.get(hop)
            edges = self._rows.get(hop.edge.table_key, 0)
            size = edges if view is None else self._rows.get(view, edges)
            if hop.edge_var is not None:
                sized.append((size, f"{quote(view) if view else bound_edge_rows(hop)} AS v{hop.edge_var}"))
                conditions += [f"v{hop.edge_var}.src = v{hop.src}.id", f"v{hop.edge_var}.dst = v{hop.dst}.id"]
            elif pairs is None:
                sized.append((size, f"{quote(view) if view else edge_rows(hop)} AS {alias}"))
                conditions += [f"{alias}.src = v{hop.src}.id", f"{alias}.dst = v{hop.dst}.id"]
            else:
                sized.append((self._rows.get(pairs, edges), f"{quote(pairs)} AS {alias}"))
                conditions += [f"{alias}.a = v{hop.src}.id", f"{alias}.b = v{hop.dst}.id"]
        froms = [item for _, item in sorted(sized, key=lambda pair: -pair[0])]  # largest first, stable (module docstring)
        crossed: list[tuple[str, list[Column]]] = []
        compares_pushed, conditions_pushed = scan_pushed(block)
        for compare, pushed in zip(block.compares, compares_pushed, strict=True):
            text = compare_sql(compare, self._params, pushed=pushed)
            columns = crossing(compare) if split else None
            conditions += [text] if columns is None else []
            crossed += [] if columns is None else [(text, columns)]
        conditions += [text_match_sql(match, self._params) for match in block.text_matches]
        conditions += [f"v{var}.id = {self._params.add(node_id, 'VARCHAR')}" for var, node_id in implied_ids(block)]
        for condition, pushed in zip(block.conditions, conditions_pushed, strict=True):
            text = condition_sql(condition, self._params, self.block)
            text = text if pushed or scan_columns(condition) is None else _unpushed(text)
            columns = crossing(condition) if split else None
            conditions += [text] if columns is None else []
            crossed += [] if columns is None else [(text, columns)]
        for negation in block.negations:
            conditions.append(f"NOT EXISTS ({select_sql('1', *self.block(negation))})")
        return froms, conditions, crossed


def _columns(condition: Condition) -> list[Column] | None:
    """The columns ``condition`` reads, in the order written; None when it holds a sub-pattern (``exists``/``count``)."""
    if isinstance(condition, Junction):
        left, right = _columns(condition.left), _columns(condition.right)
        return None if left is None or right is None else left + right
    if isinstance(condition, Inverse):
        return _columns(condition.part)
    if isinstance(condition, SubQuery):
        return None
    sides = [condition.left, condition.right] if isinstance(condition, Compare) else [condition.operand]
    return [side for side in sides if isinstance(side, Column)]


def crossing(condition: Condition) -> list[Column] | None:
    """The columns of ``condition`` when it compares two or more variables (and holds no sub-pattern), else None.

    :func:`statement` applies such a condition after the joins that bind its variables.
    """
    columns = _columns(condition)
    return columns if columns is not None and len({column.var for column in columns}) > 1 else None


def any_rows(bound: BoundRead) -> bool:
    """Whether the answer is any ``limit`` rows: a ``limit`` without ``order`` and without an aggregate."""
    return bound.limit is not None and not bound.order and not bound.grouped


def _direction(key: SortKey) -> str:
    return "DESC NULLS LAST" if key.descending else "ASC NULLS FIRST"


def _score_direction(key: SortKey) -> str:
    return "DESC NULLS LAST" if key.descending else "ASC NULLS LAST"


Score = NearestScore | Bm25Score | RrfScore
"""A search function's value per row: a ``nearest`` distance, a ``bm25`` relevance or an ``rrf`` fusion."""


def key_score(bound: BoundRead, key: SortKey) -> Score | None:
    """The search score the order key ``key`` sorts by, directly or through a returned one; None for any other key."""
    if key.output is not None:
        return bound.outputs[key.output].score
    return key.score


def scores(bound: BoundRead) -> list[Score]:
    """The distinct search scores ``bound`` returns or orders by, in that order (an ``rrf`` after its two rankings)."""
    found: list[Score] = []
    for score in [o.score for o in bound.outputs] + [k.score for k in bound.order]:
        parts = [score.first, score.second, score] if isinstance(score, RrfScore) else [score]
        found += [part for part in parts if part is not None and part not in found]
    return found


def _rank_sql(score: NearestScore | Bm25Score, column: str) -> str:
    """The 1-based rank of the row's entity in ``score``'s ranking (NULL when not ranked), ties by id."""
    if isinstance(score, NearestScore):
        ranked, direction = f"{column} IS NOT NULL", "ASC"
    else:
        ranked, direction = f"coalesce({column} > 0, FALSE)", "DESC"
    window = f"PARTITION BY {ranked} ORDER BY {column} {direction}, k{score.var} ASC"
    return f"CASE WHEN {ranked} THEN dense_rank() OVER ({window}) END"


def fusion_sql(score: RrfScore, names: Mapping[Score, str]) -> str:
    """``rrf``: the sum of ``1 / (k + rank)`` over the two rankings (0 for a ranking the row is not in)."""
    terms = [f"coalesce(1.0 / ({int(score.k)} + {_rank_sql(part, names[part])}), 0.0)" for part in (score.first, score.second)]
    return " + ".join(terms)


def distance_sql(score: NearestScore, params: SqlParams) -> str:
    """The L2 distance of ``score``'s vector column from its query vector, in double precision (NULL when either is null)."""
    vector = None if score.vector is None else list(score.vector)
    array = f"DOUBLE[{score.dim}]"
    return f"array_distance(CAST(v{score.var}.{quote(score.column)} AS {array}), {params.add(vector, array)})"


def tokens_sql(text: str) -> str:
    """The SQL list of the tokens of the string expression ``text`` (:func:`omnigraph.engine.gq.search.tokens`; NULL for NULL)."""
    return f"regexp_extract_all(lower({text}), '[\\p{{L}}\\p{{N}}]+')"


def text_match_sql(match: TextMatch, params: SqlParams) -> str:
    """``search``/``match_text``/``fuzzy`` as a SQL condition (:mod:`omnigraph.engine.gq.search`; never true on NULL)."""
    wanted = [] if match.query is None else sorted(set(tokens(match.query)))
    if not wanted:
        return "FALSE"
    text = tokens_sql(f"v{match.var}.{quote(match.column)}")
    if match.func == "search":
        return f"list_has_all({text}, {params.add(wanted, 'VARCHAR[]')})"
    if match.func == "match_text":
        return f"list_has_any({text}, {params.add(wanted, 'VARCHAR[]')})"
    near = []
    for token in wanted:
        edits = default_max_edits(token) if match.max_edits is None else match.max_edits
        near.append(f"len(list_filter({text}, lambda t: levenshtein(t, {params.add(token, 'VARCHAR')}) <= {int(edits)})) > 0")
    return f"({' AND '.join(near)})"


def _carried_sql(var: int, columns: list[str]) -> str:
    """The columns of variable ``var`` a crossing condition reads, as a struct named ``v{var}``.

    The condition's SQL reads them unchanged: ``v{var}."age"`` is the struct's field.
    """
    fields = ", ".join(f"{quote(column)} := v{var}.{quote(column)}" for column in columns)
    return f"struct_pack({fields}) AS v{var}"


def statement(
    bound: BoundRead,
    relation: Relation,
    candidates: Mapping[int, str] | None = None,
    bm25: Mapping[Bm25Score, str] | None = None,
    *,
    views: Mapping[int, str] | None = None,
    edge_views: Mapping[Hop, str] | None = None,
    rows: Mapping[str, int] | None = None,
    repeatable: bool = False,
) -> tuple[str, list[object]]:
    """The SQL text and parameter values of ``bound`` (see the module docstring).

    ``candidates`` maps a variable to a registered table whose ``id`` column lists the only nodes
    it may bind (the candidates a vector index found, :mod:`omnigraph.engine.query.search`).
    ``bm25`` holds the SQL of each ``bm25`` score ``bound`` returns or orders by
    (:func:`omnigraph.engine.query.search.bm25_sql`).
    ``views`` maps a node variable to a registered table that holds the only rows of its node
    table it may bind (all their columns but blobs; the rows an n-gram index found,
    :mod:`omnigraph.engine.query.search`, or a probe, :mod:`omnigraph.engine.query.probe`),
    scanned instead of the node table; ``edge_views`` maps a directed ``{1,1}`` hop of the match
    to a registered table holding the only edge rows it may follow (every column), read instead
    of the edge table.
    ``rows``: the row count of each table and registered table by name, which orders the joins
    (the module docstring); a name it lacks counts as empty.
    ``repeatable``: a :func:`any_rows` answer keeps its tie-break order (the first ``N`` rows).
    """
    params = SqlParams()
    froms, conditions, crossed = _Compiler(relation, params, views or {}, edge_views or {}, rows or {}).split_block(bound.block)
    for var, table in sorted((candidates or {}).items()):
        conditions.append(f"v{var}.id IN (SELECT id FROM {quote(table)})")
    top = bound.block.variables
    found = scores(bound)
    names: dict[Score, str] = {score: f"s{index}" for index, score in enumerate(found)}
    columns: dict[Column, str] = {}
    for needed in [o.column for o in bound.outputs] + [k.column for k in bound.order]:
        if needed is not None and needed not in columns:
            columns[needed] = f"c{len(columns)}"
    selected = [f"v{var.index}.id AS k{var.index}" for var in top]
    selected += [f"v{c.var}.{quote(c.column)} AS {name}" for c, name in columns.items()]
    for score, name in names.items():
        if isinstance(score, NearestScore):
            selected.append(f"{distance_sql(score, params)} AS {name}")
        elif isinstance(score, Bm25Score):
            selected.append(f"{(bm25 or {})[score]} AS {name}")
    carried: dict[int, dict[str, None]] = {}
    for _, read in crossed:
        for column in read:
            carried.setdefault(column.var, {})[column.column] = None
    selected += [_carried_sql(var, list(names_)) for var, names_ in sorted(carried.items())]
    match = f"SELECT DISTINCT {', '.join(selected)} FROM {', '.join(froms)}"
    if conditions:
        match += f" WHERE {' AND '.join(conditions)}"
    if crossed:  # joined first, then compared (module docstring)
        kept = f"SELECT * EXCLUDE ({', '.join(f'v{var}' for var in sorted(carried))}) FROM j WHERE {' AND '.join(t for t, _ in crossed)}"
        match = f"{match}), m AS ({kept}"
    outputs: list[str] = []
    for index, output in enumerate(bound.outputs):
        if output.score is not None:
            expr = names[output.score]
        elif output.func is None:
            assert output.column is not None
            expr = columns[output.column]
        elif output.func == "count":
            expr = f"count(k{output.var})"
        else:
            assert output.column is not None
            expr = f"{output.func}({columns[output.column]})"
        outputs.append(f"{expr} AS o{index}")
    fused = [f"{fusion_sql(score, names)} AS {names[score]}" for score in found if isinstance(score, RrfScore)]
    head = "WITH j AS MATERIALIZED" if crossed else "WITH m AS"
    if fused:
        sql = f"{head} ({match}), f AS (SELECT *, {', '.join(fused)} FROM m) SELECT {', '.join(outputs)} FROM f"
    else:
        sql = f"{head} ({match}) SELECT {', '.join(outputs)} FROM m"
    keys: list[str] = []
    for key in bound.order:
        if key.output is not None:
            target = f"o{key.output}"
        elif key.score is not None:
            target = names[key.score]
        else:
            assert key.column is not None  # a key that names no output names a column
            target = columns[key.column]
        keys.append(f"{target} {_score_direction(key) if key_score(bound, key) is not None else _direction(key)}")
    if bound.grouped:
        groups = [f"o{i}" for i, output in enumerate(bound.outputs) if output.func is None]
        if groups:
            sql += f" GROUP BY {', '.join(groups)}"
        keys += [f"{group} ASC NULLS FIRST" for group in groups]
    else:
        keys += [f"k{var.index} ASC" for var in top]
    if keys and (repeatable or not any_rows(bound)):
        sql += f" ORDER BY {', '.join(keys)}"
    if bound.limit is not None:
        sql += f" LIMIT {int(bound.limit)}"
    return sql, params.values
