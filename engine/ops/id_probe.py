"""Probes of committed ids: which of a load's ids a pinned table already holds.

:func:`present_ids` answers for a handful of ids with one filtered Lance scan. A chunked strict
insert (``load --mode append --chunk-rows N``) must ask before every chunk, and the table grows
with every chunk, so asking chunk by chunk reads the whole table once per chunk.
:class:`ChunkProbe` asks once per table for every id the load has left to insert there, and
reuses that answer for the next chunk while the table has changed by the load's own commit
only: its pin is exactly one version past the one the previous chunk was prepared on, on the
same branch. Lance versions are consecutive, so no other commit landed in between, and the
load's own rows are none of the ids it has left (the file holds each id once). Any other pin (a
concurrent commit, a fork, an adopted out-of-band commit) is probed again, and so is every
retried attempt of a chunk. Either way the answer is what :func:`present_ids` on the chunk's
ids would return at that pin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.graph import Graph
from omnigraph.engine.manifest.rows import TableEntry
from omnigraph.engine.storage.lance_io import open_pinned

FILTER_IDS = 8192
"""Up to this many ids are probed with a Lance filter; more are matched while streaming ``id``."""
MIN_PROBE_ROWS = 65_536
"""The fewest streamed rows matched at once against a large probe."""


def present_ids(graph: Graph, entry: TableEntry, ids: list[str] | pa.Array) -> set[str]:
    """The subset of ``ids`` present in the pinned image of ``entry``.

    Many ids are matched against the streamed ``id`` column in slices of at least as many rows
    as there are ids (and :data:`MIN_PROBE_ROWS`): each match builds a hash set of the ids, so
    that cost stays proportional to the rows read, and a slice holds no more than the ids do.
    """
    if not len(ids):
        return set()
    wanted = ids if isinstance(ids, pa.Array) else pa.array(ids, pa.utf8())
    dataset = open_pinned(graph.store, entry.image)
    if len(wanted) <= FILTER_IDS:
        found = dataset.to_table(columns=["id"], filter=pc.field("id").isin(wanted))
        return set(found.column("id").to_pylist())
    present: set[str] = set()
    for column in _slices(dataset.to_batches(columns=["id"]), max(len(wanted), MIN_PROBE_ROWS)):
        present.update(column.filter(pc.is_in(column, value_set=wanted)).to_pylist())
    return present


def _slices(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.Array]:
    """The first column of ``batches`` regrouped into arrays of at least ``rows`` rows (the
    last one may be shorter)."""
    held: list[pa.Array] = []
    count = 0
    for batch in batches:
        held.append(batch.column(0))
        count += batch.num_rows
        if count >= rows:
            yield pa.concat_arrays(held)
            held, count = [], 0
    if held:
        yield pa.concat_arrays(held)


@dataclass(frozen=True)
class _Answer:
    """At ``pin`` (table branch, version), the ids from row ``start`` on that the table holds."""

    pin: tuple[str | None, int]
    start: int
    present: frozenset[str]


class ChunkProbe:
    """Existing ids for the chunks of one chunked strict insert (module docstring).

    Call :meth:`existing` from each chunk's prepare step and :meth:`landed` once the chunk's
    commit is published.
    """

    def __init__(self, graph: Graph) -> None:
        self._graph = graph
        self._answers: dict[str, _Answer] = {}
        self._prepared: dict[str, _Answer] = {}

    def existing(self, entry: TableEntry, ids: pa.Array, start: int, remaining: Callable[[], pa.Array]) -> set[str]:
        """The chunk's ``ids`` that the pinned table holds.

        ``start`` is the chunk's first row in the table; ``remaining()`` gives the ids the load
        has left to insert into it from there on, probed only when no answer holds.
        """
        pin = (entry.table_branch, entry.table_version)
        answer = self._answers.get(entry.table_key)
        retried = entry.table_key in self._prepared  # prepared before, never landed: probe afresh
        if answer is None or retried or answer.pin != pin or answer.start > start:
            answer = _Answer(pin, start, frozenset(present_ids(self._graph, entry, remaining())))
        self._prepared[entry.table_key] = answer
        if not answer.present:
            return set()
        mine = pa.array(sorted(answer.present), pa.utf8())
        return set(mine.filter(pc.is_in(mine, value_set=ids)).to_pylist())

    def landed(self, stops: dict[str, int]) -> None:
        """The last prepared chunk was published; ``stops`` is where it ended in each table.

        Each of its tables is expected exactly one version further on the same branch (a
        chunk that forked an inherited table leaves it on another branch: never expected, so
        the fork is probed afresh). None of ``present`` was in the chunk: it would have been
        a key conflict.
        """
        for table_key, answer in self._prepared.items():
            branch, version = answer.pin
            self._answers[table_key] = _Answer((branch, version + 1), stops[table_key], answer.present)
        self._prepared.clear()
