"""The engine's immutable records are msgspec Structs; frozen dataclasses are only its result classes.

A frozen dataclass costs about half a millisecond to create (Python compiles its generated
methods), a frozen ``msgspec.Struct`` a tenth of that, and a process creates every class of the
modules a query imports before its first answer (``docs/queries.md``, "What it costs,
measured"). The result classes (``engine/results.py``) stay dataclasses: the HTTP server's
response models are those classes, and FastAPI reads dataclasses. Mutable working objects
(``@dataclass`` without ``frozen``) are not records and may stay dataclasses.
"""

from __future__ import annotations

import ast
from pathlib import Path

import msgspec

from omnigraph.engine.gq.syntax import Query
from omnigraph.engine.manifest.rows import TableEntry
from omnigraph.engine.schema.tables import TableDef

ENGINE = Path(__file__).resolve().parents[2] / "engine"
RESULTS = ENGINE / "results.py"


def _is_frozen_dataclass(decorator: ast.expr) -> bool:
    """Whether ``decorator`` is ``dataclass(frozen=True, ...)``."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name) and decorator.func.id == "dataclass"):
        return False
    return any(
        keyword.arg == "frozen" and isinstance(keyword.value, ast.Constant) and keyword.value.value for keyword in decorator.keywords
    )


def _frozen_dataclasses(path: Path) -> list[str]:
    """``path:line class`` of each class decorated ``@dataclass(frozen=True, ...)`` in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.relative_to(ENGINE.parent)}:{node.lineno} {node.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and any(_is_frozen_dataclass(decorator) for decorator in node.decorator_list)
    ]


def test_no_frozen_dataclass_in_the_engine_but_its_results() -> None:
    offenders = [found for path in sorted(ENGINE.rglob("*.py")) if path != RESULTS for found in _frozen_dataclasses(path)]
    assert offenders == []


def test_the_scan_finds_the_result_classes() -> None:
    # The scan above would pass on any tree if it found nothing: it finds every result class.
    assert len(_frozen_dataclasses(RESULTS)) >= 14


def test_records_are_frozen_structs() -> None:
    for record in (Query, TableDef, TableEntry):
        assert issubclass(record, msgspec.Struct)
        assert record.__struct_config__.frozen
