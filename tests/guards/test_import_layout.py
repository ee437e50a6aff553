"""Import layout: which engine sub-package may import which, and no import cycle anywhere.

Every module of the installed ``omnigraph`` package (plus ``examples``) is
parsed with :mod:`ast`; nothing is imported. The rules:

* ``omnigraph.engine.records`` (JSONL and Arrow records, validation, the row spool) imports nothing of the
  engine but ``omnigraph.engine.records`` itself, ``omnigraph.engine.schema`` and ``omnigraph.engine.errors``: it parses and
  validates rows and never touches storage, the manifest or the write path.
* ``omnigraph.engine.storage`` (the object store, Lance dataset opening, root-relative names, stamps,
  canonical JSON) imports no other engine sub-package but ``omnigraph.engine.errors``.
* ``omnigraph.engine.door`` (the only code that writes rows of keyed tables) imports only
  ``omnigraph.engine.storage``, ``omnigraph.engine.errors`` and ``omnigraph.engine.schema``.
* ``omnigraph.engine.schema`` imports only ``omnigraph.engine.errors``, ``omnigraph.engine.lexer`` (the scanner both
  languages share) and ``omnigraph.engine.storage.names`` (the single definition of the Lance primary-key metadata
  key, which the schema puts on ``id``).
* No module under ``engine/`` imports ``migrator``, ``cli``, ``server``, ``playbooks``, ``ledger``
  or ``claims``.
* The engine's sub-packages and top-level modules are layered (:data:`ENGINE_LAYERS`, lowest
  first): ``errors``, ``failpoints``, ``lexer`` and ``progress``; ``allocator`` and ``results``;
  ``storage``; ``schema``; ``door``, ``records`` and ``gq``; ``manifest``; ``reconcile``;
  ``access``; ``graph``; ``ops``, ``maintenance`` and ``query``. Each imports only from layers below its own, so they depend on one another
  without a cycle.
* The module graph has no cycle. Only imports that run when a module is imported count: those at
  module level (including class bodies, ``try`` and ``if`` blocks), not those inside functions
  or under ``if TYPE_CHECKING:``. An import of ``a.b.c`` also depends on the packages ``a`` and
  ``a.b`` (their ``__init__`` runs first) unless the importer is inside them; ``from a.b import
  c`` depends on the module ``a.b.c`` when ``c`` is one. ``tests`` and ``bench`` are not in the
  graph: their files import their siblings as top-level modules.

The direction rules count every import, wherever it is (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.project_modules import project_modules

FORBIDDEN_IN_ENGINE = tuple(f"omnigraph.{p}" for p in ("migrator", "cli", "server", "playbooks", "ledger", "claims"))
# package -> the engine modules (or packages) it may import besides itself
ENGINE_RULES = {
    "omnigraph.engine.records": ("omnigraph.engine.schema", "omnigraph.engine.errors"),
    "omnigraph.engine.storage": ("omnigraph.engine.errors",),
    "omnigraph.engine.door": ("omnigraph.engine.storage", "omnigraph.engine.errors", "omnigraph.engine.schema"),
    # results: the scalar type names' Arrow aliases, shared with the query answers it types
    "omnigraph.engine.schema": (
        "omnigraph.engine.errors",
        "omnigraph.engine.lexer",
        "omnigraph.engine.results",
        "omnigraph.engine.storage.names",
    ),
}


MODULES = project_modules("examples")


def is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(body: list[ast.stmt], *, module_level: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if not module_level:
                yield from _imports(node.body, module_level=False)
        elif isinstance(node, ast.If) and module_level and _is_type_checking(node.test):
            continue
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in getattr(node, field, []) or []:
                    inner = child.body if isinstance(child, ast.ExceptHandler | ast.match_case) else [child]
                    yield from _imports(inner, module_level=module_level)


def imported_modules(module: str, *, module_level: bool) -> set[str]:
    """The modules ``module`` names in its imports (project modules resolved, others by name)."""
    return imported_modules_of(MODULES[module], module_level=module_level, module=module)


def imported_modules_of(path: Path, *, module_level: bool, module: str = "") -> set[str]:
    """The modules the file at ``path`` (the module ``module``, for relative imports) names in its imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in _imports(tree.body, module_level=module_level):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            package = module if module in MODULES and is_package(module) else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        found.add(base)
        found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES)
    return found


def dependencies(module: str) -> set[str]:
    """Project modules that run when ``module`` is imported: its imports and their packages."""
    own = {module.rsplit(".", n)[0] for n in range(1, module.count(".") + 1)}
    result = set()
    for target in imported_modules(module, module_level=True):
        parts = target.split(".")
        for n in range(1, len(parts) + 1):
            prefix = ".".join(parts[:n])
            if prefix in MODULES and prefix not in own and prefix != module:
                result.add(prefix)
    return result


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_walk_sees_the_layout() -> None:
    for name in (
        "omnigraph.engine.records",
        "omnigraph.engine.storage",
        "omnigraph.engine.door",
        "omnigraph.engine.storage.names",
        "omnigraph.migrator.layout",
    ):
        assert name in MODULES, name


@pytest.mark.parametrize("package", sorted(ENGINE_RULES))
def test_engine_package_imports_only_what_it_may(package: str) -> None:
    allowed = (package, *ENGINE_RULES[package])
    violations = [
        f"{module} imports {target}"
        for module in MODULES
        if _inside(module, package)
        for target in sorted(imported_modules(module, module_level=False))
        if _inside(target, "omnigraph.engine") and not any(_inside(target, ok) for ok in allowed)
    ]
    assert violations == []


def test_engine_imports_no_upper_layer() -> None:
    violations = [
        f"{module} imports {target}"
        for module in MODULES
        if _inside(module, "omnigraph.engine")
        for target in sorted(imported_modules(module, module_level=False))
        if any(_inside(target, top) for top in FORBIDDEN_IN_ENGINE)
    ]
    assert violations == []


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that starts and ends at the same node, or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle() -> None:
    graph = {module: dependencies(module) for module in MODULES}
    assert find_cycle(graph) is None


ENGINE_LAYERS = (
    (
        "omnigraph.engine.errors",
        "omnigraph.engine.failpoints",
        "omnigraph.engine.lexer",
        "omnigraph.engine.progress",
    ),
    ("omnigraph.engine.allocator", "omnigraph.engine.results"),
    ("omnigraph.engine.storage",),
    ("omnigraph.engine.schema",),
    ("omnigraph.engine.door", "omnigraph.engine.records", "omnigraph.engine.gq"),
    ("omnigraph.engine.manifest",),
    ("omnigraph.engine.reconcile",),
    ("omnigraph.engine.access",),
    ("omnigraph.engine.graph",),
    ("omnigraph.engine.ops", "omnigraph.engine.maintenance", "omnigraph.engine.query"),
)
LAYER = {unit: index for index, units in enumerate(ENGINE_LAYERS) for unit in units}


def engine_unit(module: str) -> str:
    """The engine sub-package or top-level engine module ``module`` belongs to."""
    return ".".join(module.split(".")[:3])


def test_every_engine_unit_has_a_layer() -> None:
    units = {engine_unit(module) for module in MODULES if _inside(module, "omnigraph.engine") and module != "omnigraph.engine"}
    assert units == set(LAYER)


def test_engine_layers_import_only_downwards() -> None:
    violations = [
        f"{module} imports {target}"
        for module in MODULES
        if _inside(module, "omnigraph.engine") and module != "omnigraph.engine"
        for target in sorted(imported_modules(module, module_level=False))
        if _inside(target, "omnigraph.engine")
        and target != "omnigraph.engine"
        and engine_unit(target) != engine_unit(module)
        and LAYER[engine_unit(target)] >= LAYER[engine_unit(module)]
    ]
    assert violations == []
