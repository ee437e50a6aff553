"""The upgrade's answer check: the application's read queries answer the same after the migration.

An :class:`AnswerQueries` is a ``.gq`` source and the params of its read queries by name (the
``--queries F.gq`` and ``--query-params P.json`` of ``run``, ``resume``, ``verify`` and the
upgrade playbooks). :func:`check_queries` binds every read query of it against the graph's
catalog before anything is claimed (``bad_request`` with line:column, nothing written). Under the
barrier, once every image validated and before the first PK effect, :func:`take_answers` runs
every read query on every live branch; the driver records the digests (``answers_recorded``).
After verification and before stamp 5, :func:`compare_answers` runs them again from the recorded
source: any difference is ``answers_changed`` (exit 4), naming the query, the branch and the
first differing row, and the stamp is not written.

A digest is the sha256 over the answer's rows in the answer's own (total, deterministic) order,
each row's JSON text (sorted keys) followed by a newline. The queries run on one thread
(``repeatable``), so a float aggregate gives the same bits on the same data every time. The row texts themselves are kept in the record
while they total at most :data:`KEPT_ANSWER_BYTES`, so a change is shown as the first row that
differs; above that only the digest and the row count are kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnigraph.engine.door.table_store import FENCED_PROFILE
from omnigraph.engine.errors import BadRequest, NotFound, PreconditionFailed
from omnigraph.engine.gq.parser import parse
from omnigraph.engine.gq.read_checker import check_read
from omnigraph.engine.graph import Graph, open_graph
from omnigraph.engine.query.run import open_answer
from omnigraph.engine.storage.store import canonical_json
from omnigraph.ledger.ledger import LedgerReplay
from omnigraph.ledger.records import AnswerChange, AnswerCheck, AnswerDigest, AnswersRecorded, MigrationStarted
from omnigraph.migrator.errors import AnswersChanged

KEPT_ANSWER_BYTES = 64 * 1024
BRANCH_GONE = "branch deleted"


@dataclass(frozen=True)
class AnswerQueries:
    """A ``.gq`` source and the params object of each of its read queries (``{}`` when absent)."""

    source: str
    params: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_text(cls, source: str, params: dict[str, Any] | None = None, *, origin: str = "the queries") -> AnswerQueries:
        """Parse ``source``; ``bad_request`` unless it declares a read query and every key of
        ``params`` names one of them with a JSON object."""
        queries = parse(source)
        reads = sorted(query.name for query in queries if query.is_read)
        if not reads:
            raise BadRequest(
                f"{origin} declare no read query (match ... return); the answer check runs read queries",
                {"queries": sorted(query.name for query in queries)},
            )
        params = params or {}
        for name in sorted(params):
            if name not in reads:
                raise BadRequest(f"the query params name {name!r}, which is not a read query of {origin}", {"read_queries": reads})
            if not isinstance(params[name], dict):
                raise BadRequest(f"the params of query {name!r} must be a JSON object", {"query": name})
        return cls(source, {name: params[name] for name in sorted(params)})

    @classmethod
    def from_files(cls, queries: Path, params: Path | None = None) -> AnswerQueries:
        """Read ``--queries`` and ``--query-params``; ``bad_request`` for unreadable or malformed files."""
        source = _read_text(queries)
        mapping: Any = {}
        if params is not None:
            try:
                mapping = json.loads(_read_text(params), parse_constant=_refuse_constant)
            except ValueError as error:
                raise BadRequest(f"{params} is not valid JSON: {error}", {"path": str(params)}) from None
            if not isinstance(mapping, dict):
                raise BadRequest(f"{params} must hold a JSON object mapping query names to params objects", {"path": str(params)})
        return cls.from_text(source, mapping, origin=str(queries))

    @classmethod
    def from_record(cls, record: AnswersRecorded | AnswerCheck) -> AnswerQueries:
        """The queries of an ``answers_recorded`` record, or of the check ``migration_started`` asked for."""
        return cls(record.source, json.loads(record.params))

    def check(self) -> AnswerCheck:
        """These queries as ``migration_started`` records them."""
        return AnswerCheck(source=self.source, params=self.params_json, queries_sha256=self.sha256)

    def read_queries(self) -> list[str]:
        """The names of the read queries, sorted."""
        return sorted(query.name for query in parse(self.source) if query.is_read)

    def params_of(self, name: str) -> dict[str, Any]:
        return self.params.get(name, {})

    @property
    def params_json(self) -> str:
        """The params mapping as canonical JSON text."""
        return canonical_json(self.params).decode("utf-8")

    @property
    def sha256(self) -> str:
        """Identifies the source and params together: a resume or verify must give the same."""
        return hashlib.sha256(canonical_json({"params": self.params, "source": self.source})).hexdigest()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadRequest(f"{path} does not exist", {"path": str(path)}) from None
    except (OSError, UnicodeDecodeError) as error:
        raise BadRequest(f"{path} cannot be read as UTF-8 text: {error}", {"path": str(path)}) from None


def read_graph(uri: str) -> Graph:
    """The graph opened read-only (reads are allowed at stamps 4, ``migrating`` and 5)."""
    return open_graph(uri, FENCED_PROFILE, write=False)


def check_queries(graph: Graph, queries: AnswerQueries) -> None:
    """``bad_request`` (line:column) unless every read query binds against ``graph``'s catalog
    with its params; reads no table."""
    by_name = {query.name: query for query in parse(queries.source)}
    for name in queries.read_queries():
        check_read(by_name[name], graph.catalog, queries.params_of(name))


@dataclass
class _Reading:
    """One answer being hashed: its digest, row count and (while small) its row texts."""

    digest: Any = field(default_factory=hashlib.sha256)
    rows: int = 0
    kept: list[str] | None = field(default_factory=list)
    kept_bytes: int = 0

    def add(self, text: str) -> None:
        self.digest.update(text.encode("utf-8") + b"\n")
        self.rows += 1
        if self.kept is not None:
            self.kept_bytes += len(text) + 1
            if self.kept_bytes <= KEPT_ANSWER_BYTES:
                self.kept.append(text)
            else:
                self.kept = None


@contextmanager
def _row_texts(graph: Graph, queries: AnswerQueries, name: str, branch: str) -> Iterator[tuple[str, Iterator[str]]]:
    """The head commit read and the answer's rows as canonical JSON texts, streamed once."""
    with open_answer(graph, queries.source, name=name, params=queries.params_of(name), branch=branch, repeatable=True) as answer:
        columns = answer.columns
        yield answer.commit, (_row_text(dict(zip(columns, row, strict=True))) for row in answer.rows())


def _row_text(row: dict[str, Any]) -> str:
    """A row as compact JSON with sorted keys; a non-finite float is ``NaN``/``Infinity``, so
    every answer has a text (canonical JSON refuses them)."""
    return json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def take_answers(graph: Graph, queries: AnswerQueries) -> list[AnswerDigest]:
    """Every read query's answer on every live branch, sorted by query then branch."""
    answers: list[AnswerDigest] = []
    branches = sorted(graph.manifest.branches())
    for name in queries.read_queries():
        for branch in branches:
            reading = _Reading()
            with _row_texts(graph, queries, name, branch) as (commit, texts):
                for text in texts:
                    reading.add(text)
            answers.append(
                AnswerDigest(
                    query=name,
                    params=canonical_json(queries.params_of(name)).decode("utf-8"),
                    graph_branch=branch,
                    commit=commit,
                    rows=reading.rows,
                    digest=reading.digest.hexdigest(),
                    answer=reading.kept,
                )
            )
    return answers


def compare_answers(graph: Graph, queries: AnswerQueries, recorded: list[AnswerDigest]) -> list[AnswerChange]:
    """The recorded answers that differ now (a deleted branch is a change), in recorded order."""
    changed: list[AnswerChange] = []
    for expected in recorded:
        reading = _Reading(kept=None)
        first: int | None = None
        actual_row: str | None = None
        try:
            with _row_texts(graph, queries, expected.query, expected.graph_branch) as (_, texts):
                for index, text in enumerate(texts):
                    reading.add(text)
                    if first is None and _differs(expected.answer, index, text):
                        first, actual_row = index, text
        except NotFound:
            digest = BRANCH_GONE
        else:
            digest = reading.digest.hexdigest()
        if digest == expected.digest:
            continue
        if first is None and expected.answer is not None and len(expected.answer) > reading.rows:
            first = reading.rows
        kept = expected.answer or []
        expected_row = kept[first] if first is not None and first < len(kept) else None
        changed.append(
            AnswerChange(
                query=expected.query,
                params=expected.params,
                graph_branch=expected.graph_branch,
                expected_digest=expected.digest,
                actual_digest=digest,
                expected_rows=expected.rows,
                actual_rows=reading.rows,
                first_row=first,
                expected_row=expected_row,
                actual_row=actual_row,
            )
        )
    return changed


def _differs(kept: list[str] | None, index: int, text: str) -> bool:
    """Whether row ``index`` of an answer is not the recorded one (never, when none was kept)."""
    return kept is not None and (index >= len(kept) or kept[index] != text)


def describe(change: AnswerChange) -> str:
    """One change in words: the query, the branch and the first differing row."""
    where = f"query {change.query!r} on branch {change.graph_branch!r}"
    if change.actual_digest == BRANCH_GONE:
        return f"{where}: the branch was deleted"
    counts = f"{change.expected_rows} row(s) before, {change.actual_rows} now"
    if change.first_row is None:
        return f"{where}: the answer differs ({counts}; the recorded answer was too large to keep, only its digest)"
    before = change.expected_row if change.expected_row is not None else "no row"
    after = change.actual_row if change.actual_row is not None else "no row"
    return f"{where}: row {change.first_row + 1} was {before}, now {after} ({counts})"


def answer_cases(recorded: list[AnswerDigest], changed: list[AnswerChange]) -> list[dict[str, Any]]:
    """One entry per recorded (query, params, branch) for reports: ``{query, graph_branch, params,
    rows, ok, message}``, in recorded order."""
    by_key = {(c.query, c.params, c.graph_branch): c for c in changed}
    cases = []
    for answer in recorded:
        change = by_key.get((answer.query, answer.params, answer.graph_branch))
        cases.append(
            {
                "query": answer.query,
                "graph_branch": answer.graph_branch,
                "params": answer.params,
                "rows": answer.rows,
                "ok": change is None,
                "message": f"{answer.rows} row(s), unchanged" if change is None else describe(change),
            }
        )
    return cases


def answers_changed(lead: str, advice: str, recorded: list[AnswerDigest], changed: list[AnswerChange], **details: Any) -> AnswersChanged:
    """The ``answers_changed`` error: ``lead``, every change in words, then ``advice``; details
    carry the changes and one case per recorded answer (``answer_check``)."""
    return AnswersChanged(
        f"{lead}: " + "; ".join(describe(change) for change in changed) + f". {advice}",
        {
            **details,
            "changed": [change.model_dump(mode="json") for change in changed],
            "answer_check": answer_cases(recorded, changed),
        },
    )


def recorded_queries(replay: LedgerReplay) -> AnswerQueries | None:
    """The queries of the migration's ``answers_recorded`` record, if it has one."""
    for _, record in replay.records:
        if isinstance(record, AnswersRecorded):
            return AnswerQueries.from_record(record)
    return None


def requested_queries(replay: LedgerReplay) -> AnswerQueries | None:
    """The queries of the migration's answer check: those its answers were recorded with, else
    those ``migration_started`` asked for (its baseline not taken yet), else None."""
    recorded = recorded_queries(replay)
    if recorded is not None:
        return recorded
    first = replay.records[0][1]
    if isinstance(first, MigrationStarted) and first.answer_check is not None:
        return AnswerQueries.from_record(first.answer_check)
    return None


def refuse_other_queries(queries: AnswerQueries | None, recorded_sha256: str | None, instead: str) -> None:
    """``precondition_failed`` if ``queries`` are not the ones the migration recorded answers
    for; ``instead`` says what else the operator can run."""
    if queries is None or recorded_sha256 is None or queries.sha256 == recorded_sha256:
        return
    raise PreconditionFailed(
        f"these --queries/--query-params are not the ones this migration recorded its answers with; give the same files{instead}",
        {"expected_queries_sha256": recorded_sha256, "actual_queries_sha256": queries.sha256},
    )
