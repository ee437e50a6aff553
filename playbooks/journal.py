"""The durable journal of one playbook run: every step recorded before it acts, and its outcome.

A run's journal is ``<journal root>/<run_id>/<seq:08d>.json``, one create-if-absent record per
file in canonical JSON, never rewritten, like the migration ledger. The root is a local
directory or an ``s3://`` prefix given with ``playbook run --journal``; by default
:func:`default_journal_root` (``$OMNIGRAPH_STATE_DIR/playbook-runs``, else
``$XDG_STATE_HOME/omnigraph/playbook-runs``, else ``~/.local/state/omnigraph/playbook-runs``).
It is kept outside the graph on purpose: preflight and the other read-only steps write nothing
to the graph, a staging rehearsal only reads its source, and a re-run on a fenced graph writes
nothing.

Before the first step the runner writes the run's :class:`RunStarted` document
(``<run_id>/run.json``: the playbook as given, the graph, the ``--var`` settings, the user, the
report and JUnit files it was asked to write and whether ``--yes`` was given), so that ``playbook
resume`` can finish a run whose runner died and write the artifacts the run promised. For each step the runner appends an
``acting`` record after any confirmation and before the action runs, then a ``finished`` record
with the outcome and the variables the step established (``outputs``; a declined confirmation
has only the latter). Every record names the process that wrote it (host, pid, process start),
so a resume can tell whether the run's runner is still alive. The journal exists from the first
step on, so the steps that run before any migration exists (preflight, the quiesce
confirmation), and the step a killed runner was in, stay on record; once a migration is known
the finished steps are also appended to its ledger as ``playbook_step`` records.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from omnigraph.claims.errors import validation_problem
from omnigraph.claims.fields import UtcTimestamp, utc_timestamp
from omnigraph.engine.errors import Internal
from omnigraph.engine.storage.process import process_start_marker, this_host
from omnigraph.engine.storage.store import GraphStore, canonical_json
from omnigraph.ledger.layout import parse_record_name, record_path

Text = Annotated[str, Field(min_length=1)]


class Writer(BaseModel):
    """The process that wrote a journal document (see :func:`this_writer`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    host: Text
    pid: int
    process_start: str | None


def this_writer() -> Writer:
    """This process, as a journal document records it."""
    return Writer(host=this_host(), pid=os.getpid(), process_start=process_start_marker(os.getpid()))


class RunArtifacts(BaseModel):
    """The files a run was asked to write when it ends (``--report``, ``--junit``), as absolute paths."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    report: str | None = None
    junit: str | None = None

    def flags(self) -> str:
        """The command-line flags that ask for them (with a leading space), or ``""``."""
        named = (("--report", self.report), ("--junit", self.junit))
        return "".join(f" {flag} {shlex.quote(path)}" for flag, path in named if path is not None)


class RunStarted(BaseModel):
    """What a playbook run was asked to do: enough to finish it in another process."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    run_id: Text
    playbook: Text
    playbook_name: Text
    graph: Text
    overrides: dict[str, str]
    user: Text
    writer: Writer
    artifacts: RunArtifacts = Field(default_factory=RunArtifacts)
    yes: bool = False
    """The run was started with ``--yes``: its resume may confirm as it would have."""
    at: UtcTimestamp = Field(default_factory=utc_timestamp)


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
    outputs: dict[str, str] = Field(default_factory=dict)
    exit_code: int = 0
    next_command: str | None = None
    duration_seconds: float = 0.0
    ends_run: bool = False
    writer: Writer | None = None
    at: UtcTimestamp = Field(default_factory=utc_timestamp)


def default_journal_root() -> str:
    """Where run journals go unless ``--journal`` says otherwise (see the module docstring)."""
    state = os.environ.get("OMNIGRAPH_STATE_DIR")
    if state:
        return str(Path(state) / "playbook-runs")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return str(Path(base) / "omnigraph" / "playbook-runs")


START_DOCUMENT = "run.json"


class RunJournal:
    """The journal of run ``run_id`` on ``store``; one process writes it at a time.

    A resume checks the last writer is gone first (:func:`omnigraph.playbooks.runs.resume_run`).
    """

    def __init__(self, store: GraphStore, run_id: str) -> None:
        self.store = store
        self.directory = run_id
        self._next_seq: int | None = None

    @property
    def location(self) -> str:
        """Where the journal is: ``<journal root>/<run id>``."""
        return f"{self.store.uri}/{self.directory}"

    def start(self, started: RunStarted) -> None:
        """Write the run's start document (create-if-absent); ``Internal`` if it exists."""
        path = f"{self.directory}/{START_DOCUMENT}"
        if not self.store.put_if_absent(path, canonical_json(started)):
            raise Internal(f"playbook journal {path} already exists: two runners share run id {started.run_id}")

    def started(self) -> RunStarted | None:
        """The run's start document, or None if there is none (a run journalled before it existed)."""
        path = f"{self.directory}/{START_DOCUMENT}"
        try:
            data = self.store.read_bytes(path)
        except FileNotFoundError:
            return None
        try:
            return RunStarted.model_validate_json(data)
        except ValidationError as error:
            raise Internal(f"playbook journal {path} is not valid: {validation_problem(error)}") from error

    def append(self, record: JournalRecord) -> int:
        """Write ``record`` as the next sequence number (create-if-absent) and return it."""
        seq = self._next_seq if self._next_seq is not None else len(self.records()) + 1
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
