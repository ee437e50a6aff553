"""Verification: the answer check, the fencing state of a graph (``verify``), and whether it is up to date.

The answer check: the application's read queries answer the same after the migration. An
:class:`AnswerQueries` is a ``.gq`` source and the params of its read queries by name (the
``--queries F.gq`` and ``--query-params P.json`` of ``run``, ``resume``, ``verify`` and the
upgrade playbooks). :func:`check_queries` binds every read query of it against the graph's
catalog before anything is claimed (``bad_request`` with line:column, nothing written). While the
graph is still at stamp 4, just before the barrier, :func:`take_answers` runs every read query on
every live branch; behind the barrier, once every image validated and before the first PK effect,
:func:`baseline_answers` keeps those of branches whose head has not moved since and queries the
others again, and the driver (:func:`omnigraph.migrator.run.drive`) records the digests
(``answers_recorded``, naming the branches queried behind the barrier). After verification and before stamp 5,
:func:`compare_answers` runs them again from the recorded source: any difference is
``answers_changed`` (exit 4), naming the query, the branch and the first differing row, and the
stamp is not written.

A digest is the sha256 over the answer's rows in the answer's own (total, deterministic) order,
each row's JSON text (sorted keys) followed by a newline. The queries run on one thread
(``repeatable``), so a float aggregate gives the same bits on the same data every time, and a
``limit`` without ``order`` answers the first rows in tie-break order, not any rows. The row
texts themselves are kept in the record while they total at most :data:`KEPT_ANSWER_BYTES`, so a
change is shown as the first row that differs; above that only the digest and the row count are
kept.

The fencing state, checked before the stamp and on demand. :func:`structural_problems` checks
what must hold of any fenced graph: every live table on every branch has PK exactly ``[id]`` at
the image its branch pins, and no table branch HEAD is ahead of what a manifest pins (no
unpublished effects). :func:`migration_drift` additionally compares the graph with a migration's
ledger: the same branches with the same incarnations and heads, every unit published at the
image the ledger recorded, with the validated rows. :func:`verify_graph` is the read-only
``verify`` command: both checks, plus no pending intent, no held claim and, at stamp 5, no head a
format-4 writer published after the stamp (:mod:`omnigraph.engine.access.writer_audit`); given
answer queries, the answers the stamping migration recorded are taken again.

Up to date: :func:`already_fenced` (and :func:`up_to_date`) give :class:`UpToDate` for a graph at
stamp 5 with no claim held that passes ``verify``, so ``run`` on it does nothing. Everything here
is read-only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnigraph.claims.claim import inspect
from omnigraph.claims.errors import claim_held
from omnigraph.engine.access.writer_audit import foreign_heads, refence_command
from omnigraph.engine.door.table_store import FENCED_PROFILE, KEY_COLUMN
from omnigraph.engine.errors import BadRequest, NotFound, PreconditionFailed
from omnigraph.engine.gq.parser import parse
from omnigraph.engine.gq.read_checker import check_read
from omnigraph.engine.graph import Graph, open_graph
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.manifest.rows import BranchSnapshot, TableEntry
from omnigraph.engine.query.run import open_answer
from omnigraph.engine.reconcile import recovery
from omnigraph.engine.storage.lance_io import latest_version, open_pinned, primary_key
from omnigraph.engine.storage.names import FORMAT_5
from omnigraph.engine.storage.store import GraphStore, canonical_json
from omnigraph.ledger.fold import FoldedState
from omnigraph.ledger.ledger import Ledger, LedgerReplay
from omnigraph.ledger.records import AnswerChange, AnswerCheck, AnswerDigest, AnswersRecorded, DriftItem, MigrationStarted, UnitPlan
from omnigraph.migrator.errors import AnswersChanged, DriftDetected
from omnigraph.migrator.executors import default_parallel, fan_out, read_snapshots, validate_image
from omnigraph.migrator.layout import CLAIM_PATH, ledger_dir, migration_ids, physical_fingerprint
from omnigraph.migrator.status import claim_next_step

KEPT_ANSWER_BYTES = 64 * 1024
BRANCH_GONE = "branch deleted"


@dataclass(frozen=True)
class AnswerQueries:
    """A ``.gq`` source and the params object of each of its read queries (``{}`` when absent)."""

    source: str
    params: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_text(cls, source: str, params: dict[str, Any] | None = None, *, origin: str = "the queries") -> AnswerQueries:
        """Parse ``source``; ``bad_request`` unless it declares a read query and every key of ``params`` names one.

        Each key of ``params`` must name a read query of ``source`` and map it to a JSON object.
        """
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
        """The params of read query ``name`` (``{}`` when none were given)."""
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


def check_queries(graph: Graph, queries: AnswerQueries) -> None:
    """``bad_request`` (line:column) unless every read query binds against ``graph``'s catalog with its params.

    Reads no table.
    """
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
    """A row as compact JSON with sorted keys.

    A non-finite float is ``NaN``/``Infinity``, so every answer has a text (canonical JSON refuses
    them).
    """
    return json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def take_answers(graph: Graph, queries: AnswerQueries, only: Sequence[str] | None = None) -> list[AnswerDigest]:
    """Every read query's answer on every live branch (or those of ``only``), sorted by query then branch."""
    answers: list[AnswerDigest] = []
    branches = sorted(graph.manifest.branches() if only is None else only)
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


def baseline_answers(graph: Graph, queries: AnswerQueries, before: list[AnswerDigest] | None) -> tuple[list[AnswerDigest], list[str]]:
    """The answer check's baseline behind the barrier, and the branches queried for it now.

    ``before`` are the answers taken just before the barrier rose (None: none were). A branch
    keeps them when every query's answer read the commit that is still its head: a head pins
    immutable images, so the answer is the same now. Every other live branch is queried now.
    Sorted as :func:`take_answers` sorts.
    """
    live = sorted(graph.manifest.branches())
    if before is None:
        return take_answers(graph, queries), live
    heads = {branch: graph.manifest.snapshot(branch).head.commit_id for branch in live}
    taken: dict[str, list[AnswerDigest]] = {}
    for answer in before:
        taken.setdefault(answer.graph_branch, []).append(answer)
    names = queries.read_queries()
    kept = {
        branch
        for branch in live
        if sorted(a.query for a in taken.get(branch, [])) == sorted(names) and all(a.commit == heads[branch] for a in taken[branch])
    }
    requeried = [branch for branch in live if branch not in kept]
    order = {name: index for index, name in enumerate(names)}
    merged = [a for a in before if a.graph_branch in kept] + take_answers(graph, queries, requeried)
    return sorted(merged, key=lambda a: (order[a.query], a.graph_branch)), requeried


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
    """One entry per recorded (query, params, branch) for reports, in recorded order.

    Each entry is ``{query, graph_branch, params, rows, ok, message}``.
    """
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
    """The ``answers_changed`` error: ``lead``, every change in words, then ``advice``.

    Its details carry the changes and one case per recorded answer (``answer_check``).
    """
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
    """The queries of the migration's answer check, or None.

    Those its answers were recorded with, else those ``migration_started`` asked for (its baseline
    not taken yet), else None.
    """
    recorded = recorded_queries(replay)
    if recorded is not None:
        return recorded
    first = replay.records[0][1]
    if isinstance(first, MigrationStarted) and first.answer_check is not None:
        return AnswerQueries.from_record(first.answer_check)
    return None


def refuse_other_queries(queries: AnswerQueries | None, recorded_sha256: str | None, instead: str) -> None:
    """``precondition_failed`` if ``queries`` are not the ones the migration recorded answers for.

    ``instead`` says what else the operator can run.
    """
    if queries is None or recorded_sha256 is None or queries.sha256 == recorded_sha256:
        return
    raise PreconditionFailed(
        f"these --queries/--query-params are not the ones this migration recorded its answers with; give the same files{instead}",
        {"expected_queries_sha256": recorded_sha256, "actual_queries_sha256": queries.sha256},
    )


def structural_problems(store: GraphStore, manifest: Manifest) -> list[str]:
    """Problems that make a graph not fenced, sorted; [] when every table is fenced."""
    workers = default_parallel(store)
    branches = list(manifest.branches())
    snapshots = read_snapshots(manifest, branches)
    pins = [
        (branch, table_key, entry)
        for branch, snapshot in zip(branches, snapshots, strict=True)
        for table_key, entry in snapshot.tables.items()
    ]

    def pk_problem(pin: tuple[str, str, TableEntry]) -> str | None:
        branch, table_key, entry = pin
        pk = primary_key(open_pinned(store, entry.image).schema)
        return None if pk == [KEY_COLUMN] else f"{branch}: {table_key} has primary key {pk}, not ['id']"

    problems = [problem for problem in fan_out(pk_problem, pins, workers) if problem is not None]
    pinned_heads: dict[tuple[str, str | None], int] = {}
    for _, _, entry in pins:
        key = (entry.table_path, entry.table_branch)
        pinned_heads[key] = max(pinned_heads.get(key, 0), entry.table_version)
    tables = sorted(pinned_heads.items(), key=lambda item: (item[0][0], item[0][1] or ""))
    heads = fan_out(lambda table: latest_version(store, table[0][0], table[0][1]), tables, workers)
    for ((path, table_branch), pinned), head in zip(tables, heads, strict=True):
        if head > pinned:
            problems.append(f"{path} on table branch {table_branch or 'main'} is at v{head}, ahead of every pin (v{pinned})")
    return sorted(problems)


def migration_drift(store: GraphStore, manifest: Manifest, state: FoldedState) -> list[DriftItem]:
    """Differences between the graph and what the migration's ledger says it did."""
    drift: list[DriftItem] = []
    branches = manifest.branches()
    planned = {b.graph_branch: b for b in state.branches}
    for name in sorted(set(branches) | set(planned)):
        if name not in branches:
            drift.append(DriftItem(what=f"graph branch {name}", expected="present", actual="deleted"))
        elif name not in planned:
            drift.append(DriftItem(what=f"graph branch {name}", expected="absent", actual="created"))
        elif branches[name].incarnation != planned[name].incarnation:
            drift.append(DriftItem(what=f"graph branch {name}", expected=planned[name].incarnation, actual=branches[name].incarnation))
    workers = default_parallel(store)
    names = sorted(set(branches) & set(planned))
    snapshots = dict(zip(names, read_snapshots(manifest, names), strict=True))
    for name, snapshot in snapshots.items():
        if snapshot.head.commit_id != planned[name].head_commit_id:
            drift.append(DriftItem(what=f"head of {name}", expected=planned[name].head_commit_id, actual=snapshot.head.commit_id))
        planned_keys = {u.table_key for u in state.plan if u.graph_branch == name}
        for extra in sorted(set(snapshot.tables) - planned_keys):
            drift.append(DriftItem(what=f"{extra} on {name}", expected="absent", actual="present"))
    for found in fan_out(lambda unit: _unit_drift(store, state, snapshots.get(unit.graph_branch), unit), state.plan, workers):
        drift += found
    return drift


def _unit_drift(store: GraphStore, state: FoldedState, snapshot: BranchSnapshot | None, unit: UnitPlan) -> list[DriftItem]:
    """How one unit's table differs from what the ledger says the unit did ([] if it does not)."""
    achieved = state.units.get(unit.unit_id)
    if snapshot is None or achieved is None:
        return []
    entry = snapshot.tables.get(unit.table_key)
    expected = f"{achieved.table_branch or 'main'}@v{achieved.table_version}"
    if entry is None:
        return [DriftItem(what=f"{unit.table_key} on {unit.graph_branch}", expected=expected, actual="absent")]
    actual = f"{entry.table_branch or 'main'}@v{entry.table_version}"
    if achieved.status != "completed" or actual != expected or entry.migration_unit != unit.unit_id:
        return [
            DriftItem(
                what=f"{unit.table_key} on {unit.graph_branch}",
                expected=f"completed at {expected}",
                actual=f"{achieved.status} at {actual}",
            )
        ]
    drift: list[DriftItem] = []
    head = latest_version(store, entry.table_path, entry.table_branch)
    if head != entry.table_version:
        drift.append(
            DriftItem(
                what=f"HEAD of {entry.table_path} on {entry.table_branch or 'main'}",
                expected=f"v{entry.table_version}",
                actual=f"v{head}",
            )
        )
    image = state.images.get(unit.image_id)
    dataset = open_pinned(store, entry.image)
    if image is not None and physical_fingerprint(dataset) != image.fingerprint and validate_image(dataset).digest != image.digest:
        drift.append(DriftItem(what=f"rows of {unit.table_key} on {unit.graph_branch}", expected=image.digest, actual="changed"))
    return drift


def verify_graph(store: GraphStore, manifest: Manifest, queries: AnswerQueries | None = None) -> dict[str, Any]:
    """The ``verify`` document of a graph; raises ``drift_detected`` listing what is not fenced.

    Read-only. Checks the stamp is 5, :func:`structural_problems`, no pending write intent, no
    held claim (``claim_held`` instead, naming the command that releases it, with the other
    problems in its details), and, for the migration that stamped the graph,
    :func:`migration_drift`. With ``queries``, once all that holds, the answers that migration
    recorded are taken again: ``answers_changed`` (exit 4) if one differs, ``precondition_failed``
    if it recorded none or recorded them with other queries; ``answer_check`` in the document
    lists one case per recorded answer.
    """
    stamp, migration_id = manifest.read_stamp()
    problems = [] if stamp == "5" else [f"the stamp is {stamp}, not 5: the graph is not (fully) migrated"]
    problems += structural_problems(store, manifest)
    if stamp == "5":
        problems += [f"{c.describe()}; run `{refence_command(store.uri)}`" for c in foreign_heads(manifest)]
    pending = [i.operation_id for i in recovery.list_intents(store)]
    problems += [f"write intent {op} is pending recovery" for op in pending]
    holder = inspect(store, CLAIM_PATH)
    if holder is not None:
        advice = claim_next_step(store, holder, stamp)
        raise claim_held(
            f"{store.uri} is not released: the claim of migration {holder.migration_id} is still held by "
            f"{holder.owner} on {holder.host} (pid {holder.pid}); next: {advice}",
            holder,
            graph=store.uri,
            stamp=stamp,
            problems=problems,
            next=advice,
        )
    drift: list[dict[str, str]] = []
    if migration_id is not None:
        state = Ledger(store, ledger_dir(migration_id)).replay().state
        if state.plan and all(u.status == "completed" for u in state.units.values()):
            drift = [d.model_dump(mode="json") for d in migration_drift(store, manifest, state)]
    document: dict[str, Any] = {
        "graph": store.uri,
        "stamp": stamp,
        "ok": not problems and not drift,
        "problems": problems,
        "drift": drift,
        "answer_check": [],
    }
    if not document["ok"]:
        found = problems + [d["what"] for d in drift]
        shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
        raise DriftDetected(f"{store.uri} is not fully fenced: {shown}", document)
    if queries is not None:
        document["answer_check"] = _recheck_answers(store, migration_id, queries)
    return document


def _recheck_answers(store: GraphStore, migration_id: str | None, queries: AnswerQueries) -> list[dict[str, Any]]:
    """The answer check of ``verify --queries`` against the digests of the migration that stamped the graph.

    At stamp 5 that is the newest migration that wrote a stamp.
    """
    state = _stamping_migration(store) if migration_id is None else Ledger(store, ledger_dir(migration_id)).replay().state
    if state is None or state.answers_sha256 is None:
        raise PreconditionFailed(
            f"the migration that stamped {store.uri} recorded no answers to check against: answers are "
            "recorded only during a migration run with --queries, under its barrier. Check the fencing "
            f"alone with `omnigraph-migrate verify {store.uri}`",
            {"migration_id": None if state is None else state.migration_id},
        )
    refuse_other_queries(queries, state.answers_sha256, " that migration was run with")
    changed = compare_answers(open_graph(store, FENCED_PROFILE, write=False), queries, state.answers)
    if changed:
        raise answers_changed(
            f"{len(changed)} of {len(state.answers)} answer(s) differ from those migration {state.migration_id} recorded before its stamp",
            "A write since the stamp changes answers too; if none was made, rows changed outside the engine",
            state.answers,
            changed,
            graph=store.uri,
            migration_id=state.migration_id,
        )
    return answer_cases(state.answers, [])


def _stamping_migration(store: GraphStore) -> FoldedState | None:
    """The newest migration whose ledger records a stamp, or None."""
    for candidate in reversed(migration_ids(store)):
        try:
            state = Ledger(store, ledger_dir(candidate)).replay().state
        except NotFound:
            continue
        if state.stamp_written:
            return state
    return None


@dataclass(frozen=True)
class UpToDate:
    """``run`` found the graph already fenced (stamp 5, no claim, ``verify`` passes): nothing done."""

    graph: str
    verified: dict[str, Any]

    @property
    def message(self) -> str:
        """The sentence printed for an up-to-date graph."""
        return f"{self.graph} is already at format 5, nothing to do"

    def to_json(self) -> dict[str, Any]:
        """The JSON document of ``run`` on an up-to-date graph (with its ``verify`` document)."""
        return {"status": "up_to_date", "graph": self.graph, "stamp": FORMAT_5, "message": self.message, "verify": self.verified}


def already_fenced(store: GraphStore, manifest: Manifest) -> UpToDate | None:
    """:class:`UpToDate` if the graph is at stamp 5 with no claim held and ``verify`` passes.

    None for any other stamp, or at stamp 5 while a claim is held (the caller refuses those). At
    stamp 5 a failing ``verify`` raises its ``drift_detected`` error.
    """
    stamp, _ = manifest.read_stamp()
    if stamp != FORMAT_5 or inspect(store, CLAIM_PATH) is not None:
        return None
    return UpToDate(store.uri, verify_graph(store, manifest))


def up_to_date(store: GraphStore) -> UpToDate | None:
    """:class:`UpToDate` if the graph is already fenced and unclaimed (see :func:`already_fenced`)."""
    manifest = Manifest.of_graph(store)
    return already_fenced(store, manifest)


def verify(store: GraphStore, queries: AnswerQueries | None = None) -> dict[str, Any]:
    """The ``verify`` document of the graph at ``store`` (:func:`verify_graph`).

    Structural fencing checks; during a migration also the ledger comparison; with ``queries``,
    the recorded answers taken again.
    """
    manifest = Manifest.of_graph(store)
    return verify_graph(store, manifest, queries)
