"""The Python blocks of the README and the docs pages (DEVELOPING.md, docs/) run as written
(issue #29): `>>>` blocks as doctests (their printed values checked), the others as
scripts. A block that needs a GPU is marked gpu: it runs on the GPU machine and is skipped
only where there is none."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
PAGES = [README, REPO / "DEVELOPING.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCKS = [
    (page, page.read_text()[: match.start()].count("\n") + 1, match.group(1))
    for page in PAGES
    if page.is_file()
    for match in re.finditer(r"^```python\n(.*?)^```", page.read_text(), re.M | re.S)
]


def _param(page: Path, line: int, code: str) -> object:
    # A block that cannot run without a GPU names the device outright; the quickstart picks
    # "cuda" only where torch.cuda.is_available(), so it runs (and is tested) on the CPU too.
    needs_gpu = re.search(r'device="cuda"|\.cuda\(|torch\.device\("cuda', code)
    marks = [pytest.mark.gpu] if needs_gpu else []
    name = page.relative_to(REPO).as_posix()
    return pytest.param(page, code, id=f"{name}:{line}", marks=marks)


def test_the_readme_has_python_blocks():
    assert len([page for page, _, _ in BLOCKS if page == README]) >= 2, BLOCKS


@pytest.mark.parametrize(("page", "code"), [_param(*block) for block in BLOCKS])
def test_a_python_block_runs_as_written(page: Path, code: str) -> None:
    if code.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(code, {}, page.name, str(page), 0)
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        results = runner.run(test, out=print)
        assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed"
    else:
        exec(compile(code, str(page), "exec"), {"__name__": "readme"})
