"""What bounds one read query besides its memory limit: spill disk, time, cancellation, answer size.

Spill disk: the intermediate results all queries of a process spill to disk together are
at most ``OMNIGRAPH_QUERY_SPILL_MB`` MiB (default :data:`DEFAULT_SPILL_MB`, DuckDB's
``max_temp_directory_size``); a query that needs more is ``resource_limit`` ``query_spill``.

Time limit: a query may run for ``OMNIGRAPH_QUERY_TIMEOUT_S`` seconds (default
:data:`DEFAULT_TIMEOUT_S`; ``0`` means no limit), counted from when its session opens (once it is
parsed and checked) until its last row is read. Past it the query stops (``timeout``,
:class:`QueryTimeout`): the statement running is interrupted (``duckdb``'s ``interrupt``), and
a traversal expands no further hop.

Cancellation: :class:`QueryCancel` is a token a caller hands to a query and fires from another
thread (a server whose client went away); the query stops the same way, as
:class:`QueryCancelled`.

A :class:`Guard` watches one query's connection: while the query runs, one watcher thread per
process (:class:`_Watcher`, started with the first guard, shared by every query) wakes every
:data:`POLL_S` seconds and, once a query's time limit has passed or its token fired, interrupts
its connection again at every wake until the query ends (DuckDB forgets an interrupt that
arrives between two statements, so one is not enough). :meth:`Guard.check` is also called before
every statement. :meth:`Guard.typed` turns a DuckDB failure into the error the caller sees, and
never with the statement's SQL in its message: an interrupt is the timeout or the cancellation,
memory or spill disk exhausted is ``resource_limit`` (``query_memory`` or ``query_spill``), and
anything else is :class:`OSError` with DuckDB's first line only (a scan of a Lance image that
failed, so that :meth:`omnigraph.engine.manifest.manifest.Manifest.reading` can tell a branch
deleted meanwhile from a storage error).

Answer size: an answer collected whole (the output document; the HTTP API and
:meth:`omnigraph.Graph.query`) holds at most :func:`answer_limit_bytes` bytes of JSON
(``OMNIGRAPH_QUERY_MEMORY_MB`` / :data:`ANSWER_SHARE`), else ``resource_limit``
``answer_bytes``: its rows are Python objects outside DuckDB's memory limit. An answer streamed
row by row (``omnigraph query``, :meth:`omnigraph.Graph.open_query`) has no such cap.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

from omnigraph.engine.errors import BadRequest, QueryCancelled, QueryTimeout, ResourceLimit

if TYPE_CHECKING:
    import duckdb

TIMEOUT_ENV = "OMNIGRAPH_QUERY_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 60.0
POLL_S = 0.05
ANSWER_SHARE = 32
"""An answer collected whole may hold this fraction (1/N) of the query memory limit as JSON."""
SPILL_ENV = "OMNIGRAPH_QUERY_SPILL_MB"
DEFAULT_SPILL_MB = 4096


def timeout_seconds() -> float | None:
    """The configured time limit of one query in seconds (None: no limit)."""
    raw = os.environ.get(TIMEOUT_ENV, str(DEFAULT_TIMEOUT_S))
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise BadRequest(f"{TIMEOUT_ENV}={raw!r}: expected a number of seconds, 0 for no limit", {"value": raw})
    return value or None


def spill_limit_mb() -> int:
    """The configured disk limit of the spilled intermediate results of all queries together, in MiB."""
    raw = os.environ.get(SPILL_ENV, str(DEFAULT_SPILL_MB))
    if not raw.isdigit() or int(raw) < 1:
        raise BadRequest(f"{SPILL_ENV}={raw!r}: expected a whole number of MiB, at least 1", {"value": raw})
    return int(raw)


def answer_limit_bytes(memory_mb: int) -> int:
    """How many bytes of JSON an answer collected whole may hold, for a query memory limit of ``memory_mb`` MiB."""
    return memory_mb * 1024 * 1024 // ANSWER_SHARE


def answer_too_large(limit: int, actual: int, memory_env: str) -> ResourceLimit:
    """The ``resource_limit`` of an answer whose rows reached ``actual`` bytes of JSON, over ``limit``."""
    return ResourceLimit(
        "answer_bytes",
        limit,
        actual,
        f"the answer is larger than {limit // (1024 * 1024)} MiB of JSON (1/{ANSWER_SHARE} of {memory_env}); "
        "add a limit or make the query more selective, stream it with `omnigraph query`, or raise "
        f"{memory_env}",
    )


class QueryCancel:
    """A token that stops the queries it is handed to, fired from any thread (:meth:`cancel`)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        """Stop the query: it ends with :class:`QueryCancelled` within about :data:`POLL_S` seconds."""
        self._event.set()

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._event.is_set()


class Guard:
    """The time limit and cancellation of one query's connection (module docstring); close it when the query ends.

    Without a connection (a query answered without DuckDB) nothing is interrupted: the query
    stops at its next :meth:`check`.
    """

    def __init__(
        self,
        connection: duckdb.DuckDBPyConnection | None,
        timeout: float | None,
        cancel: QueryCancel | None,
        *,
        started: float | None = None,
    ) -> None:
        """``started``: when the query started (``time.monotonic()``), the time limit counting from it; now when None."""
        self._connection = connection
        self._timeout = timeout
        self._cancel = cancel
        self._deadline = None if timeout is None else (time.monotonic() if started is None else started) + timeout
        if connection is not None and (timeout is not None or cancel is not None):
            _WATCHER.watch(self)

    def stopped(self) -> bool:
        """Whether the time limit has passed or the cancellation fired."""
        expired = self._deadline is not None and time.monotonic() >= self._deadline
        return expired or (self._cancel is not None and self._cancel.cancelled)

    def interrupt(self) -> None:
        """Interrupt the statement the connection runs (the watcher's call)."""
        if self._connection is not None:
            self._connection.interrupt()

    def stop_error(self) -> QueryCancelled | QueryTimeout | None:
        """Why the query must stop now (the cancellation first), or None."""
        if self._cancel is not None and self._cancel.cancelled:
            return QueryCancelled("the query was cancelled (its client went away)")
        if self._deadline is not None and time.monotonic() >= self._deadline:
            return QueryTimeout(
                f"the query ran longer than its time limit of {self._timeout:g} s and was stopped; make it more "
                f"selective, lower its traversal bounds or add a limit, or raise {TIMEOUT_ENV}",
                {"timeout_seconds": self._timeout},
            )
        return None

    def check(self) -> None:
        """Raise the timeout or the cancellation if the query must stop."""
        error = self.stop_error()
        if error is not None:
            raise error

    def typed(self, error: duckdb.Error, memory: ResourceLimit, spill_bytes: int) -> Exception:
        """The error to raise for DuckDB's ``error`` (module docstring); ``memory`` is the query memory's."""
        import duckdb  # loaded already: the error is DuckDB's

        text = str(error)
        if isinstance(error, duckdb.InterruptException):
            return self.stop_error() or QueryCancelled("the query was interrupted")
        if isinstance(error, duckdb.OutOfMemoryException) and "max_temp_directory_size" in text:
            return ResourceLimit(
                "query_spill",
                spill_bytes,
                spill_bytes,
                f"the query spilled more than its disk limit of {spill_bytes // (1024 * 1024)} MiB; make it more "
                f"selective, add a limit, or raise {SPILL_ENV}",
            )
        if isinstance(error, duckdb.OutOfMemoryException):
            return memory
        first = text.split("\n", 1)[0].strip()
        return OSError(f"query execution failed: {type(error).__name__}: {first}")

    def close(self) -> None:
        """Stop watching (the query ended): once it returns, the connection is never interrupted."""
        _WATCHER.forget(self)


class _Watcher:
    """The process's one watcher thread: every :data:`POLL_S` seconds it interrupts each watched guard that must stop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._guards: set[Guard] = set()
        self._thread: threading.Thread | None = None

    def watch(self, guard: Guard) -> None:
        """Watch ``guard`` until :meth:`forget`; the thread starts with the first guard of the process."""
        with self._lock:
            self._guards.add(guard)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="omnigraph-query-guard", daemon=True)
                self._thread.start()

    def forget(self, guard: Guard) -> None:
        """Stop watching ``guard``; once this returns, its connection is never interrupted."""
        with self._lock:
            self._guards.discard(guard)

    def _run(self) -> None:
        while True:
            time.sleep(POLL_S)
            with self._lock:  # held while interrupting: a forgotten guard's connection may be closed
                for guard in self._guards:
                    if guard.stopped():
                        guard.interrupt()


_WATCHER = _Watcher()
