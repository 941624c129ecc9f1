"""docs/design.md's table of the compatibility core names every module of src/wheelops/_compat/
and no other, in an order that data flows: no module imports one below it in the table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_import_graph import CORE, import_graph

REPO = Path(__file__).resolve().parent.parent
DESIGN = REPO / "docs" / "design.md"
CORE_DIR = REPO / "src" / "wheelops" / "_compat"
if not DESIGN.is_file():
    pytest.skip("needs the source checkout", allow_module_level=True)


def table() -> list[str]:
    """The first word of each row of the section's code block: `rules/cuda` for rules/cuda.py."""
    section = DESIGN.read_text().split("\n## The compatibility core\n", 1)[1].split("\n## ")[0]
    block = re.search(r"^```\n(.*?)^```", section, flags=re.M | re.S)
    assert block, "no code block in docs/design.md's core section"
    return [line.split()[0] for line in block.group(1).splitlines() if line.strip()]


def test_the_table_names_every_module_once():
    on_disk = sorted(
        p.relative_to(CORE_DIR).with_suffix("").as_posix()
        for p in CORE_DIR.rglob("*.py")
        if p.name != "__init__.py"
    )
    named = table()
    assert len(named) == len(set(named)), sorted(n for n in named if named.count(n) > 1)
    assert sorted(named) == on_disk


def test_no_module_imports_one_below_it():
    rows = [f"{CORE}.{name.replace('/', '.')}" for name in table()]
    graph = import_graph()
    for i, module in enumerate(rows):
        below = graph.get(module, set()) & set(rows[i + 1 :])
        assert not below, f"{module} imports {sorted(below)}, below it in docs/design.md"
