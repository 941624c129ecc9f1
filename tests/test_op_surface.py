"""The public op surface is static (issue #47): `wheelops.ops` and `wheelops.nn` import each
op module's public names by name, with literal `__all__` lists, and `wheelops` re-exports
the ops, so that readers, IDEs and type checkers find where `wheelops.layer_norm` is
defined. Those lists are written by hand; this keeps them equal to the modules in the
folders (DEVELOPING.md's checklist has the step), read from the source as written, and
checks that the imported package is what the source says.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import wheelops
import wheelops.nn
import wheelops.ops

PACKAGE = Path(wheelops.__file__).resolve().parent
SUBPACKAGES = ("ops", "nn")


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _literal_alls(tree: ast.Module) -> list[list[str]]:
    """Every `__all__ = [...]` in the module, at any depth, in order."""
    return [
        [str(v) for v in ast.literal_eval(node.value)]
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    ]


def _imports_from(tree: ast.Module, prefix: str) -> dict[str, list[str]]:
    """`from <prefix>.<module> import a, b` (or `from <prefix> import a, b`, under "") at any
    depth: module -> the names, as written."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        name = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
        if name == prefix or name.startswith(f"{prefix}."):
            module = name.removeprefix(prefix).removeprefix(".")
            found.setdefault(module, []).extend(a.name for a in node.names)
    return found


def _public_modules(subpackage: str) -> dict[str, list[str]]:
    """Each public module of the folder (not starting with "_") -> its own `__all__`."""
    modules = {}
    for path in sorted((PACKAGE / subpackage).glob("[!_]*.py")):
        alls = _literal_alls(_tree(path))
        assert len(alls) == 1, f"{path} needs one literal __all__"
        modules[path.stem] = alls[0]
    return modules


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_the_init_imports_every_module_by_name(subpackage):
    init = _tree(PACKAGE / subpackage / "__init__.py")
    modules = _public_modules(subpackage)
    imported = {
        module: names
        for module, names in _imports_from(init, f"wheelops.{subpackage}").items()
        if not module.startswith("_")  # its own helpers (_first_lookup)
    }
    assert imported == modules, (
        f"wheelops/{subpackage}/__init__.py must import each module's __all__ by name: "
        f"`from wheelops.{subpackage}.<module> import <names>`"
    )
    (listed,) = _literal_alls(init)
    assert sorted(listed) == sorted(n for names in modules.values() for n in names)
    assert sorted(getattr(wheelops, subpackage).__all__) == sorted(listed)


def test_the_package_reexports_every_op():
    ops = sorted(n for names in _public_modules("ops").values() for n in names)
    init = _tree(PACKAGE / "__init__.py")
    assert sorted(_imports_from(init, "wheelops.ops")[""]) == ops
    # The first __all__ is the one a refused or damaged import leaves, naming what exists.
    *_, complete = _literal_alls(init)
    assert set(ops) <= set(complete)
    assert set(wheelops.__all__) == set(complete)
    for name in ops:  # the same object, the `_until_built` wrapper in an unbuilt checkout
        assert getattr(wheelops, name) is getattr(wheelops.ops, name)


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_each_name_is_the_one_its_module_defines(subpackage):
    for module, names in _public_modules(subpackage).items():
        source = sys.modules[f"wheelops.{subpackage}.{module}"]
        for name in names:
            exported = getattr(getattr(wheelops, subpackage), name)
            assert getattr(exported, "__wrapped__", exported) is getattr(source, name)


def test_every_op_module_registers():
    """The registration runs `register()` of the modules behind the imported functions:
    every op module, so none is left without its fake kernel and autograd formula."""
    expected = {f"wheelops.ops.{m}" for m in _public_modules("ops")}
    assert {m.__name__ for m in wheelops.ops.OP_MODULES} == expected
    assert all(callable(m.register) for m in wheelops.ops.OP_MODULES)
