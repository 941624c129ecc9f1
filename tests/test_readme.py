"""The README's Python blocks run as written (issue #29): `>>>` blocks as doctests (their
printed values checked), the others as scripts. A block that needs a GPU is marked gpu: it
runs on the GPU machine and is skipped only where there is none."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = [
    (README.read_text()[: match.start()].count("\n") + 1, match.group(1))
    for match in re.finditer(r"^```python\n(.*?)^```", README.read_text(), re.M | re.S)
]


def _param(line: int, code: str) -> object:
    # A block that cannot run without a GPU names the device outright; the quickstart picks
    # "cuda" only where torch.cuda.is_available(), so it runs (and is tested) on the CPU too.
    needs_gpu = re.search(r'device="cuda"|\.cuda\(|torch\.device\("cuda', code)
    marks = [pytest.mark.gpu] if needs_gpu else []
    return pytest.param(code, id=f"README.md:{line}", marks=marks)


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 2, BLOCKS


@pytest.mark.parametrize("code", [_param(line, code) for line, code in BLOCKS])
def test_a_readme_python_block_runs_as_written(code: str) -> None:
    if code.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(code, {}, "README", str(README), 0)
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        results = runner.run(test, out=print)
        assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed"
    else:
        exec(compile(code, str(README), "exec"), {"__name__": "readme"})
