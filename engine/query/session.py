"""The DuckDB session a read query runs in: bounded memory, spill to disk, typed failures.

One DuckDB database per process, created on first use, holds every query's memory: it is
limited to ``OMNIGRAPH_QUERY_MEMORY_MB`` MiB (default :data:`DEFAULT_MEMORY_MB`, read when the
database is created), and intermediate results beyond it spill to a temporary directory removed
when the process exits. Each query runs on a connection of its own (a cursor: its registered
tables and temp tables are invisible to other queries, and it costs well under a millisecond,
where opening a database costs tens). A query that still cannot fit is ``resource_limit``
``{resource: "query_memory", limit, actual}`` (bytes; ``actual`` is the limit it reached).
Any other DuckDB failure (a Lance scan that failed, for one) is raised as :class:`OSError` so
that :meth:`omnigraph.engine.manifest.Manifest.reading` can tell a branch deleted meanwhile from a
storage error.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from omnigraph.engine.errors import BadRequest, ResourceLimit

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

    def __init__(self, connection: duckdb.DuckDBPyConnection, limit_mb: int) -> None:
        self.connection = connection
        self._limit_bytes = limit_mb * 1024 * 1024

    def execute(self, sql: str, params: Sequence[Any] = ()) -> duckdb.DuckDBPyConnection:
        import duckdb  # loaded already: the connection is DuckDB's

        try:
            return self.connection.execute(sql, list(params))
        except duckdb.OutOfMemoryException as error:
            raise self._memory_error(error) from error
        except duckdb.Error as error:
            raise OSError(f"query execution failed: {error}") from error

    def fetch(self, cursor: duckdb.DuckDBPyConnection, size: int) -> list[tuple[Any, ...]]:
        """The next ``size`` rows of an executed statement (fewer at the end)."""
        import duckdb  # loaded already: the cursor is DuckDB's

        try:
            return cursor.fetchmany(size)
        except duckdb.OutOfMemoryException as error:
            raise self._memory_error(error) from error
        except duckdb.Error as error:
            raise OSError(f"query execution failed: {error}") from error

    def _memory_error(self, error: Exception) -> ResourceLimit:
        return ResourceLimit(
            "query_memory",
            self._limit_bytes,
            self._limit_bytes,
            f"the query needs more than its memory limit of {self._limit_bytes // (1024 * 1024)} MiB even "
            f"when spilling to disk ({error}); make it more selective, add a limit, or raise {MEMORY_ENV}",
        )


class _Database:
    """The process's DuckDB database, created on first use (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._spill: tempfile.TemporaryDirectory[str] | None = None
        self.limit_mb = 0
        self.threads = max(1, os.cpu_count() or 1)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A new cursor of the database; the first call imports DuckDB and creates the database."""
        import duckdb

        with self._lock:
            if self._connection is None:
                self.limit_mb = memory_limit_mb()
                self._spill = tempfile.TemporaryDirectory(prefix="omnigraph-query-")
                self._connection = duckdb.connect(
                    config={
                        "memory_limit": f"{self.limit_mb}MiB",
                        "temp_directory": self._spill.name,
                        "threads": self.threads,
                    }
                )
            return self._connection.cursor()


_DATABASE = _Database()


@contextmanager
def open_session(*, one_thread: bool = False) -> Iterator[Session]:
    """A fresh connection to the process's database, closed when the block ends.

    ``one_thread``: the database runs on one thread while the block runs (a database-wide
    setting, for a process that runs one query at a time), so a float aggregate adds its values
    in scan order and gives the same bits on every run; in parallel the order, and so the last
    bits of a ``sum`` or ``avg`` of floats, vary from run to run."""
    connection = _DATABASE.cursor()
    try:
        if one_thread:
            connection.execute("SET threads = 1")
        yield Session(connection, _DATABASE.limit_mb)
    finally:
        if one_thread:
            connection.execute(f"SET threads = {_DATABASE.threads}")
        connection.close()
