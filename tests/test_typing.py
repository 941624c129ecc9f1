"""The public API is typed for users' type checkers (PEP 561): the wheel ships `py.typed`,
and the packages import every op and module by name (tests/test_op_surface.py), so mypy
reads the ops' own annotations and checks a user's calls against them."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _checkout import REPO

import wheelops
from build_tools.run import steps

PACKAGE = Path(wheelops.__file__).resolve().parent

USER_CODE = {
    "right.py": """
        import torch

        import wheelops

        x = torch.ones(3)
        y: torch.Tensor = wheelops.add(x, x)
        z: torch.Tensor = wheelops.ops.softmax(x, dim=0)
        m: torch.nn.Module = wheelops.nn.SiluAndMul()
        version: str = wheelops.__version__
    """,
    "wrong.py": """
        import torch

        import wheelops

        x = torch.ones(3)
        y: int = wheelops.add(x, x)
    """,
}


def _installed() -> bool:
    try:
        files = importlib.metadata.distribution("wheelops").files or []
    except importlib.metadata.PackageNotFoundError:
        return False
    return any(f.name == "py.typed" for f in files) and not wheelops.build_info().dev_mode


def test_the_package_says_it_is_typed():
    assert (PACKAGE / "py.typed").is_file()
    # A stub beside a package's source is what type checkers read instead of it: builds wrote
    # them when the surface was found at import; one left in a checkout hides a new op.
    stale = sorted(str(p) for p in PACKAGE.rglob("*.pyi"))
    assert not stale, f"delete these generated stubs (the sources are typed): {stale}"
    if _installed():  # in the wheel's RECORD too, not only on disk
        files = {str(f) for f in importlib.metadata.distribution("wheelops").files or []}
        assert "wheelops/py.typed" in files


@pytest.mark.slow
def test_mypy_checks_user_code_against_the_public_api(tmp_path):
    pytest.importorskip("mypy", reason="pip install mypy (the test sessions install it)")
    for name, code in USER_CODE.items():
        (tmp_path / name).write_text(textwrap.dedent(code))
    env = dict(os.environ)
    if not _installed():  # a checkout: mypy reads it as source; installed, as a typed package
        env["MYPYPATH"] = str(PACKAGE.parent)
    result = subprocess.run(
        [
            *(sys.executable, "-m", "mypy", "--follow-imports=silent"),
            *("--cache-dir", str(tmp_path / "cache"), "right.py", "wrong.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert errors == [
        'wrong.py:7: error: Incompatible types in assignment (expression has type "Tensor", '
        'variable has type "int")  [assignment]'
    ], result.stdout + result.stderr


def test_every_test_environment_installs_mypy():
    """The mypy test runs wherever the suite does: nox's test sessions, pyproject's `test`
    extra and cibuildwheel's test environment each install mypy."""
    assert any(r.startswith("mypy==") for r in steps.TEST_REQUIREMENTS)
    pyproject = (REPO / "pyproject.toml").read_text()
    starts = ("test =", "test-requires =")  # the extra; cibuildwheel's
    lists = [line for line in pyproject.splitlines() if line.startswith(starts)]
    assert len(lists) == 2 and all('"mypy' in line for line in lists), lists
