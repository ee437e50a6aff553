"""The per-commit limits: at most :data:`MAX_ROWS` rows and :data:`MAX_ARROW_BYTES` bytes of Arrow
data per table per graph commit (both inclusive).

Every write that stages rows as one commit (load's strict inserts and upserts, ``.gq`` mutations)
refuses a commit over either limit with :func:`check_table`, before any intent is armed; the
caller words the refusal (:class:`LimitWording`: its hint names what splits the commit), the
error's code and fields are the same for all of them: ``resource_limit`` ``{resource, limit,
actual, table_key}`` with ``resource`` ``rows`` or ``arrow_bytes``. Overwrite loads (the bulk
replacement path) and deleted ids are not limited; a branch merge brings any number of rows, as a
chain of commits within these limits under one intent (:func:`omnigraph.engine.door.table_store.merge_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass

from omnigraph.engine.door.table_store import COMMIT_ARROW_BYTES, COMMIT_ROWS
from omnigraph.engine.errors import ResourceLimit

MAX_ROWS = COMMIT_ROWS
MAX_ARROW_BYTES = COMMIT_ARROW_BYTES


@dataclass(frozen=True)
class LimitWording:
    """How a caller words a refused commit: ``str.format`` templates over ``table_key``,
    ``actual`` and ``limit``, one per resource."""

    rows: str
    arrow_bytes: str


def check_table(table_key: str, wording: LimitWording, *, rows: int | None = None, arrow_bytes: int | None = None) -> None:
    """Refuse (``resource_limit``) a commit that would stage more than :data:`MAX_ROWS` rows or
    more than :data:`MAX_ARROW_BYTES` bytes of Arrow data in table ``table_key``; a count left
    None is not checked (callers check the row count before they read the rows it counts)."""
    for resource, limit, actual, template in (
        ("rows", MAX_ROWS, rows, wording.rows),
        ("arrow_bytes", MAX_ARROW_BYTES, arrow_bytes, wording.arrow_bytes),
    ):
        if actual is not None and actual > limit:
            message = template.format(table_key=table_key, actual=actual, limit=limit)
            raise ResourceLimit(resource, limit, actual, message, table_key=table_key)
