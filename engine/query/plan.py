"""A bound read query as one DuckDB statement over the registered table views.

Shape::

    WITH m AS (SELECT DISTINCT <ids of the match's variables>, <columns used>
               FROM <node views> , <edges or hop pair tables>
               WHERE <joins> AND <comparisons> AND NOT EXISTS (<each negation>))
    SELECT <outputs> FROM m [GROUP BY <group keys>] ORDER BY <keys>, <tie-break> [LIMIT n]

``m`` holds one row per binding of the match's variables (``DISTINCT`` over their ids: a
traversal reports a pair at most once, however many edges join it). A traversal of bounds
``{1,1}`` joins the edge view directly; any other is the pair table
:mod:`omnigraph.engine.query.traverse` built (``relation`` returns its name). A variable whose ``@key``
members all equal constants also gets its implied id as a condition (:mod:`omnigraph.engine.query.keys`). Order: the ``order`` keys
(ascending puts NULL first, descending last), then the bound entities' ids ascending in the
order the variables first appear; a grouped query breaks ties by its group keys instead (NULL
first). Without ``order`` the tie-break alone orders the rows, so every answer has one order.
"""

from __future__ import annotations

from collections.abc import Callable

from omnigraph.engine.gq.bound_read import Block, BoundRead, Column, Hop, SortKey
from omnigraph.engine.query.keys import implied_ids
from omnigraph.engine.query.sql import SqlParams, compare_sql, quote

Relation = Callable[[Hop], str | None]


class _Compiler:
    def __init__(self, relation: Relation, params: SqlParams) -> None:
        self._relation = relation
        self._params = params
        self._hops = 0

    def block(self, block: Block) -> tuple[list[str], list[str]]:
        """The FROM items and WHERE conditions of ``block`` (its negations as NOT EXISTS)."""
        froms = [f"{quote(var.table.table_key)} AS v{var.index}" for var in block.variables]
        conditions: list[str] = []
        for hop in block.hops:
            alias = f"h{self._hops}"
            self._hops += 1
            pairs = self._relation(hop)
            if pairs is None:
                froms.append(f"{quote(hop.edge.table_key)} AS {alias}")
                conditions += [f"{alias}.src = v{hop.src}.id", f"{alias}.dst = v{hop.dst}.id"]
            else:
                froms.append(f"{quote(pairs)} AS {alias}")
                conditions += [f"{alias}.a = v{hop.src}.id", f"{alias}.b = v{hop.dst}.id"]
        conditions += [compare_sql(compare, self._params) for compare in block.compares]
        conditions += [f"v{var}.id = {self._params.add(node_id, 'VARCHAR')}" for var, node_id in implied_ids(block)]
        for negation in block.negations:
            inner_froms, inner_conditions = self.block(negation)
            sub = "SELECT 1" + (f" FROM {', '.join(inner_froms)}" if inner_froms else "")
            if inner_conditions:
                sub += f" WHERE {' AND '.join(inner_conditions)}"
            conditions.append(f"NOT EXISTS ({sub})")
        return froms, conditions


def _direction(key: SortKey) -> str:
    return "DESC NULLS LAST" if key.descending else "ASC NULLS FIRST"


def statement(bound: BoundRead, relation: Relation) -> tuple[str, list[object]]:
    """The SQL text and parameter values of ``bound`` (see the module docstring)."""
    params = SqlParams()
    froms, conditions = _Compiler(relation, params).block(bound.block)
    top = bound.block.variables
    columns: dict[Column, str] = {}
    for needed in [o.column for o in bound.outputs] + [k.column for k in bound.order]:
        if needed is not None and needed not in columns:
            columns[needed] = f"c{len(columns)}"
    selected = [f"v{var.index}.id AS k{var.index}" for var in top]
    selected += [f"v{c.var}.{quote(c.column)} AS {name}" for c, name in columns.items()]
    match = f"SELECT DISTINCT {', '.join(selected)} FROM {', '.join(froms)}"
    if conditions:
        match += f" WHERE {' AND '.join(conditions)}"
    outputs: list[str] = []
    for index, output in enumerate(bound.outputs):
        if output.func is None:
            assert output.column is not None
            expr = columns[output.column]
        elif output.func == "count":
            expr = f"count(k{output.var})"
        else:
            assert output.column is not None
            expr = f"{output.func}({columns[output.column]})"
        outputs.append(f"{expr} AS o{index}")
    sql = f"WITH m AS ({match}) SELECT {', '.join(outputs)} FROM m"
    keys: list[str] = []
    for key in bound.order:
        target = f"o{key.output}" if key.output is not None else columns[key.column]  # type: ignore[index]
        keys.append(f"{target} {_direction(key)}")
    if bound.grouped:
        groups = [f"o{i}" for i, output in enumerate(bound.outputs) if output.func is None]
        if groups:
            sql += f" GROUP BY {', '.join(groups)}"
        keys += [f"{group} ASC NULLS FIRST" for group in groups]
    else:
        keys += [f"k{var.index} ASC" for var in top]
    if keys:
        sql += f" ORDER BY {', '.join(keys)}"
    if bound.limit is not None:
        sql += f" LIMIT {int(bound.limit)}"
    return sql, params.values
