"""``Range`` requests on one Blob cell (RFC 9110 section 14): which bytes a request asks for.

Only one range of the ``bytes`` unit is served. :func:`byte_range` gives ``(start, stop)``
(``stop`` exclusive) for a satisfiable single range, None when the whole cell is to be sent (no
``Range``, another unit, a malformed value or several ranges: the header is ignored, as the RFC
allows), and raises ``range_not_satisfiable`` (416) for a single range that selects no byte: a
first byte at or past the end (every range of an empty cell), or a suffix of length 0.
"""

from __future__ import annotations

import re

from omnigraph.server.errors import RangeNotSatisfiable

_SINGLE = re.compile(r"^bytes=(\d*)-(\d*)$")


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The bytes ``[start, stop)`` of a cell of ``size`` bytes that ``header`` asks for (module docstring)."""
    if header is None:
        return None
    match = _SINGLE.match(header.replace(" ", ""))
    if match is None:
        return None  # several ranges, another unit or a malformed value: the whole cell
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:
        length = int(last)
        if length == 0 or size == 0:
            raise _unsatisfiable(header, size)
        return max(size - length, 0), size
    start = int(first)
    if last and int(last) < start:
        return None  # a malformed range is ignored
    if start >= size:
        raise _unsatisfiable(header, size)
    return start, size if not last else min(int(last) + 1, size)


def _unsatisfiable(header: str, size: int) -> RangeNotSatisfiable:
    return RangeNotSatisfiable(
        f"Range {header!r} selects no byte of this {size}-byte cell; ask for bytes below {size}, or send no Range",
        {"range": header, "size": size},
    )
