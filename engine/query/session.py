"""The DuckDB session a read query runs in, and the variable-length traversals built in it.

One DuckDB database per process, created on first use, holds every query's memory: it is
limited to ``OMNIGRAPH_QUERY_MEMORY_MB`` MiB (default :data:`DEFAULT_MEMORY_MB`, read when the
database is created), and intermediate results beyond it spill to a temporary directory removed
when the process exits. Memory a finished query freed goes back to the operating system within
about a second of idling (DuckDB's allocator purges from background threads), so a long-lived
process does not keep the peak of its largest query resident. Each query runs on a connection
of its own (:func:`open_session`: a cursor, so its registered tables and temp tables are
invisible to other queries, and it costs well under a millisecond, where opening a database
costs tens). A query that still cannot fit is ``resource_limit`` ``{resource: "query_memory", limit, actual}`` (bytes; ``actual`` is the
limit it reached). Spilled results are bounded on disk, a session by a time limit and a
cancellation token, and every other DuckDB failure is typed, never with SQL in its message, by
:mod:`omnigraph.engine.query.limits`.

Variable-length traversals (:class:`Traversals`): the (source, destination) pairs of a hop, as a
table ``(a, b)`` of the session (a DuckDB temp table, or a registered Arrow table). The
reference's rule, breadth-first from each source ``s``: ``s`` counts as visited; hop ``k``
reaches the unvisited nodes one edge away from those reached at hop ``k - 1`` (they become
visited and are not expanded again), and a node reached at hop ``k - 1`` that has a stored
self-loop is reported again at hop ``k``. So a pair ``(s, x)`` is reported when the shortest
distance ``d`` from ``s`` to ``x`` (``d = 0`` for ``x = s``) lies in ``min..max``, or when ``x``
has a self-loop and ``d + 1`` does. Each pair at most once.

The search runs over the edge image's adjacency when the process's cache holds one within its
bound (:mod:`omnigraph.engine.query.adjacency`: numpy over CSR arrays, the resulting pairs
registered with the session as an Arrow table); otherwise (an image too large for the bound, a
search whose pairs would not fit the share of memory it may take, or no cache) it runs in
DuckDB. Both report the same pairs, from the same seeds (below), and check the time limit and
cancellation before every hop.

The search in DuckDB is one join of the frontier with the edges per hop (the edge
scan filtered on the frontier's nodes; the join also finds the frontier's self-loops, so no
separate scan of the edges looks for them), then an ``INSERT ... SELECT`` into a table
``(s, n, d)`` of reached nodes and their distance (an anti-join with it is the visited set),
starting from a *seed* set. The pair set of a source depends on that source alone, so any
superset of the sources a query can bind gives the same answer: the seeds are the rows of the
variable's node table that pass the comparisons of that variable alone in the block that
introduces it. When the source variable has none and the destination does, the search runs
backwards from the destinations (``d`` is then the distance to the seed; the self-loop that
counts is the seed's). With neither, the sources are every node with an outgoing edge.

An undirected hop (``$a <edge> $b``) walks the same way over the edge rows and their mirror
(:func:`omnigraph.engine.query.plan.edge_rows`): each edge joins its ends both ways.

Ids are unique per node type only: when the edge's endpoints are of different types, a second
hop would join ids of different types, so only hop 1 exists (and a self-loop cannot), and a
destination whose id equals its source's is another node, reported like any other.

Stopping early (:func:`stop_after`): a query that asks for any ``N`` rows
(:func:`omnigraph.engine.query.plan.any_rows`) whose match is one variable-length traversal
between two distinct variables, with no negation, no other condition or text match, no other
variable and no comparison but the seed variable's own, has one row per reported pair. Every pair the search reported up to some
hop is a pair of the complete answer (a shortest distance never shrinks), so the search stops
expanding, before the next hop, once ``N`` pairs are reported; the answer is then ``N`` of them.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from omnigraph.engine.errors import BadRequest, ResourceLimit
from omnigraph.engine.gq.read_checker import Block, BoundRead, Compare, Const, Hop
from omnigraph.engine.query.adjacency import (
    EDGE_BYTES,
    PAIRS_SHARE,
    PinnedImage,
    Walk,
    adjacency_cache,
    build_adjacency,
    cache_limit_bytes,
    pair_table,
    search,
)
from omnigraph.engine.query.limits import Guard, QueryCancel, spill_limit_mb, timeout_seconds
from omnigraph.engine.query.plan import SqlParams, any_rows, compares_sql, edge_rows, quote

if TYPE_CHECKING:
    import duckdb


DEFAULT_MEMORY_MB = 1024
MEMORY_ENV = "OMNIGRAPH_QUERY_MEMORY_MB"


def memory_limit_mb() -> int:
    """The configured memory limit of one query, in MiB."""
    raw = os.environ.get(MEMORY_ENV, str(DEFAULT_MEMORY_MB))
    if not raw.isdigit() or int(raw) < 16:
        raise BadRequest(f"{MEMORY_ENV}={raw!r}: expected a whole number of MiB, at least 16", {"value": raw})
    return int(raw)


class Session:
    """One DuckDB connection; :meth:`execute` translates failures as the module docstring says."""

    def __init__(self, connection: duckdb.DuckDBPyConnection, limit_mb: int, guard: Guard, spill_mb: int) -> None:
        self.connection = connection
        self.limit_mb = limit_mb
        self._limit_bytes = limit_mb * 1024 * 1024
        self._guard = guard
        self._spill_bytes = spill_mb * 1024 * 1024
        self._unregistered: dict[str, Any] = {}
        self.rows: dict[str, int] = {}
        """The row count of each registered table, by name (what orders the statement's joins)."""

    def register(self, name: str, table: Any, rows: int | None = None) -> None:
        """Make ``table`` (a Lance dataset or an Arrow table) readable as ``name`` by the session's statements.

        ``rows``: its row count (an Arrow table's own by default; a Lance image's from the manifest).
        It is registered with DuckDB just before the first statement that names it runs (quoted,
        as :func:`omnigraph.engine.query.plan.quote` writes every registered name): registering
        costs about half a millisecond, and a query whose probes replace a table never names it.
        """
        self._unregistered[name] = table
        counted = table.num_rows if rows is None and isinstance(table, pa.Table) else rows
        if counted is not None:
            self.rows[name] = counted

    def _prepare(self, sql: str) -> None:
        """Ready the session to run ``sql``: stop if the query must, end unread rows, register what it names.

        The previous statement's unread rows are ended because DuckDB neither registers a table
        nor runs a relation while a result is unread (a new ``execute`` would end them anyway).
        """
        self._guard.check()
        self.connection.abort()
        for name in [name for name in self._unregistered if quote(name) in sql]:
            self.connection.register(name, self._unregistered.pop(name))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> duckdb.DuckDBPyConnection:
        """Run ``sql`` with ``params``; the executed statement, its rows to fetch.

        Failures are typed as the module docstring says (never with the SQL in the message).
        """
        import duckdb  # loaded already: the connection is DuckDB's

        self._prepare(sql)
        try:
            return self.connection.execute(sql, list(params))
        except duckdb.Error as error:
            raise self._typed(error) from error

    @property
    def limit_bytes(self) -> int:
        """The query's memory limit in bytes."""
        return self._limit_bytes

    def check(self) -> None:
        """Raise the timeout or the cancellation if the query must stop."""
        self._guard.check()

    def arrow(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        """The rows of ``sql`` with ``params`` as one Arrow table; failures typed as :meth:`execute`'s."""
        import duckdb  # loaded already: the connection is DuckDB's

        self._prepare(sql)
        try:
            return self.connection.sql(sql, params=list(params)).to_arrow_table()
        except duckdb.Error as error:
            raise self._typed(error) from error

    def fetch(self, cursor: duckdb.DuckDBPyConnection, size: int) -> list[tuple[Any, ...]]:
        """The next ``size`` rows of an executed statement (fewer at the end)."""
        import duckdb  # loaded already: the cursor is DuckDB's

        self._guard.check()
        try:
            return cursor.fetchmany(size)
        except duckdb.Error as error:
            raise self._typed(error) from error

    def _typed(self, error: duckdb.Error) -> Exception:
        first = str(error).split("\n", 1)[0]
        memory = ResourceLimit(
            "query_memory",
            self._limit_bytes,
            self._limit_bytes,
            f"the query needs more than its memory limit of {self._limit_bytes // (1024 * 1024)} MiB even "
            f"when spilling to disk ({first}); make it more selective, add a limit, or raise {MEMORY_ENV}",
        )
        return self._guard.typed(error, memory, self._spill_bytes)


class _Database:
    """The process's DuckDB database, created on first use (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._spill: tempfile.TemporaryDirectory[str] | None = None
        self.limit_mb = 0
        self.spill_mb = 0
        self.threads = max(1, os.cpu_count() or 1)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A new cursor of the database; the first call imports DuckDB and creates the database."""
        import duckdb

        with self._lock:
            if self._connection is None:
                self.limit_mb = memory_limit_mb()
                self.spill_mb = spill_limit_mb()
                self._spill = tempfile.TemporaryDirectory(prefix="omnigraph-query-")
                self._connection = duckdb.connect(
                    config={
                        "memory_limit": f"{self.limit_mb}MiB",
                        "temp_directory": self._spill.name,
                        "max_temp_directory_size": f"{self.spill_mb}MiB",
                        "threads": self.threads,
                        "allocator_background_threads": True,
                    }
                )
            return self._connection.cursor()


_DATABASE = _Database()


@contextmanager
def open_session(*, one_thread: bool = False, cancel: QueryCancel | None = None, started: float | None = None) -> Iterator[Session]:
    """A fresh connection to the process's database, closed when the block ends.

    The session's statements are bounded by the time limit (read when the block starts, counted
    from ``started``, a ``time.monotonic()`` reading, or from now) and stopped by ``cancel``
    (:mod:`omnigraph.engine.query.limits`).

    ``one_thread``: the database runs on one thread while the block runs (a database-wide
    setting, for a process that runs one query at a time), so a float aggregate adds its values
    in scan order and gives the same bits on every run; in parallel the order, and so the last
    bits of a ``sum`` or ``avg`` of floats, vary from run to run.
    """
    timeout = timeout_seconds()
    connection = _DATABASE.cursor()
    guard = Guard(connection, timeout, cancel, started=started)
    try:
        if one_thread:
            connection.execute("SET threads = 1")
        yield Session(connection, _DATABASE.limit_mb, guard, _DATABASE.spill_mb)
    finally:
        guard.close()
        if one_thread:
            connection.execute(f"SET threads = {_DATABASE.threads}")
        connection.close()


LISTED_FRONTIER = 4096
"""A frontier of at most this many nodes is written into the edge scan's filter as literals,
which the Lance scan applies (fewer rows leave Lance); a larger one is a semi-join with the
reached nodes."""


def string_literal(value: str) -> str:
    """``value`` as a SQL string literal (quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"


def _alone(compare: Compare, var: int) -> bool:
    """True if ``compare`` reads variable ``var`` and nothing but constants otherwise."""
    sides = (compare.left, compare.right)
    return all(isinstance(side, Const) or side.var == var for side in sides) and any(not isinstance(side, Const) for side in sides)


def _declaring_blocks(block: Block, found: dict[int, Block] | None = None) -> dict[int, Block]:
    found = {} if found is None else found
    for var in block.variables:
        found[var.index] = block
    for nested in block.nested:
        _declaring_blocks(nested, found)
    return found


SearchStart = Literal["sources", "destinations", "every source"]


def seed_conditions(bound: BoundRead, var: int) -> list[Compare]:
    """The comparisons of variable ``var`` alone in the block that introduces it: what picks its seeds."""
    return [c for c in _declaring_blocks(bound.block)[var].compares if _alone(c, var)]


def search_start(bound: BoundRead, hop: Hop) -> SearchStart:
    """Where the breadth-first search of a variable-length ``hop`` starts (the module docstring).

    ``sources``: the source variable's rows that pass its own comparisons; ``destinations``: the
    destination's, searching backwards (the source has none and the destination has some);
    ``every source``: every node with an outgoing edge (neither has any).
    """
    if seed_conditions(bound, hop.src):
        return "sources"
    return "destinations" if seed_conditions(bound, hop.dst) else "every source"


def stop_after(bound: BoundRead, hop: Hop) -> int | None:
    """The pair count after which the search of ``hop`` may stop (the module docstring), or None when it runs to its end."""
    block = bound.block
    if not any_rows(bound) or block.negations or block.conditions or block.text_matches or block.hops != (hop,) or hop.src == hop.dst:
        return None
    if {var.index for var in block.variables} != {hop.src, hop.dst}:
        return None
    seed = hop.src if search_start(bound, hop) != "destinations" else hop.dst
    if not all(_alone(compare, seed) for compare in block.compares):
        return None
    return bound.limit


class Traversals:
    """Builds the pair table of each variable-length hop of one query, in one session.

    ``edges``: the pinned image of each edge table the query reads; a hop whose image has an
    adjacency within the cache's bound is searched over it (:mod:`omnigraph.engine.query.adjacency`)
    and its pairs registered with the session as an Arrow table, any other in DuckDB. The pair
    table is ``(a, b)`` under the same name either way.

    ``repeatable``: every search runs to its end (no :func:`stop_after`), so that a ``limit``
    answer is the first ``N`` rows of the complete one.
    """

    def __init__(
        self, session: Session, bound: BoundRead, *, edges: Mapping[str, PinnedImage] | None = None, repeatable: bool = False
    ) -> None:
        self._session = session
        self._bound = bound
        self._edges = edges or {}
        self._built: dict[Hop, str] = {}
        self._registered: list[pa.Table] = []
        self._repeatable = repeatable

    def relation(self, hop: Hop) -> str | None:
        """None for a ``{1,1}`` hop (joined with the edge view); else the pair table ``(a, b)``."""
        if hop.min_hops == 1 and hop.max_hops == 1:
            return None
        if hop not in self._built:
            self._built[hop] = self._build(hop, f"pairs{len(self._built)}")
        return self._built[hop]

    def _build(self, hop: Hop, name: str) -> str:
        forward = search_start(self._bound, hop) != "destinations"
        seed_var = hop.src if forward else hop.dst
        params = SqlParams()
        conditions = seed_conditions(self._bound, seed_var)
        seeds = None
        if conditions or not forward:
            table = quote(self._bound.variables[seed_var].table.table_key)
            where = " AND ".join(compares_sql(conditions, params)) or "TRUE"
            seeds = f"SELECT v{seed_var}.id AS id FROM {table} AS v{seed_var} WHERE {where}"
        enough = None if self._repeatable else stop_after(self._bound, hop)
        pairs = self._adjacent_pairs(hop, forward, seeds, params, enough)
        if pairs is None:
            return self._search_in_duckdb(hop, name, forward, seeds, params, enough)
        self._session.register(name, pairs)
        self._registered.append(pairs)
        return name

    def _adjacent_pairs(self, hop: Hop, forward: bool, seeds: str | None, params: SqlParams, enough: int | None) -> pa.Table | None:
        """The pair table searched over the edge image's adjacency; None when it has none within the bound."""
        image = self._edges.get(hop.edge.table_key)
        if image is None:
            return None
        limit = self._session.limit_bytes // PAIRS_SHARE
        one_space = hop.edge.from_type == hop.edge.to_type
        adjacency = adjacency_cache().get(
            image.key,
            lambda: build_adjacency(image.dataset, one_space, self._session.check),
            cache_limit_bytes(self._session.limit_mb),
            image.rows * EDGE_BYTES,
        )
        if adjacency is None:
            return None
        if seeds is None:
            positions = adjacency.every_source(hop.undirected)
        else:
            ids = self._session.arrow(f"SELECT DISTINCT id FROM ({seeds})", params.values).column("id").combine_chunks()
            positions = adjacency.positions(ids, "sources" if forward else "targets")
        walk = Walk(hop.min_hops, hop.max_hops, backwards=not forward, undirected=hop.undirected)
        found = search(adjacency, positions, walk, check=self._session.check, enough=enough, limit_bytes=limit)
        return None if found is None else pair_table(adjacency, found, backwards=not forward)

    def _search_in_duckdb(self, hop: Hop, name: str, forward: bool, seeds: str | None, params: SqlParams, enough: int | None) -> str:
        """The pair table searched breadth-first in DuckDB temp tables (the module docstring)."""
        same_type = hop.edge.from_type == hop.edge.to_type
        edges = edge_rows(hop)
        if seeds is None:
            seeds = f"SELECT DISTINCT src AS id FROM {edges}"
        reach, hop_edges, expand, step, loops = (f"{name}_{part}" for part in ("reach", "edges", "expand", "step", "loops"))
        near, far = ("src", "dst") if forward else ("dst", "src")
        run = self._session.execute
        run(f"CREATE TEMP TABLE {reach} AS SELECT DISTINCT id AS s, id AS n, 0 AS d FROM ({seeds})", params.values)
        run(f"CREATE TEMP TABLE {loops} (s VARCHAR, n VARCHAR, d INTEGER)")
        a, b = ("s", "n") if forward else ("n", "s")
        pairs = f"SELECT {a} AS a, {b} AS b FROM {reach} WHERE d BETWEEN {hop.min_hops} AND {hop.max_hops}"
        if same_type and forward:  # a reached node's self-loop reports it again one hop later
            pairs += f" UNION SELECT s AS a, n AS b FROM {loops} WHERE d + 1 BETWEEN {hop.min_hops} AND {hop.max_hops}"
        elif same_type:  # backwards the path ends at the seed: its own self-loop counts
            pairs += (
                f" UNION SELECT n AS a, s AS b FROM {reach} WHERE d + 1 BETWEEN {hop.min_hops} AND {hop.max_hops}"
                f" AND s IN (SELECT s FROM {loops} WHERE d = 0)"
            )
        for depth in range(1, (hop.max_hops if same_type else 1) + 1):
            if enough is not None and (enough == 0 or depth > hop.min_hops) and self._reported(pairs) >= enough:
                break
            # one scan of the edges per hop: the frontier's edges, its self-loops among them
            frontier = f"SELECT DISTINCT n FROM {reach} WHERE d = {depth - 1}"
            first = self._session.fetch(run(f"{frontier} LIMIT {LISTED_FRONTIER + 1}"), LISTED_FRONTIER + 1)
            if len(first) <= LISTED_FRONTIER:  # literals, which DuckDB hands to the Lance scan as its filter
                near_filter = f"{near} IN ({', '.join(string_literal(row[0]) for row in first)})"
            else:
                near_filter = f"{near} IN ({frontier})"
            run(f"CREATE OR REPLACE TEMP TABLE {hop_edges} AS SELECT {near}, {far} FROM {edges} WHERE {near_filter}")
            run(
                f"CREATE OR REPLACE TEMP TABLE {expand} AS SELECT f.s AS s, f.n AS n_from, e.{far} AS n "
                f"FROM {hop_edges} e JOIN {reach} f ON f.n = e.{near} AND f.d = {depth - 1}"
            )
            if same_type:
                run(f"INSERT INTO {loops} SELECT DISTINCT s, n, {depth - 1} FROM {expand} WHERE n = n_from")
            # the visited set; across two node types a seed and a reached node with one id are two nodes
            unvisited = f" WHERE NOT EXISTS (SELECT 1 FROM {reach} r WHERE r.s = x.s AND r.n = x.n)" if same_type else ""
            run(f"CREATE OR REPLACE TEMP TABLE {step} AS SELECT DISTINCT x.s AS s, x.n AS n, {depth} AS d FROM {expand} x{unvisited}")
            (inserted,) = self._session.fetch(run(f"INSERT INTO {reach} SELECT s, n, d FROM {step}"), 1)  # its row count
            (count,) = inserted
            if count == 0:
                break
        run(f"CREATE TEMP TABLE {name} AS {pairs}")
        for table in (reach, hop_edges, expand, step, loops):
            run(f"DROP TABLE IF EXISTS {table}")
        return name

    def _reported(self, pairs: str) -> int:
        (counted,) = self._session.fetch(self._session.execute(f"SELECT count(*) FROM ({pairs})"), 1)  # a count answers one row
        return int(counted[0])
