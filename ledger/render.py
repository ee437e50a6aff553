"""Render a replayed ledger for people (a table for stderr) and for programs (a JSON document).

Both renderings are pure functions of the replay: the same replay gives the same bytes. The table
summarises each record by its own fields (base fields excluded) in sorted field order; lists show
their length. The JSON document has every mapping's keys sorted.
"""

from __future__ import annotations

import json
import re
from typing import Any

from omnigraph.ledger.ledger import LedgerReplay
from omnigraph.ledger.records import LedgerRecord, Record

_BASE_FIELDS = frozenset(LedgerRecord.model_fields)
_BARE_TEXT = re.compile(r"^[\w./:@+-]+$")
_HEADER = ("seq", "at", "kind", "summary")


def render_table(replay: LedgerReplay) -> str:
    """A human table ``seq | at | kind | summary`` of every record, then one line of state."""
    rows = [_HEADER] + [(str(seq), record.at, record.kind, summarize(record)) for seq, record in replay.records]
    widths = [max(len(row[column]) for row in rows) for column in range(len(_HEADER) - 1)]
    lines = ["  ".join([cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)] + [row[-1]]).rstrip() for row in rows]
    state = replay.state
    completed = sum(1 for unit in state.units.values() if unit.status == "completed")
    lines.append(
        f"migration {state.migration_id}: phase {state.phase}, owner {state.owner}, "
        f"units {completed}/{len(state.units)} completed, last seq {state.last_seq}"
    )
    return "\n".join(lines) + "\n"


def render_json(replay: LedgerReplay) -> dict[str, Any]:
    """``{"records": [{"seq", ...record fields}], "state": {...}}`` with sorted keys throughout."""
    document: dict[str, Any] = _sorted_keys(
        {
            "records": [{"seq": seq, **record.model_dump(mode="json")} for seq, record in replay.records],
            "state": replay.state.model_dump(mode="json"),
        }
    )
    return document


def summarize(record: Record) -> str:
    """``field=value`` for every non-base field of ``record``, in field-name order."""
    data = record.model_dump(mode="json")
    return " ".join(f"{name}={_scalar(data[name])}" for name in sorted(data) if name not in _BASE_FIELDS)


def _scalar(value: Any) -> str:
    if isinstance(value, list):
        return f"[{len(value)}]"
    if isinstance(value, str) and _BARE_TEXT.match(value):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value
