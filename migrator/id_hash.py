"""A vectorised 64-bit hash of Arrow string arrays (numpy), for partitioning and digests.

``hash_strings(array)`` returns one ``uint64`` per string: a polynomial hash of its UTF-8 bytes
(arithmetic mod 2^64) finished with the splitmix64 mixer and the length. It is deterministic
across processes and platforms (no seeding), so digests computed from it can be compared between
runs. Collisions are possible; callers use it to spread ids over partitions and to fingerprint
an id multiset, never to decide that two ids are equal.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_MULTIPLIER = np.uint64(0x100000001B3)
_MAX_POWERS = 1 << 16
_POWERS = np.cumprod(np.full(_MAX_POWERS, _MULTIPLIER, dtype=np.uint64), dtype=np.uint64)


def _splitmix64(values: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = values + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hash_strings(array: pa.Array) -> np.ndarray:
    """One uint64 per element of a non-null utf8/large_utf8 array."""
    if array.null_count:
        raise ValueError("hash_strings needs a non-null array")
    array = array.cast(pa.large_utf8()) if pa.types.is_string(array.type) else array
    count = len(array)
    if count == 0:
        return np.zeros(0, dtype=np.uint64)
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64)[array.offset : array.offset + count + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    start, end = int(offsets[0]), int(offsets[-1])
    lengths = np.diff(offsets)
    if lengths.max(initial=0) > _MAX_POWERS:
        raise ValueError(f"an id longer than {_MAX_POWERS} bytes cannot be hashed")
    owner = np.repeat(np.arange(count), lengths)
    position = np.arange(end - start) - (offsets[:-1] - start)[owner]
    with np.errstate(over="ignore"):
        terms = (data[start:end].astype(np.uint64) + np.uint64(1)) * _POWERS[position]
        sums = np.zeros(count, dtype=np.uint64)
        nonempty = lengths > 0
        if terms.size:
            sums[nonempty] = np.add.reduceat(terms, (offsets[:-1] - start)[nonempty])
        return _splitmix64(sums ^ _splitmix64(lengths.astype(np.uint64)))
