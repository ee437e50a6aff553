"""Recording what a function returns while it runs in place, for tests that must know which path answered."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock


@contextmanager
def returns_of(module: Any, name: str) -> Iterator[list[Any]]:
    """Within the block, ``module.name`` is called as before, and each value it returns is appended to the list yielded."""
    returned: list[Any] = []
    real = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        returned.append(real(*args, **kwargs))
        return returned[-1]

    with mock.patch.object(module, name, spy):
        yield returned
