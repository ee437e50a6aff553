"""The durable journal of one playbook run: every step recorded before it acts, and its outcome.

A run's journal is ``<journal root>/<run_id>/<seq:08d>.json``, one create-if-absent record per
file in canonical JSON, never rewritten, like the migration ledger. The root is a local
directory or an ``s3://`` prefix given with ``playbook run --journal``; by default
:func:`default_journal_root` (``$OMNIGRAPH_STATE_DIR/playbook-runs``, else
``$XDG_STATE_HOME/omnigraph/playbook-runs``, else ``~/.local/state/omnigraph/playbook-runs``).
It is kept outside the graph on purpose: preflight and the other read-only steps write nothing
to the graph, a staging rehearsal only reads its source, and a re-run on a fenced graph writes
nothing.

For each step the runner appends an ``acting`` record after any confirmation and before the
action runs, then a ``finished`` record with the outcome (a declined confirmation has only the
latter). The journal exists from the first step on, so the steps that run before any migration
exists (preflight, the quiesce confirmation), and the step a killed runner was in, stay on
record; once a migration is known the finished steps are also appended to its ledger as
``playbook_step`` records.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from claims.errors import validation_problem
from claims.fields import UtcTimestamp, utc_timestamp
from engine.errors import Internal
from engine.storage import GraphStore, canonical_json
from ledger.layout import parse_record_name, record_path

Text = Annotated[str, Field(min_length=1)]


class JournalRecord(BaseModel):
    """One step event of a playbook run."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    run_id: Text
    playbook: Text
    graph: Text
    step: Text
    phase: Literal["acting", "finished"]
    status: Literal["ok", "failed", "skipped"] | None = None
    detail: str = ""
    migration_id: str | None = None
    at: UtcTimestamp = Field(default_factory=utc_timestamp)


def default_journal_root() -> str:
    """Where run journals go unless ``--journal`` says otherwise (see the module docstring)."""
    state = os.environ.get("OMNIGRAPH_STATE_DIR")
    if state:
        return str(Path(state) / "playbook-runs")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return str(Path(base) / "omnigraph" / "playbook-runs")


class RunJournal:
    """The journal of run ``run_id`` on ``store``; this process is its only writer."""

    def __init__(self, store: GraphStore, run_id: str) -> None:
        self.store = store
        self.directory = run_id
        self._next_seq = 1

    @property
    def location(self) -> str:
        return f"{self.store.uri}/{self.directory}"

    def append(self, record: JournalRecord) -> int:
        """Write ``record`` as the next sequence number (create-if-absent) and return it."""
        seq = self._next_seq
        path = record_path(self.directory, seq)
        if not self.store.put_if_absent(path, canonical_json(record)):
            raise Internal(f"playbook journal record {path} already exists: two runners share run id {record.run_id}")
        self._next_seq = seq + 1
        return seq

    def records(self) -> list[JournalRecord]:
        """Every record in sequence order; ``Internal`` naming the path of one that does not parse."""
        names = sorted((seq, name) for name in self.store.list(self.directory) if (seq := parse_record_name(name)) is not None)
        records = []
        for _, name in names:
            path = f"{self.directory}/{name}"
            try:
                records.append(JournalRecord.model_validate_json(self.store.read_bytes(path)))
            except ValidationError as error:
                raise Internal(f"playbook journal record {path} is not valid: {validation_problem(error)}") from error
        return records
