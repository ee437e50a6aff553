"""The public names of the Python API stay: every public module declares ``__all__``, each name in
it resolves, and none of the names below disappears (adding names is fine; removing or renaming
one is a breaking change and must be a decision, made here). Every public function, class and
``Graph`` method has a docstring, and every error a ``Raises:`` section names is a class of
``omnigraph.errors``."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

import omnigraph

PUBLIC: dict[str, set[str]] = {
    "omnigraph": {
        "BadRequest",
        "BlobReader",
        "Branch",
        "CheckReport",
        "ChunkedMutationResult",
        "ClaimHeld",
        "Commit",
        "CreatedBranch",
        "DeletedBranch",
        "ENGINE",
        "FORMAT_4_WRITER",
        "FormatBarrier",
        "FormatRefused",
        "Graph",
        "InitResult",
        "KeyConflict",
        "LoadResult",
        "MergeConflict",
        "MergeResult",
        "MutationResult",
        "NotFound",
        "OmnigraphError",
        "PreconditionFailed",
        "QueryResult",
        "ReadOnlyGraph",
        "ReadSetConflict",
        "Readiness",
        "Recovery",
        "RecoveryRequired",
        "ResourceLimit",
        "Snapshot",
        "SnapshotTable",
        "ValidationFailed",
        "WRITES_FORMAT",
        "__version__",
        "check",
        "default_actor",
        "errors",
        "init",
        "maintenance",
        "migrate",
    },
    "omnigraph.adjacency": {"CacheStats", "Event", "Listener", "adjacency_stats", "listen"},
    "omnigraph.errors": {
        "BadRequest",
        "ClaimCorrupt",
        "ClaimHeld",
        "DriftDetected",
        "EXIT_CLAIM_HELD",
        "EXIT_ERROR",
        "EXIT_FORMAT_REFUSED",
        "EXIT_OK",
        "EXIT_RECOVERY_REQUIRED",
        "EXIT_USAGE",
        "EXIT_VALIDATION_FAILED",
        "ExecutorFailed",
        "FleetActive",
        "FormatBarrier",
        "FormatRefused",
        "Internal",
        "KeyConflict",
        "LedgerCorrupt",
        "LedgerFenced",
        "MergeConflict",
        "MigrationRefused",
        "NotFound",
        "OmnigraphError",
        "PreconditionFailed",
        "ReadOnlyGraph",
        "ReadSetConflict",
        "RecoveryRequired",
        "ResourceLimit",
        "StorageAccessDenied",
        "StorageUnavailable",
        "TableDrift",
        "ValidationFailed",
        "exit_code_for",
    },
    "omnigraph.results": {
        "Branch",
        "ChunkedMutationResult",
        "Commit",
        "CreatedBranch",
        "DeletedBranch",
        "InitResult",
        "LoadResult",
        "MergeResult",
        "MutationResult",
        "QueryResult",
        "Readiness",
        "Snapshot",
        "SnapshotTable",
    },
    "omnigraph.graph": {"Graph", "PROGRAMS", "connect", "create"},
    "omnigraph.inputs": {"LoadData", "open_data_file", "opened_data"},
    "omnigraph.sources": {"MAX_ROWS", "MutationSource", "check_mutation", "check_read_query"},
    "omnigraph.lint": {"lint"},
    "omnigraph.migrate": {
        "Aborted",
        "Copied",
        "Migrated",
        "Plan",
        "Preflight",
        "Progress",
        "SilentProgress",
        "Status",
        "UpToDate",
        "Verification",
        "abort",
        "copy",
        "plan",
        "preflight",
        "resume",
        "run",
        "status",
        "verify",
    },
    "omnigraph.maintenance": {
        "DriftAdopted",
        "DriftReverted",
        "DriftShown",
        "OptimizeReport",
        "Recovered",
        "drift_adopt",
        "drift_revert",
        "drift_show",
        "optimize",
        "recover",
    },
}
GRAPH_METHODS = {
    "blob",
    "branches",
    "check",
    "close",
    "commits",
    "create_branch",
    "delete_branch",
    "export",
    "export_jsonl",
    "export_tables",
    "fleet_membership",
    "load",
    "merge",
    "mutate",
    "mutate_chunked",
    "open_blob",
    "open_query",
    "query",
    "readiness",
    "resume_mutation",
    "snapshot",
    "stamp",
}
RAISES = re.compile(r"^\s*Raises:\n((?:\s{8,}.*\n?)+)", re.MULTILINE)


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_no_public_name_disappears(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = set(module.__all__)
    assert PUBLIC[module_name] - exported == set(), "removed from the public API"
    for name in sorted(exported):
        assert getattr(module, name) is not None, name


def test_open_is_public_but_not_star_exported() -> None:
    assert inspect.isfunction(omnigraph.open) and "open" not in omnigraph.__all__
    namespace: dict[str, object] = {}
    exec("from omnigraph import *", namespace)
    assert "open" not in namespace and "init" in namespace


def test_every_graph_method_stays() -> None:
    methods = {name for name, _ in inspect.getmembers(omnigraph.Graph, callable) if not name.startswith("_")}
    assert GRAPH_METHODS - methods == set()


def _documented() -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for module_name in sorted(PUBLIC):
        module = importlib.import_module(module_name)
        for name in [*module.__all__, *(["open"] if module is omnigraph else [])]:
            value = getattr(module, name)
            if (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__.startswith("omnigraph"):
                found.append((f"{module_name}.{name}", value))
    found += [(f"Graph.{name}", getattr(omnigraph.Graph, name)) for name in sorted(GRAPH_METHODS)]
    return found


def test_every_public_function_and_method_is_documented_with_the_errors_it_raises() -> None:
    documented = _documented()
    assert len(documented) > 60
    with_raises = 0
    for qualified, value in documented:
        doc = inspect.getdoc(value)
        assert doc, f"{qualified} has no docstring"
        for section in RAISES.findall(getattr(value, "__doc__", "") or ""):
            with_raises += 1
            for error in re.findall(r"^\s{8,}(\w+):", section, re.MULTILINE):
                assert isinstance(getattr(omnigraph.errors, error, None), type), f"{qualified} names {error}"
    assert with_raises >= 30
