"""The package's import graph: no cycles, and the loading and guard modules never call
up into the op layer (issue #15). Read from the source of the wheelops under test,
function-level imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import wheelops

PACKAGE = Path(wheelops.__file__).resolve().parent
# What loads the libraries and decides whether it may: facts, policy, loader, doctor.
CORE = {
    "wheelops._archs",
    "wheelops._build_info",
    "wheelops._doctor",
    "wheelops._elf",
    "wheelops._guard",
    "wheelops._loader_errors",
    "wheelops._native",
    "wheelops._policy",
    "wheelops._runtime_facts",
    "wheelops._variants",
}


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


def test_the_graph_is_read():
    graph = import_graph()
    assert "wheelops._policy" in graph["wheelops._native"]
    assert "wheelops._native" in graph["wheelops.ops._checks"]


def test_no_import_cycle():
    assert _cycle(import_graph()) is None, " -> ".join(_cycle(import_graph()) or [])


def test_the_core_never_imports_the_op_layer():
    graph = import_graph()
    for module in sorted(CORE):
        upward = {t for t in graph[module] if t.startswith(("wheelops.ops", "wheelops.nn"))}
        assert not upward, f"{module} imports {sorted(upward)}"
