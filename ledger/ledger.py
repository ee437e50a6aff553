"""The migration ledger: append-only, sequence-numbered, create-if-absent records on a store.

Records live at ``<directory>/<seq:08d>.json`` (seq from 1, no gaps), each written once with
:meth:`omnigraph.engine.storage.store.GraphStore.put_if_absent` in canonical JSON and never rewritten or deleted.

Writing: a :class:`Ledger` lists its directory once (on the first :meth:`Ledger.append` or
:meth:`Ledger.replay`) and then tracks its own next sequence number. If another writer created
that number first, ``append`` raises :class:`~omnigraph.ledger.errors.LedgerFenced` and the ledger object
refuses every later append: the loser stops, it never retries at a higher number. The first
record must be ``migration_started``; every later record must carry its token and migration id
(else :class:`omnigraph.engine.errors.BadRequest`, nothing written).

Reading: :meth:`Ledger.replay` reads every record in order and folds them (:mod:`omnigraph.ledger.fold`).
A gap, a foreign file name, a file that is not JSON or not a valid record, or a record
inconsistent with the ledger raises :class:`~omnigraph.ledger.errors.LedgerCorrupt` naming the path; files
are never modified and nothing is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from omnigraph.claims.errors import validation_problem
from omnigraph.engine.errors import BadRequest, NotFound
from omnigraph.engine.storage.store import GraphStore, canonical_json
from omnigraph.ledger.errors import LedgerCorrupt, LedgerFenced
from omnigraph.ledger.fold import FoldedState, fold
from omnigraph.ledger.layout import is_staging_name, parse_record_name, record_path
from omnigraph.ledger.records import RECORD_TYPES, MigrationStarted, Record, parse_record


@dataclass(frozen=True)
class LedgerReplay:
    """Every record as ``(seq, record)`` in sequence order, and their folded state."""

    records: list[tuple[int, Record]]
    state: FoldedState


class Ledger:
    """One migration's ledger at ``directory`` (store-relative) on ``store``."""

    def __init__(self, store: GraphStore, directory: str) -> None:
        self._store = store
        self._directory = directory.strip("/")
        self._next_seq: int | None = None
        self._first: MigrationStarted | None = None
        self._fenced_seq: int | None = None
        # Records are immutable once written, so each is read (or remembered from append) once.
        self._known: dict[int, Record] = {}

    @property
    def store(self) -> GraphStore:
        """The graph root the ledger is on."""
        return self._store

    @property
    def directory(self) -> str:
        """The store-relative directory of the records."""
        return self._directory

    def append(self, record: Record) -> int:
        """Write ``record`` as the next sequence number and return that number.

        Raises ``LedgerFenced`` if another writer took the number (and on every later call),
        ``BadRequest`` if the record does not belong to this ledger, ``LedgerCorrupt`` if the
        directory is not a well-formed ledger.
        """
        if self._fenced_seq is not None:
            raise LedgerFenced(record_path(self._directory, self._fenced_seq), self._fenced_seq)
        if not isinstance(record, RECORD_TYPES):
            raise BadRequest(f"not a ledger record: {type(record).__name__}")
        seq = self._next_seq if self._next_seq is not None else self._locate()
        self._check_belongs(record)
        path = record_path(self._directory, seq)
        if not self._store.put_if_absent(path, canonical_json(record)):
            self._fenced_seq = seq
            raise LedgerFenced(path, seq)
        if isinstance(record, MigrationStarted):
            self._first = record
        self._known[seq] = record
        self._next_seq = seq + 1
        return seq

    def replay(self) -> LedgerReplay:
        """Read and fold every record; ``NotFound`` if the ledger has none."""
        seqs = self._list_seqs()
        if not seqs:
            raise NotFound(f"there is no ledger under {self._directory}", {"path": self._directory})
        records = [(seq, self._read(seq)) for seq in seqs]
        state = fold(records, self._directory)
        if self._fenced_seq is None:
            first = records[0][1]
            assert isinstance(first, MigrationStarted)
            self._first = first
            self._next_seq = seqs[-1] + 1
        return LedgerReplay(records=records, state=state)

    def _locate(self) -> int:
        """List the directory once: remember the first record and return the next seq."""
        seqs = self._list_seqs()
        if seqs:
            first = self._read(1)
            if not isinstance(first, MigrationStarted):
                raise LedgerCorrupt(record_path(self._directory, 1), f"the first record is {first.kind}, not migration_started")
            self._first = first
        self._next_seq = len(seqs) + 1
        return self._next_seq

    def _check_belongs(self, record: Record) -> None:
        first = self._first
        if first is None:
            if not isinstance(record, MigrationStarted):
                raise BadRequest(f"the first record of a ledger must be migration_started, not {record.kind}")
            return
        if isinstance(record, MigrationStarted):
            raise BadRequest(f"{self._directory} already has its migration_started record")
        if record.token != first.token:
            raise BadRequest(
                f"refusing a {record.kind} record whose token is not this ledger's token",
                {"path": self._directory, "expected_token": first.token, "actual_token": record.token},
            )
        if record.migration_id != first.migration_id:
            raise BadRequest(
                f"refusing a {record.kind} record of migration {record.migration_id}, not {first.migration_id}",
                {"path": self._directory, "expected": first.migration_id, "actual": record.migration_id},
            )

    def _list_seqs(self) -> list[int]:
        """The sequence numbers present, checked to be exactly 1..n."""
        seqs: list[int] = []
        for name in self._store.list(self._directory):
            if is_staging_name(name):
                continue
            seq = parse_record_name(name)
            if seq is None:
                raise LedgerCorrupt(f"{self._directory}/{name}", "not a ledger record name (<seq:08d>.json from 1)")
            seqs.append(seq)
        seqs.sort()
        for expected, seq in enumerate(seqs, start=1):
            if seq != expected:
                raise LedgerCorrupt(
                    record_path(self._directory, expected),
                    f"sequence number {expected} is missing while records run to {seqs[-1]}",
                    missing_seq=expected,
                )
        return seqs

    def _read(self, seq: int) -> Record:
        if seq in self._known:
            return self._known[seq]
        path = record_path(self._directory, seq)
        try:
            data = self._store.read_bytes(path)
        except FileNotFoundError as error:
            raise LedgerCorrupt(path, "listed but gone when read (records are never deleted)") from error
        try:
            record = parse_record(data)
        except ValidationError as error:
            raise LedgerCorrupt(path, validation_problem(error)) from error
        self._known[seq] = record
        return record
