"""The package's import graph: no cycles, and the loading and guard modules never call
up into the op layer (issue #15). Read from the source of the wheelops under test,
function-level imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import wheelops

PACKAGE = Path(wheelops.__file__).resolve().parent
# What loads the libraries and decides whether it may: facts, matrix, policy, loader, doctor.
CORE = "wheelops._compat"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.with_suffix("").relative_to(PACKAGE.parent).parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """module -> the wheelops modules it imports (at any depth of its code)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    graph[name].add(target if target in modules else base)
            elif isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names)
        graph[name] &= set(modules)
        graph[name].discard(name)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for target in sorted(graph[node]):
            # A package importing its own submodules is how packages work, not a cycle.
            if target.startswith(node + "."):
                continue
            found = visit(target, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return None


def _core(graph: dict[str, set[str]]) -> list[str]:
    return sorted(m for m in graph if m == CORE or m.startswith(CORE + "."))


def test_the_graph_is_read():
    graph = import_graph()
    assert f"{CORE}.policy" in graph[f"{CORE}.loader"]
    assert f"{CORE}.loader" in graph["wheelops.ops._checks"]
    assert len(_core(graph)) >= 8


def test_no_import_cycle():
    assert _cycle(import_graph()) is None, " -> ".join(_cycle(import_graph()) or [])


def test_the_core_imports_only_itself():
    # Never up into the op layer; and nothing outside the folder at all, so that the build
    # tooling loads it as a package of its own (build_tools/compat.py).
    graph = import_graph()
    for module in _core(graph):
        outside = {t for t in graph[module] if not t.startswith(CORE)}
        assert not outside, f"{module} imports {sorted(outside)}"


def _imported_names(path: Path) -> set[str]:
    """Every module name an import statement in the file names (any depth of its code)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_package_never_imports_build_tools():
    # The wheel ships without build_tools: dev mode is build_tools/dev.py (issue #28).
    for name, path in _modules().items():
        tools = {n for n in _imported_names(path) if n.split(".")[0] == "build_tools"}
        assert not tools, f"{name} imports {sorted(tools)}"


def test_only_the_damage_reader_loads_code_by_location():
    # The rest of the package is imported; _damage reads RECORD by location on purpose,
    # where the package's own imports fail (see build_tools/compat.py for the others), and
    # _accel loads the autograd accelerator built for this torch, a file named by version.
    loading = {
        name
        for name, path in _modules().items()
        if "spec_from_file_location" in path.read_text() or "SourceFileLoader" in path.read_text()
    }
    assert loading == {"wheelops._damage", "wheelops.ops._accel"}
