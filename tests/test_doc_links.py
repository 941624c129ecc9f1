"""Every relative link of the project's Markdown resolves: the file it names exists, and
an anchor (`#section`) names a heading of that file, as GitHub and PyPI render them.

Files leave the tree (benchmarks/results keeps tables and JSON, git history the rest) and
README sections move to docs/: a link left behind then fails here, not for a reader.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
if not (REPO / "docs").is_dir():
    pytest.skip("needs the source checkout", allow_module_level=True)

SKIPPED_DIRS = {".git", ".nox", "build", "dist", "node_modules", "site"}
PAGES = sorted(
    path
    for path in REPO.rglob("*.md")
    if not SKIPPED_DIRS.intersection(path.relative_to(REPO).parts[:-1])
    and not any(part.startswith((".", "venv")) for part in path.relative_to(REPO).parts[:-1])
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation but '-' and '_' dropped, spaces '-'."""
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_the_pages_are_found():
    names = {p.relative_to(REPO).as_posix() for p in PAGES}
    assert {"README.md", "DEVELOPING.md", "benchmarks/results/README.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(page: Path):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor}")
    assert not broken, broken
